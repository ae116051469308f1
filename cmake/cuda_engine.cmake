# GPU engine: libjaxmg_cuda.so (cuSOLVERMp 0.9.1 + cuBLASMp 0.10 + NCCL >= 2.29), included by
# CMakeLists.txt when -DJAXMG_CUDA=ON. Building needs nvcc 13.x and the headers/libraries below,
# but no GPU.
#
#   JAXMG_CUSOLVERMP_ROOT  folder with include/cusolverMp.h and lib/libcusolverMp.so.0
#                          (the nvidia/cu13 folder of the nvidia-cusolvermp-cu13 0.9.1 wheel)
#   JAXMG_CUBLASMP_ROOT    folder with include/cublasmp.h and lib/libcublasmp.so.0
#                          (nvidia/cublasmp/cu13 of the nvidia-cublasmp-cu13 0.10 wheel)
#   JAXMG_NCCL_ROOT        folder with include/nccl.h and lib/libnccl.so.2 (nvidia/nccl of the
#                          nvidia-nccl-cu13 >= 2.29 wheel)
#   JAXMG_CUDA_EXTRA_INCLUDES  folders with cusolverDn.h / cusolver_common.h and cublas_v2.h
#                          when the CUDA toolkit lacks them (nvidia-cusolver / nvidia-cublas
#                          wheels: nvidia/cu13/include)
#
# Defaults: those folders in the build Python's site-packages, looked up on its sys.path, which
# also covers pip's isolated build environment (build_backend/jaxmg_build.py makes the wheels
# build requirements there).
#
# The toolkit's headers win. NVIDIA's cu13 wheels share one include folder (nvidia/cu13/include),
# which also holds the CUDA runtime headers of the nvidia-cuda-runtime wheel that pip resolves,
# often newer than nvcc (13.5 headers with nvcc 13.0 fail in ptxas: "Unresolved extern function
# '__nv_ldg_d_impl'"). So the wheels' include folders are never put on the command line: the
# headers they hold that the toolkit lacks (cuSOLVERMp, cuBLASMp, NCCL, cuSOLVER, cuBLAS, ...)
# are copied into one folder of the build tree (jaxmg_wheel_include), and a tiny CUDA file is
# compiled against it at configure time, so that a build that cannot work stops here, with the
# cause, before minutes of compiling. Copied only when different, at a fixed path of the build
# tree, so that the compile lines do not name the build environment's folder.
#
# The CUDA runtime is linked shared (-cudart shared): libcusolverMp.so.0 needs libcudart.so.13
# anyway, so the process keeps one runtime (the one of the nvidia-cuda-runtime wheel JAX loads).
# Only the .so.N files ship in the wheels, so libraries are linked by full file name.
if(NOT CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90)  # H100 / H200
endif()
string(CONCAT _jaxmg_skip_hint
  "To build jaxmg without the GPU engine (CPU engine only), set JAXMG_CUDA=OFF: "
  "`JAXMG_CUDA=OFF pip install .` (or cmake -DJAXMG_CUDA=OFF).")

include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  message(FATAL_ERROR
    "GPU engine (JAXMG_CUDA=ON): no working CUDA compiler found (nvcc on PATH, CUDACXX, or "
    "-DCMAKE_CUDA_COMPILER). The GPU engine needs nvcc 13.x (no GPU needed to build). "
    "${_jaxmg_skip_hint}")
endif()
enable_language(CUDA)
if(CMAKE_CUDA_COMPILER_VERSION VERSION_LESS 13 OR CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 14)
  message(FATAL_ERROR
    "GPU engine (JAXMG_CUDA=ON): nvcc ${CMAKE_CUDA_COMPILER_VERSION} (${CMAKE_CUDA_COMPILER}) is "
    "not CUDA 13.x. The GPU engine links NVIDIA's CUDA 13 wheels (cuSOLVERMp 0.9.1 for cu13, "
    "libcudart.so.13): put CUDA 13's nvcc first on PATH or name it in CUDACXX. "
    "${_jaxmg_skip_hint}")
endif()
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
find_package(CUDAToolkit REQUIRED)
set(_jaxmg_toolkit_includes ${CUDAToolkit_INCLUDE_DIRS} ${CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES})
list(REMOVE_DUPLICATES _jaxmg_toolkit_includes)
message(STATUS "GPU engine: nvcc ${CMAKE_CUDA_COMPILER_VERSION} (${CMAKE_CUDA_COMPILER}), "
               "toolkit headers ${_jaxmg_toolkit_includes}, sm_${CMAKE_CUDA_ARCHITECTURES}")

