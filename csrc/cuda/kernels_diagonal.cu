// Device kernels of the GPU engine (cuda/kernels.h): scans of the diagonal and of the whole local
// matrix for the status (zero or non-finite entries) and the log-determinant.
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

__device__ inline float Log(float v) { return logf(v); }
__device__ inline double Log(double v) { return log(v); }

// One block: strided loop over local columns, tree reduction in shared memory. Accumulates in
// double for both precisions.
template <typename T>
__global__ void LogDiagKernel(const T* a, int64_t lr, int64_t lc, int64_t t, int nprow, int npcol,
                              int myrow, int mycol, typename Traits<T>::Real* sum) {
  __shared__ double part[kThreads];
  double acc = 0.0;
  for (int64_t c = threadIdx.x; c < lc; c += blockDim.x) {
    const int64_t gc = CyclicGlobal(c, t, npcol, mycol);
    if ((gc / t) % nprow != myrow) continue;
    const int64_t r = (gc / t / nprow) * t + gc % t;
    if (r >= lr) continue;
    acc += static_cast<double>(Log(Traits<T>::Abs(a[r + c * lr])));
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) *sum = static_cast<typename Traits<T>::Real>(part[0]);
}

__device__ inline double ArgOf(float v) { return v < 0 ? M_PI : 0.0; }
__device__ inline double ArgOf(double v) { return v < 0 ? M_PI : 0.0; }
template <typename R>
__device__ inline double ArgOf(Cplx<R> v) {
  return atan2(static_cast<double>(v.im), static_cast<double>(v.re));
}

template <typename T>
__global__ void NonFiniteColumnKernel(const T* a, int64_t lr, int64_t lc, int64_t t, int npcol,
                                      int mycol, int32_t* out) {
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < lr * lc;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (isfinite(static_cast<double>(Traits<T>::Abs(a[idx])))) continue;
    const int64_t gc = CyclicGlobal(idx / lr, t, npcol, mycol);
    atomicMin(out, static_cast<int32_t>(min(gc + 1, int64_t{INT32_MAX})));
  }
}

// One block, as LogDiagKernel: four sums (see DiagSums).
template <typename T>
__global__ void DiagSumsKernel(const T* a, int64_t lr, int64_t lc, int64_t t, int nprow, int npcol,
                               int myrow, int mycol, double* out) {
  __shared__ double part[4][kThreads];
  double acc[4] = {0.0, 0.0, 0.0, 0.0};
  for (int64_t c = threadIdx.x; c < lc; c += blockDim.x) {
    const int64_t gc = CyclicGlobal(c, t, npcol, mycol);
    if ((gc / t) % nprow != myrow) continue;
    const int64_t r = (gc / t / nprow) * t + gc % t;
    if (r >= lr) continue;
    const T d = a[r + c * lr];
    const double m = static_cast<double>(Traits<T>::Abs(d));
    if (!isfinite(m)) {
      acc[3] += 1.0;
    } else if (m == 0.0) {
      acc[2] += 1.0;
    } else {
      acc[0] += log(m);
      acc[1] += ArgOf(d);
    }
  }
  for (int k = 0; k < 4; ++k) part[k][threadIdx.x] = acc[k];
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) {
      for (int k = 0; k < 4; ++k) part[k][threadIdx.x] += part[k][threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x < 4) out[threadIdx.x] = part[threadIdx.x][0];
}

// One block: the smallest 1-based engine-global index of a local diagonal entry that is zero or not
// finite, or 0 when there is none.
template <typename T>
__global__ void DiagCheckKernel(const T* a, int64_t lr, int64_t lc, int64_t t, int nprow, int npcol,
                                int myrow, int mycol, int64_t limit, int32_t* out) {
  __shared__ int64_t first[kThreads];
  int64_t best = INT64_MAX;
  for (int64_t c = threadIdx.x; c < lc; c += blockDim.x) {
    const int64_t gc = CyclicGlobal(c, t, npcol, mycol);
    if (gc >= limit || (gc / t) % nprow != myrow) continue;
    const int64_t r = (gc / t / nprow) * t + gc % t;
    if (r >= lr) continue;
    const double d = static_cast<double>(Traits<T>::Abs(a[r + c * lr]));
    if (!(d > 0.0) || !isfinite(d)) best = min(best, gc + 1);
  }
  first[threadIdx.x] = best;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) first[threadIdx.x] = min(first[threadIdx.x], first[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    *out = first[0] == INT64_MAX ? 0 : static_cast<int32_t>(min(first[0], int64_t{INT32_MAX}));
  }
}

template <typename R>
__global__ void FinishLogdetKernel(const R* sum, R scale, bool ok, R* out) {
  *out = ok ? scale * *sum : Traits<R>::Nan();
}

}  // namespace

cudaError_t LogDiagSum(Dtype dt, const void* a, int64_t lr, int64_t lc, int64_t t, int nprow,
                       int npcol, int myrow, int mycol, void* sum, cudaStream_t stream) {
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    using R = typename Traits<T>::Real;
    LogDiagKernel<T><<<1, kThreads, 0, stream>>>(static_cast<const T*>(a), lr, lc, t, nprow, npcol,
                                                 myrow, mycol, static_cast<R*>(sum));
  });
}

cudaError_t NonFiniteColumn(Dtype dt, const void* a, int64_t lr, int64_t lc, int64_t t, int npcol,
                            int mycol, int32_t* out, cudaStream_t stream) {
  if (lr * lc == 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    NonFiniteColumnKernel<T><<<Blocks(lr * lc), kThreads, 0, stream>>>(static_cast<const T*>(a), lr,
                                                                       lc, t, npcol, mycol, out);
  });
}

cudaError_t DiagSums(Dtype dt, const void* a, int64_t lr, int64_t lc, int64_t t, int nprow,
                     int npcol, int myrow, int mycol, double* out, cudaStream_t stream) {
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    DiagSumsKernel<T><<<1, kThreads, 0, stream>>>(static_cast<const T*>(a), lr, lc, t, nprow, npcol,
                                                  myrow, mycol, out);
  });
}

cudaError_t DiagCheck(Dtype dt, const void* a, int64_t lr, int64_t lc, int64_t t, int nprow,
                      int npcol, int myrow, int mycol, int64_t limit, int32_t* out,
                      cudaStream_t stream) {
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    DiagCheckKernel<T><<<1, kThreads, 0, stream>>>(static_cast<const T*>(a), lr, lc, t, nprow,
                                                   npcol, myrow, mycol, limit, out);
  });
}

cudaError_t FinishLogdet(Dtype dt, const void* sum, double scale, bool ok, void* out,
                         cudaStream_t stream) {
  if (dt == Dtype::kF32 || dt == Dtype::kC64) {
    FinishLogdetKernel<float><<<1, 1, 0, stream>>>(
        static_cast<const float*>(sum), static_cast<float>(scale), ok, static_cast<float*>(out));
  } else {
    FinishLogdetKernel<double><<<1, 1, 0, stream>>>(static_cast<const double*>(sum), scale, ok,
                                                    static_cast<double*>(out));
  }
  return cudaGetLastError();
}

}  // namespace jaxmg::cuda
