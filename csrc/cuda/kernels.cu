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

template <typename T>
__global__ void PadCopyKernel(const T* shard, int64_t in_rows, T* out, int64_t out_rows,
                              int64_t out_cols, int64_t rse, int64_t rps, int64_t cse, int64_t cps,
                              int64_t row0, int64_t col0, bool identity) {
  const int64_t total = out_rows * out_cols;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx % out_rows, c = idx / out_rows;
    const int64_t rw = r % rps, cw = c % cps;
    T v;
    if (rw < rse && cw < cse) {
      v = shard[((r / rps) * rse + rw) + ((c / cps) * cse + cw) * in_rows];
    } else if (identity && row0 + r == col0 + c) {
      v = Traits<T>::One();  // a padded diagonal entry (padded rows and cols coincide there)
    } else {
      v = Traits<T>::Zero();
    }
    out[idx] = v;
  }
}

template <typename T>
__global__ void GatherRhsKernel(const T* full, int64_t nrhs, const int64_t* row_global, int64_t lr,
                                int64_t lbc, int64_t t, int npcol, int mycol, bool conj,
                                T* local_b) {
  const int64_t total = lr * lbc;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx % lr, c = idx / lr;
    const int64_t g = row_global[r];
    const int64_t j = CyclicGlobal(c, t, npcol, mycol);
    const T v = g >= 0 ? full[g * nrhs + j] : Traits<T>::Zero();
    local_b[idx] = conj ? Traits<T>::Conj(v) : v;
  }
}

template <typename T>
__global__ void ScatterRhsKernel(const T* local_b, int64_t nrhs, const int64_t* row_global,
                                 int64_t lr, int64_t lbc, int64_t t, int npcol, int mycol,
                                 bool conj, T* full, int64_t row_begin, int64_t row_end) {
  const int64_t total = lr * lbc;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx % lr, c = idx / lr;
    const int64_t g = row_global[r];
    const int64_t j = CyclicGlobal(c, t, npcol, mycol);
    if (g < row_begin || g >= row_end || j >= nrhs) continue;
    full[(g - row_begin) * nrhs + j] = conj ? Traits<T>::Conj(local_b[idx]) : local_b[idx];
  }
}

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

// Thread per column: the interchanges rows row0 + i <-> row0 + piv[i] - 1, i = 0..count-1, in
// order, on columns [begin, end) except [skip_begin, skip_end).
template <typename T>
__global__ void RowSwapsKernel(T* a, int64_t ld, int64_t begin, int64_t end, int64_t skip_begin,
                               int64_t skip_end, int64_t row0, const int64_t* piv, int64_t count) {
  for (int64_t c = begin + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < end;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (c >= skip_begin && c < skip_end) continue;
    T* col = a + c * ld;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t r = row0 + i, p = row0 + piv[i] - 1;
      if (p != r) {
        const T tmp = col[r];
        col[r] = col[p];
        col[p] = tmp;
      }
    }
  }
}

template <typename R>
__global__ void FinishLogdetKernel(const R* sum, R scale, bool ok, R* out) {
  *out = ok ? scale * *sum : Traits<R>::Nan();
}

template <typename T>
__global__ void SetDiagonalKernel(T* a, int64_t lr, int64_t lc, int64_t t, int nprow, int npcol,
                                  int myrow, int mycol) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < lc;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t gc = CyclicGlobal(c, t, npcol, mycol);
    if ((gc / t) % nprow != myrow) continue;
    const int64_t r = (gc / t / nprow) * t + gc % t;
    if (r < lr) a[r + c * lr] = Traits<T>::One();
  }
}

template <typename T>
__global__ void MoveBlockKernel(const T* src, int64_t ld_src, const int64_t* sr, const int64_t* sc,
                                int64_t rows, int64_t cols, T* dst, int64_t ld_dst,
                                const int64_t* dr, const int64_t* dc) {
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < rows * cols;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx % rows, j = idx / rows;
    const int64_t s = (sr ? sr[i] : i) + (sc ? sc[j] : j) * ld_src;
    dst[(dr ? dr[i] : i) + (dc ? dc[j] : j) * ld_dst] = src[s];
  }
}

template <typename T>
__global__ void ScatterMatrixKernel(const T* y, int64_t lr, int64_t lc, const int64_t* row_orig,
                                    const int64_t* col_orig, int64_t row0, int64_t col0,
                                    int64_t ld_out, T* out) {
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < lr * lc;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx % lr, c = idx / lr;
    const int64_t j = row_orig[r], i = col_orig[c];
    if (i >= 0 && j >= 0) out[(i - row0) * ld_out + (j - col0)] = y[idx];
  }
}

template <typename T>
__global__ void FillNanKernel(T* p, int64_t count) {
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < count;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    p[idx] = Traits<T>::Nan();
  }
}

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

template <typename T>
__global__ void AdjointKernel(const T* src, int64_t lds, int64_t rows, int64_t cols, T* dst,
                              int64_t ldd) {
  const int64_t total = rows * cols;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx % rows, c = idx / rows;
    dst[c + r * ldd] = Traits<T>::Conj(src[r + c * lds]);
  }
}

