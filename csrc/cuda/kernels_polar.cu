// Device kernels of the GPU engine (cuda/kernels.h): QDWH polar decomposition (routines/polar.h):
// the stacked matrix, the update with its change, norms and scaling.
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

// QDWH's element-wise pieces: a real multiple and |v|² of real and complex entries.
template <typename R>
__device__ inline R Times(R s, R v) {
  return s * v;
}
template <typename R>
__device__ inline Cplx<R> Times(R s, Cplx<R> v) {
  return {s * v.re, s * v.im};
}
template <typename R>
__device__ inline R Plus(R a, R b) {
  return a + b;
}
template <typename R>
__device__ inline Cplx<R> Plus(Cplx<R> a, Cplx<R> b) {
  return {a.re + b.re, a.im + b.im};
}
template <typename R>
__device__ inline double Norm(R v) {
  return static_cast<double>(v) * static_cast<double>(v);
}
template <typename R>
__device__ inline double Norm(Cplx<R> v) {
  return Norm(v.re) + Norm(v.im);
}

// The sum of the block's values `v`, in thread 0 (every thread of the block calls it).
__device__ inline double BlockReduce(double v) {
  __shared__ double part[kThreads];
  part[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  const double total = part[0];
  __syncthreads();  // part is reused by the block's next call
  return total;
}

// The block's sum of `v` added to *sum (one atomic per block).
__device__ inline void BlockSum(double v, double* sum) {
  const double total = BlockReduce(v);
  if (threadIdx.x == 0) atomicAdd(sum, total);
}

template <typename T>
__global__ void QdwhStackKernel(const T* u, int64_t lr, int64_t lc, typename Traits<T>::Real scale,
                                T* y, int64_t ly, int64_t top, int64_t t, int nprow, int npcol,
                                int myrow, int mycol) {
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < ly * lc;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx % ly, c = idx / ly;
    T v = Traits<T>::Zero();
    if (r < lr) {
      v = Times(scale, u[r + c * lr]);
    } else if (r >= top &&
               CyclicGlobal(r - top, t, nprow, myrow) == CyclicGlobal(c, t, npcol, mycol)) {
      v = Traits<T>::One();
    }
    y[idx] = v;
  }
}

template <typename T>
__global__ void AxpbyChangeKernel(T* u, const T* w, int64_t count, typename Traits<T>::Real e,
                                  typename Traits<T>::Real coef, double* sum) {
  double local = 0;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < count;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T old = u[idx];
    const T next = Plus(Times(e, old), Times(coef, w[idx]));
    local += Norm(Plus(next, Times(typename Traits<T>::Real(-1), old)));
    u[idx] = next;
  }
  BlockSum(local, sum);
}

// One block per local column.
template <typename T>
__global__ void ColumnAbsSumsKernel(const T* a, int64_t lr, int64_t lc, int64_t t, int npcol,
                                    int mycol, double* col) {
  for (int64_t c = blockIdx.x; c < lc; c += gridDim.x) {
    double local = 0;
    for (int64_t r = threadIdx.x; r < lr; r += blockDim.x)
      local += static_cast<double>(Traits<T>::Abs(a[r + c * lr]));
    const double total = BlockReduce(local);
    if (threadIdx.x == 0) col[CyclicGlobal(c, t, npcol, mycol)] = total;
  }
}

template <typename T>
__global__ void RowAbsSumsKernel(const T* a, int64_t lr, int64_t lc, int64_t t, int nprow,
                                 int myrow, double* row) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < lr;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double local = 0;
    for (int64_t c = 0; c < lc; ++c) local += static_cast<double>(Traits<T>::Abs(a[r + c * lr]));
    row[CyclicGlobal(r, t, nprow, myrow)] = local;
  }
}

template <typename T>
__global__ void SumSquaresKernel(const T* a, int64_t count, double* sum) {
  double local = 0;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < count;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    local += Norm(a[idx]);
  }
  BlockSum(local, sum);
}

template <typename T>
__global__ void ScaleKernel(T* a, int64_t count, typename Traits<T>::Real s) {
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < count;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    a[idx] = Times(s, a[idx]);
  }
}

}  // namespace

cudaError_t QdwhStack(Dtype dt, const void* u, int64_t lr, int64_t lc, double scale, void* y,
                      int64_t ly, int64_t top, int64_t t, int nprow, int npcol, int myrow,
                      int mycol, cudaStream_t stream) {
  if (ly * lc == 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    using R = typename Traits<T>::Real;
    QdwhStackKernel<T><<<Blocks(ly * lc), kThreads, 0, stream>>>(
        static_cast<const T*>(u), lr, lc, static_cast<R>(scale), static_cast<T*>(y), ly, top, t,
        nprow, npcol, myrow, mycol);
  });
}

cudaError_t AxpbyChange(Dtype dt, void* u, const void* w, int64_t count, double e, double coef,
                        double* sum, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    using R = typename Traits<T>::Real;
    AxpbyChangeKernel<T><<<Blocks(count), kThreads, 0, stream>>>(
        static_cast<T*>(u), static_cast<const T*>(w), count, static_cast<R>(e),
        static_cast<R>(coef), sum);
  });
}

cudaError_t AbsSums(Dtype dt, const void* a, int64_t lr, int64_t lc, int64_t t, int nprow,
                    int npcol, int myrow, int mycol, double* col, double* row,
                    cudaStream_t stream) {
  if (lr * lc == 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const int blocks = static_cast<int>(lc < 65535 ? lc : 65535);
    ColumnAbsSumsKernel<T>
        <<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(a), lr, lc, t, npcol, mycol, col);
    RowAbsSumsKernel<T><<<Blocks(lr), kThreads, 0, stream>>>(static_cast<const T*>(a), lr, lc, t,
                                                             nprow, myrow, row);
  });
}

cudaError_t SumSquares(Dtype dt, const void* a, int64_t count, double* sum, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    SumSquaresKernel<T>
        <<<Blocks(count), kThreads, 0, stream>>>(static_cast<const T*>(a), count, sum);
  });
}

cudaError_t Scale(Dtype dt, void* a, int64_t count, double s, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    using R = typename Traits<T>::Real;
    ScaleKernel<T>
        <<<Blocks(count), kThreads, 0, stream>>>(static_cast<T*>(a), count, static_cast<R>(s));
  });
}

}  // namespace jaxmg::cuda