set(JAXMG_CUSOLVERMP_ROOT "" CACHE PATH "cuSOLVERMp 0.9 root (include/, lib/)")
set(JAXMG_CUBLASMP_ROOT "" CACHE PATH "cuBLASMp 0.10 root (include/, lib/)")
set(JAXMG_NCCL_ROOT "" CACHE PATH "NCCL >= 2.29 root (include/, lib/)")
set(JAXMG_CUDA_EXTRA_INCLUDES "" CACHE STRING "extra include folders (cusolverDn.h, cublas_v2.h)")

# Defaults: the wheels installed for this Python (nvidia-cusolvermp-cu13, nvidia-cublasmp-cu13,
# nvidia-nccl-cu13, nvidia-cusolver, nvidia-cublas all put their files under
# site-packages/nvidia/). Not cached: an isolated build environment is a new folder each time.
set(_jaxmg_extra_includes ${JAXMG_CUDA_EXTRA_INCLUDES})
if(NOT JAXMG_CUSOLVERMP_ROOT OR NOT JAXMG_CUBLASMP_ROOT OR NOT JAXMG_NCCL_ROOT)
  find_package(Python COMPONENTS Interpreter REQUIRED)
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c [=[
import os, sys
print(";".join(p for p in sys.path if p and os.path.isdir(os.path.join(p, "nvidia"))))
]=]
    OUTPUT_VARIABLE _jaxmg_sites OUTPUT_STRIP_TRAILING_WHITESPACE)
  foreach(_site IN LISTS _jaxmg_sites)
    if(NOT JAXMG_CUSOLVERMP_ROOT AND EXISTS "${_site}/nvidia/cu13/include/cusolverMp.h")
      set(JAXMG_CUSOLVERMP_ROOT "${_site}/nvidia/cu13")
    endif()
    if(NOT JAXMG_CUBLASMP_ROOT AND EXISTS "${_site}/nvidia/cublasmp/cu13/include/cublasmp.h")
      set(JAXMG_CUBLASMP_ROOT "${_site}/nvidia/cublasmp/cu13")
    endif()
    if(NOT JAXMG_NCCL_ROOT AND EXISTS "${_site}/nvidia/nccl/include/nccl.h")
      set(JAXMG_NCCL_ROOT "${_site}/nvidia/nccl")
    endif()
    # cusolverDn.h, cublas_v2.h (nvidia-cusolver, nvidia-cublas: dependencies of the above)
    if(EXISTS "${_site}/nvidia/cu13/include")
      list(APPEND _jaxmg_extra_includes "${_site}/nvidia/cu13/include")
    endif()
  endforeach()
endif()
string(CONCAT _jaxmg_gpu_hint
  "The GPU engine builds against NVIDIA's wheels: pip install "
  "nvidia-cusolvermp-cu13==0.9.1.9318.post1 nvidia-cublasmp-cu13==0.10.0.3695 "
  "'nvidia-nccl-cu13>=2.29.2' into the building Python (an isolated `pip install .` does it), "
  "or pass -DJAXMG_CUSOLVERMP_ROOT, -DJAXMG_CUBLASMP_ROOT and -DJAXMG_NCCL_ROOT. "
  "${_jaxmg_skip_hint}")
foreach(var JAXMG_CUSOLVERMP_ROOT JAXMG_CUBLASMP_ROOT JAXMG_NCCL_ROOT)
  if(NOT ${var})
    message(FATAL_ERROR "-DJAXMG_CUDA=ON needs -D${var}=... (see cmake/cuda_engine.cmake). "
                        "${_jaxmg_gpu_hint}")
  endif()
endforeach()
set(JAXMG_CUSOLVERMP_LIB "${JAXMG_CUSOLVERMP_ROOT}/lib/libcusolverMp.so.0")
set(JAXMG_CUBLASMP_LIB "${JAXMG_CUBLASMP_ROOT}/lib/libcublasmp.so.0")
set(JAXMG_NCCL_LIB "${JAXMG_NCCL_ROOT}/lib/libnccl.so.2")
foreach(f "${JAXMG_CUSOLVERMP_ROOT}/include/cusolverMp.h" "${JAXMG_CUSOLVERMP_LIB}"
        "${JAXMG_CUBLASMP_ROOT}/include/cublasmp.h" "${JAXMG_CUBLASMP_LIB}"
        "${JAXMG_NCCL_ROOT}/include/nccl.h" "${JAXMG_NCCL_LIB}")
  if(NOT EXISTS "${f}")
    message(FATAL_ERROR "GPU engine: ${f} not found. ${_jaxmg_gpu_hint}")
  endif()
