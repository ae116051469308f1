// Device kernels of the GPU engine (cuda/kernels.h): local layout moves (padding, tiles, right-hand
// sides, row interchanges, adjoints, identity blocks) and the NaN fill.
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

cudaError_t FillNan(Dtype dt, void* p, int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    FillNanKernel<T><<<Blocks(count), kThreads, 0, stream>>>(static_cast<T*>(p), count);
  });
}

}  // namespace jaxmg::cuda
