// Device kernels of the GPU engine (cuda/kernels.h): Householder reflector blocks of the own QR
// and the two-stage eigensolver (V from geqrf, the compact WY factor).
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "cuda/element.cuh"
#include "cuda/kernels.h"

namespace jaxmg::cuda {
namespace {

using device::Blocks;
using device::Cplx;
using device::CyclicGlobal;
using device::Dispatch;
using device::kThreads;
using device::Traits;

// Calls fn(T{}) with the device element type of dt.
// Householder QR's blocks (the GPU engine's 1-D QR).
__device__ inline float Inverse(float v) { return 1.f / v; }
__device__ inline double Inverse(double v) { return 1.0 / v; }
template <typename R>
__device__ inline Cplx<R> Inverse(Cplx<R> v) {
  const R d = v.re * v.re + v.im * v.im;
  return {v.re / d, -v.im / d};
}
template <typename T>
__device__ inline bool IsZero(T v) {
  return Traits<T>::Abs(v) == 0;
}

template <typename T>
__global__ void ReflectorBlockKernel(const T* a, int64_t lda, int64_t rows, int64_t cols,
                                     const T* tau, T* v, int64_t ldv) {
  const int64_t total = rows * cols;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx % rows, c = idx / rows;
    T x = Traits<T>::Zero();
    if (!IsZero(tau[c])) x = r > c ? a[r + c * lda] : (r == c ? Traits<T>::One() : x);
    v[r + c * ldv] = x;
  }
}

template <typename T>
__global__ void ReflectorFactorKernel(T* s, int64_t ld, int64_t k, const T* tau) {
  const int64_t total = k * k;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx % k, c = idx / k;
    if (r > c) {
      s[r + c * ld] = Traits<T>::Zero();
    } else if (r == c) {
      s[r + c * ld] = IsZero(tau[c]) ? Traits<T>::One() : Inverse(tau[c]);
    }
  }
}

}  // namespace

cudaError_t ReflectorBlock(Dtype dt, const void* a, int64_t lda, int64_t rows, int64_t cols,
                           const void* tau, void* v, int64_t ldv, cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    ReflectorBlockKernel<T><<<Blocks(rows * cols), kThreads, 0, stream>>>(
        static_cast<const T*>(a), lda, rows, cols, static_cast<const T*>(tau), static_cast<T*>(v),
        ldv);
  });
}

cudaError_t ReflectorFactor(Dtype dt, void* s, int64_t ld, int64_t k, const void* tau,
                            cudaStream_t stream) {
  if (k == 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    ReflectorFactorKernel<T><<<Blocks(k * k), kThreads, 0, stream>>>(static_cast<T*>(s), ld, k,
                                                                     static_cast<const T*>(tau));
  });
}

}  // namespace jaxmg::cuda
