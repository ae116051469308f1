# GPU engine: libjaxmg_cuda.so (cuSOLVERMp 0.8 + NCCL), included by CMakeLists.txt when
# -DJAXMG_CUDA=ON. Building needs nvcc and the headers/libraries below, but no GPU.
#
#   JAXMG_CUSOLVERMP_ROOT  folder with include/cusolverMp.h and lib/libcusolverMp.so.0
#                          (the nvidia/cu13 folder of the nvidia-cusolvermp-cu13 0.8.0 wheel;
#                          default: that folder in the build Python's site-packages, if there)
#   JAXMG_NCCL_ROOT        folder with include/nccl.h and lib/libnccl.so.2 (nvidia/nccl of the
#                          nvidia-nccl-cu13 wheel; default: site-packages, if there)
#   JAXMG_CUDA_EXTRA_INCLUDES  folders with cusolverDn.h / cusolver_common.h and cublas_v2.h
#                          when the CUDA toolkit lacks them (nvidia-cusolver / nvidia-cublas
#                          wheels: nvidia/cu13/include)
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

set(JAXMG_CUSOLVERMP_ROOT "" CACHE PATH "cuSOLVERMp 0.8 root (include/, lib/)")
set(JAXMG_NCCL_ROOT "" CACHE PATH "NCCL root (include/, lib/)")
set(JAXMG_CUDA_EXTRA_INCLUDES "" CACHE STRING "extra include folders (cusolverDn.h, cublas_v2.h)")

# Defaults: the wheels installed in this Python (nvidia-cusolvermp-cu13, nvidia-nccl-cu13,
# nvidia-cusolver, nvidia-cublas all put their files under site-packages/nvidia/).
if(NOT JAXMG_CUSOLVERMP_ROOT OR NOT JAXMG_NCCL_ROOT)
  find_package(Python COMPONENTS Interpreter REQUIRED)
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    OUTPUT_VARIABLE _jaxmg_site OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT JAXMG_CUSOLVERMP_ROOT AND EXISTS "${_jaxmg_site}/nvidia/cu13/include/cusolverMp.h")
    set(JAXMG_CUSOLVERMP_ROOT "${_jaxmg_site}/nvidia/cu13")
    list(APPEND JAXMG_CUDA_EXTRA_INCLUDES "${_jaxmg_site}/nvidia/cu13/include")
  endif()
  if(NOT JAXMG_NCCL_ROOT AND EXISTS "${_jaxmg_site}/nvidia/nccl/include/nccl.h")
    set(JAXMG_NCCL_ROOT "${_jaxmg_site}/nvidia/nccl")
  endif()
endif()
foreach(var JAXMG_CUSOLVERMP_ROOT JAXMG_NCCL_ROOT)
  if(NOT ${var})
    message(FATAL_ERROR "-DJAXMG_CUDA=ON needs -D${var}=... (see cmake/cuda_engine.cmake)")
  endif()
endforeach()
set(JAXMG_CUSOLVERMP_LIB "${JAXMG_CUSOLVERMP_ROOT}/lib/libcusolverMp.so.0")
set(JAXMG_NCCL_LIB "${JAXMG_NCCL_ROOT}/lib/libnccl.so.2")
foreach(f "${JAXMG_CUSOLVERMP_ROOT}/include/cusolverMp.h" "${JAXMG_CUSOLVERMP_LIB}"
        "${JAXMG_NCCL_ROOT}/include/nccl.h" "${JAXMG_NCCL_LIB}")
  if(NOT EXISTS "${f}")
    message(FATAL_ERROR "GPU engine: ${f} not found")
  endif()
endforeach()

add_library(jaxmg_cuda SHARED
  csrc/engines/cusolvermp/cusolvermp.cc
  csrc/ffi/cusolvermp_potrs.cc
  csrc/cuda/kernels.cu)
target_include_directories(jaxmg_cuda PRIVATE csrc)
target_include_directories(jaxmg_cuda SYSTEM PRIVATE
  ${XLA_FFI_INCLUDE_DIR}
  "${JAXMG_CUSOLVERMP_ROOT}/include"
  "${JAXMG_NCCL_ROOT}/include"
  ${JAXMG_CUDA_EXTRA_INCLUDES})
target_link_libraries(jaxmg_cuda PRIVATE jaxmg_layout CUDA::cudart "${JAXMG_CUSOLVERMP_LIB}"
                                         "${JAXMG_NCCL_LIB}")
target_compile_options(jaxmg_cuda PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra
                                          -Wno-unused-parameter>)
# Found at run time through LD_LIBRARY_PATH, or next to an installed jaxmg in site-packages
# (jaxmg/_lib -> nvidia/cu13/lib, nvidia/nccl/lib).
set_target_properties(jaxmg_cuda PROPERTIES
  BUILD_WITH_INSTALL_RPATH ON
  INSTALL_RPATH "\$ORIGIN;\$ORIGIN/../../nvidia/cu13/lib;\$ORIGIN/../../nvidia/nccl/lib"
  CUDA_SEPARABLE_COMPILATION OFF)
install(TARGETS jaxmg_cuda LIBRARY DESTINATION ${JAXMG_INSTALL_DIR})