endforeach()
message(STATUS "GPU engine: cuSOLVERMp ${JAXMG_CUSOLVERMP_ROOT}, cuBLASMp ${JAXMG_CUBLASMP_ROOT}, "
               "NCCL ${JAXMG_NCCL_ROOT}")

# The wheels' headers that the toolkit lacks, by top-level name (a file or folder of the include
# folder: cuda_runtime.h, crt/, cccl/ ... stay the toolkit's), copied into the build tree; the
# first wheel folder that has a name gives it.
set(_jaxmg_wheel_include "${CMAKE_CURRENT_BINARY_DIR}/jaxmg_wheel_include")
set(_jaxmg_copied "")
set(_jaxmg_left "")
foreach(_dir IN ITEMS "${JAXMG_CUSOLVERMP_ROOT}/include" "${JAXMG_CUBLASMP_ROOT}/include"
                      "${JAXMG_NCCL_ROOT}/include" ${_jaxmg_extra_includes})
  if(NOT IS_DIRECTORY "${_dir}")
    continue()
  endif()
  file(GLOB _tops RELATIVE "${_dir}" "${_dir}/*")
  foreach(_top IN LISTS _tops)
    set(_in_toolkit FALSE)
    foreach(_t IN LISTS _jaxmg_toolkit_includes)
      if(EXISTS "${_t}/${_top}")
        set(_in_toolkit TRUE)
      endif()
    endforeach()
    if(_in_toolkit)
      list(APPEND _jaxmg_left "${_top}")
      continue()
    endif()
    if(IS_DIRECTORY "${_dir}/${_top}")
      file(GLOB_RECURSE _files RELATIVE "${_dir}" "${_dir}/${_top}/*")
    else()
      set(_files "${_top}")
    endif()
    foreach(_f IN LISTS _files)
      if(NOT _f IN_LIST _jaxmg_copied)
        get_filename_component(_sub "${_jaxmg_wheel_include}/${_f}" DIRECTORY)
        file(MAKE_DIRECTORY "${_sub}")
        file(COPY_FILE "${_dir}/${_f}" "${_jaxmg_wheel_include}/${_f}" ONLY_IF_DIFFERENT)
        list(APPEND _jaxmg_copied "${_f}")
      endif()
    endforeach()
  endforeach()
endforeach()
file(GLOB_RECURSE _stale RELATIVE "${_jaxmg_wheel_include}" "${_jaxmg_wheel_include}/*")
foreach(_f IN LISTS _stale)
  if(NOT _f IN_LIST _jaxmg_copied)
    file(REMOVE "${_jaxmg_wheel_include}/${_f}")
  endif()
endforeach()
list(REMOVE_DUPLICATES _jaxmg_left)
list(LENGTH _jaxmg_copied _jaxmg_ncopied)
list(LENGTH _jaxmg_left _jaxmg_nleft)
message(STATUS "GPU engine: ${_jaxmg_ncopied} headers from the wheels (${_jaxmg_wheel_include}); "
               "the toolkit's own win for the ${_jaxmg_nleft} names both have (cuda_runtime.h, "
               "sm_32_intrinsics.hpp, ...)")

# Configure-time check: the headers together, device code through ptxas for the target
# architecture (where newer runtime headers than nvcc's fail: __ldg of a double), with the
# include folders in the engine's order (CUDA::cudart adds the toolkit's as -isystem).
set(_jaxmg_probe "${CMAKE_CURRENT_BINARY_DIR}/jaxmg_cuda_probe")
set(_jaxmg_probe_source [=[
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cublasmp.h>
#include <cusolverDn.h>
#include <cusolverMp.h>
#include <nccl.h>
__global__ void jaxmg_probe(const double* x, float* y, double* z) {
  z[threadIdx.x] = __ldg(x + threadIdx.x) + __ldg(y + threadIdx.x);
}
int jaxmg_probe_versions() { return CUDART_VERSION + NCCL_VERSION_CODE; }
]=])
set(_jaxmg_probe_old "")
if(EXISTS "${_jaxmg_probe}/probe.cu")
  file(READ "${_jaxmg_probe}/probe.cu" _jaxmg_probe_old)
endif()
if(NOT _jaxmg_probe_old STREQUAL _jaxmg_probe_source)  # rewritten only when it changes
  file(WRITE "${_jaxmg_probe}/probe.cu" "${_jaxmg_probe_source}")
