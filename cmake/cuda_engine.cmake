# GPU engine: libjaxmg_cuda.so (cuSOLVERMp 0.9.1 + cuBLASMp 0.10 + NCCL >= 2.29), included by
# CMakeLists.txt when -DJAXMG_CUDA=ON. Building needs nvcc and the headers/libraries below, but
# no GPU.
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
# The CUDA runtime is linked shared (-cudart shared): libcusolverMp.so.0 needs libcudart.so.13
# anyway, so the process keeps one runtime (the one of the nvidia-cuda-runtime wheel JAX loads).
# Only the .so.N files ship in the wheels, so libraries are linked by full file name.
if(NOT CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90)  # H100 / H200
endif()
enable_language(CUDA)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
find_package(CUDAToolkit REQUIRED)

set(JAXMG_CUSOLVERMP_ROOT "" CACHE PATH "cuSOLVERMp 0.9 root (include/, lib/)")
set(JAXMG_CUBLASMP_ROOT "" CACHE PATH "cuBLASMp 0.10 root (include/, lib/)")
set(JAXMG_NCCL_ROOT "" CACHE PATH "NCCL >= 2.29 root (include/, lib/)")
set(JAXMG_CUDA_EXTRA_INCLUDES "" CACHE STRING "extra include folders (cusolverDn.h, cublas_v2.h)")

# Defaults: the wheels installed for this Python (nvidia-cusolvermp-cu13, nvidia-cublasmp-cu13,
# nvidia-nccl-cu13, nvidia-cusolver, nvidia-cublas all put their files under
# site-packages/nvidia/). Not cached: an isolated build environment is a new folder each time.
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
      list(APPEND JAXMG_CUDA_EXTRA_INCLUDES "${_site}/nvidia/cu13/include")
    endif()
  endforeach()
endif()
string(CONCAT _jaxmg_gpu_hint
  "The GPU engine builds against NVIDIA's wheels: pip install "
  "nvidia-cusolvermp-cu13==0.9.1.9318.post1 nvidia-cublasmp-cu13==0.10.0.3695 "
  "'nvidia-nccl-cu13>=2.29.2' into the building Python (an isolated `pip install .` does it), "
  "or pass -DJAXMG_CUSOLVERMP_ROOT, -DJAXMG_CUBLASMP_ROOT and -DJAXMG_NCCL_ROOT "
  "(scripts/build_cuda.sh). JAXMG_CUDA=OFF builds without the GPU engine.")
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

add_library(jaxmg_cuda SHARED
  csrc/engines/cusolvermp/band_back_chase.cc
  csrc/engines/cusolvermp/band_back_reduce.cc
  csrc/engines/cusolvermp/band_chase.cc
  csrc/engines/cusolvermp/band_eigenvalues.cc
  csrc/engines/cusolvermp/band_eigh.cc
  csrc/engines/cusolvermp/band_reduce.cc
  csrc/engines/cusolvermp/band_tridiagonal.cc
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
  csrc/cuda/band_bisect.cu
  csrc/cuda/band_chase.cu
  csrc/cuda/band_vectors.cu
  csrc/cuda/kernels_diagonal.cu
  csrc/cuda/kernels_layout.cu
  csrc/cuda/kernels_polar.cu
  csrc/cuda/kernels_reflectors.cu)
target_include_directories(jaxmg_cuda PRIVATE csrc)
target_include_directories(jaxmg_cuda SYSTEM PRIVATE
  ${XLA_FFI_INCLUDE_DIR}
  "${JAXMG_CUSOLVERMP_ROOT}/include"
  "${JAXMG_CUBLASMP_ROOT}/include"
  "${JAXMG_NCCL_ROOT}/include"
  ${JAXMG_CUDA_EXTRA_INCLUDES})
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