template <typename T>
__global__ void IdentityBlockKernel(T* a, int64_t ld, int64_t rows, int64_t cols, int64_t row0) {
  const int64_t total = rows * cols;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx % rows, c = idx / rows;
    a[r + c * ld] = r == row0 + c ? Traits<T>::One() : Traits<T>::Zero();
  }
}

}  // namespace

size_t DtypeBytes(Dtype dt) {
  switch (dt) {
    case Dtype::kF32:
      return 4;
    case Dtype::kF64:
    case Dtype::kC64:
      return 8;
    case Dtype::kC128:
      return 16;
  }
  return 0;
}

cudaError_t PadCopy(Dtype dt, const void* shard, int64_t in_rows, int64_t in_cols, void* out,
                    int64_t out_rows, int64_t out_cols, int64_t rse, int64_t rps, int64_t cse,
                    int64_t cps, int64_t row0, int64_t col0, bool identity, cudaStream_t stream) {
  (void)in_cols;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    PadCopyKernel<T><<<Blocks(out_rows * out_cols), kThreads, 0, stream>>>(
        static_cast<const T*>(shard), in_rows, static_cast<T*>(out), out_rows, out_cols, rse, rps,
        cse, cps, row0, col0, identity);
  });
}

cudaError_t GatherRhs(Dtype dt, const void* full, int64_t nrhs, const int64_t* row_global,
                      int64_t lr, int64_t lbc, int64_t t, int npcol, int mycol, bool conj,
                      void* local_b, cudaStream_t stream) {
  if (lr * lbc == 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    GatherRhsKernel<T><<<Blocks(lr * lbc), kThreads, 0, stream>>>(
        static_cast<const T*>(full), nrhs, row_global, lr, lbc, t, npcol, mycol, conj,
        static_cast<T*>(local_b));
  });
}

cudaError_t ScatterRhs(Dtype dt, const void* local_b, int64_t nrhs, const int64_t* row_global,
                       int64_t lr, int64_t lbc, int64_t t, int npcol, int mycol, bool conj,
                       void* full, cudaStream_t stream, int64_t row_begin, int64_t row_end) {
  if (lr * lbc == 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    ScatterRhsKernel<T><<<Blocks(lr * lbc), kThreads, 0, stream>>>(
        static_cast<const T*>(local_b), nrhs, row_global, lr, lbc, t, npcol, mycol, conj,
        static_cast<T*>(full), row_begin, row_end);
  });
}

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

cudaError_t RowSwaps(Dtype dt, void* a, int64_t ld, int64_t begin, int64_t end, int64_t skip_begin,
                     int64_t skip_end, int64_t row0, const int64_t* piv, int64_t count,
                     cudaStream_t stream) {
  if (end <= begin || count == 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    RowSwapsKernel<T><<<Blocks(end - begin), kThreads, 0, stream>>>(
        static_cast<T*>(a), ld, begin, end, skip_begin, skip_end, row0, piv, count);
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

cudaError_t SetDiagonal(Dtype dt, void* a, int64_t lr, int64_t lc, int64_t t, int nprow, int npcol,
                        int myrow, int mycol, cudaStream_t stream) {
  if (lr * lc == 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    SetDiagonalKernel<T><<<Blocks(lc), kThreads, 0, stream>>>(static_cast<T*>(a), lr, lc, t, nprow,
                                                              npcol, myrow, mycol);
  });
}

cudaError_t MoveBlock(Dtype dt, const void* src, int64_t ld_src, const int64_t* sr,
                      const int64_t* sc, int64_t rows, int64_t cols, void* dst, int64_t ld_dst,
                      const int64_t* dr, const int64_t* dc, cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    MoveBlockKernel<T><<<Blocks(rows * cols), kThreads, 0, stream>>>(
        static_cast<const T*>(src), ld_src, sr, sc, rows, cols, static_cast<T*>(dst), ld_dst, dr,
        dc);
  });
}

cudaError_t ScatterMatrix(Dtype dt, const void* y, int64_t lr, int64_t lc, const int64_t* row_orig,
                          const int64_t* col_orig, int64_t row0, int64_t col0, int64_t ld_out,
                          void* out, cudaStream_t stream) {
  if (lr * lc == 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    ScatterMatrixKernel<T><<<Blocks(lr * lc), kThreads, 0, stream>>>(
        static_cast<const T*>(y), lr, lc, row_orig, col_orig, row0, col0, ld_out,
        static_cast<T*>(out));
  });
}

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

cudaError_t Adjoint(Dtype dt, const void* src, int64_t lds, int64_t rows, int64_t cols, void* dst,
                    int64_t ldd, cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    AdjointKernel<T><<<Blocks(rows * cols), kThreads, 0, stream>>>(
        static_cast<const T*>(src), lds, rows, cols, static_cast<T*>(dst), ldd);
  });
}

cudaError_t IdentityBlock(Dtype dt, void* a, int64_t ld, int64_t rows, int64_t cols, int64_t row0,
                          cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    IdentityBlockKernel<T>
        <<<Blocks(rows * cols), kThreads, 0, stream>>>(static_cast<T*>(a), ld, rows, cols, row0);
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

cudaError_t FillNan(Dtype dt, void* p, int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    FillNanKernel<T><<<Blocks(count), kThreads, 0, stream>>>(static_cast<T*>(p), count);
  });
}

}  // namespace jaxmg::cuda