endif()
set(_jaxmg_try_type "${CMAKE_TRY_COMPILE_TARGET_TYPE}")
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
try_compile(_jaxmg_probe_ok "${_jaxmg_probe}/build" "${_jaxmg_probe}/probe.cu"
  CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${_jaxmg_wheel_include}"
              "-DCMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES}"
  LINK_LIBRARIES CUDA::cudart
  CUDA_STANDARD 17
  OUTPUT_VARIABLE _jaxmg_probe_log)
set(CMAKE_TRY_COMPILE_TARGET_TYPE "${_jaxmg_try_type}")
if(NOT _jaxmg_probe_ok)
  string(LENGTH "${_jaxmg_probe_log}" _len)
  if(_len GREATER 4000)
    math(EXPR _from "${_len} - 4000")
    string(SUBSTRING "${_jaxmg_probe_log}" ${_from} -1 _jaxmg_probe_log)
  endif()
  message(FATAL_ERROR
    "GPU engine: nvcc ${CMAKE_CUDA_COMPILER_VERSION} (${CMAKE_CUDA_COMPILER}) cannot compile "
    "CUDA code against the CUDA toolkit's headers (${_jaxmg_toolkit_includes}) and the wheels' "
    "(${_jaxmg_wheel_include}), so the GPU engine cannot build here. The compiler said:\n"
    "${_jaxmg_probe_log}\n"
    "Check that nvcc is a complete CUDA 13.x toolkit for sm_${CMAKE_CUDA_ARCHITECTURES}; ptxas' "
    "'Unresolved extern function' means that CUDA headers newer than this nvcc came first (look "
    "at CPATH, CPLUS_INCLUDE_PATH, NVCC_PREPEND_FLAGS). ${_jaxmg_skip_hint}")
endif()
message(STATUS "GPU engine: configure-time CUDA compile check passed")

add_library(jaxmg_cuda SHARED
  csrc/engines/cusolvermp/band_eigh.cc
  csrc/engines/cusolvermp/cusolvermp.cc
  csrc/engines/cusolvermp/engine.cc
  csrc/engines/cusolvermp/inverses.cc
  csrc/engines/cusolvermp/local_blas.cc
  csrc/engines/cusolvermp/lu_1d.cc
  csrc/engines/cusolvermp/polar.cc
  csrc/engines/cusolvermp/qr_1d.cc
  csrc/engines/cusolvermp/redistribute.cc
  csrc/engines/cusolvermp/rhs.cc
  csrc/engines/cusolvermp/status.cc
  csrc/engines/cusolvermp/vendor.cc
  csrc/ffi/cuda_targets.cc
  csrc/cuda/band_apply.cu
  csrc/cuda/band_bisect.cu
  csrc/cuda/band_chase.cu
  csrc/cuda/band_vectors.cu
  csrc/cuda/kernels_diagonal.cu
  csrc/cuda/kernels_layout.cu
  csrc/cuda/kernels_polar.cu
  csrc/cuda/kernels_reflectors.cu)
target_include_directories(jaxmg_cuda PRIVATE csrc)
target_include_directories(jaxmg_cuda SYSTEM PRIVATE ${XLA_FFI_INCLUDE_DIR} "${_jaxmg_wheel_include}")
target_link_libraries(jaxmg_cuda PRIVATE jaxmg_layout CUDA::cudart "${JAXMG_CUSOLVERMP_LIB}"
                                         "${JAXMG_CUBLASMP_LIB}" "${JAXMG_NCCL_LIB}")
# Every wheel library is recorded (NEEDED), also one reached only through another (cuBLASMp
# through cuSOLVERMp), despite toolchains that link --as-needed by default: the loader then
# resolves each through the RUNPATH below, and tests/test_cuda_build.py checks the sonames.
target_link_options(jaxmg_cuda PRIVATE "LINKER:--no-as-needed")
target_compile_options(jaxmg_cuda PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra
                                          -Wno-unused-parameter>)
# Found at run time through LD_LIBRARY_PATH, or next to an installed jaxmg in site-packages
# (jaxmg/_lib -> nvidia/cu13/lib, nvidia/cublasmp/cu13/lib, nvidia/nccl/lib).
set_target_properties(jaxmg_cuda PROPERTIES
  BUILD_WITH_INSTALL_RPATH ON
  INSTALL_RPATH "\$ORIGIN;\$ORIGIN/../../nvidia/cu13/lib;\$ORIGIN/../../nvidia/cublasmp/cu13/lib;\$ORIGIN/../../nvidia/nccl/lib"
  CUDA_SEPARABLE_COMPILATION OFF)
install(TARGETS jaxmg_cuda LIBRARY DESTINATION ${JAXMG_INSTALL_DIR})
