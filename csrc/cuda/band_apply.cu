// Q₂'s wave blocks applied in one pass over Z (cuda/band.h WaveApply): float64 on the tensor
// cores (the 8 x 8 x 4 double-precision matrix products), skipping the zeros of V's
// parallelogram.
//
// One thread block takes one wave block i and kColumns columns of Z: it loads Z_i's tile (h rows,
// padded to a multiple of 8 with zeros) into shared memory, then
//   1. W := V_iᵀ Z (ℓ x kColumns): row tile r of W reads only V's rows 8r .. 8r + 7 + b − 1;
//   2. W := −T_i W (T upper triangular: row tile r sums from column 8r);
//   3. Z += V_i W: row tile R of Z reads only V's columns 8R − b + 1 .. 8R + 7;
// and writes the tile back. V_i and T_i are read from global memory (every thread block of the
// wave reads the same ones: L2 keeps them); V_i's leading dimension is a multiple of 8 with zero
// rows past h, so every fragment is aligned and in bounds.
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <cstdint>

#include "cuda/band.h"
#include "cuda/element.cuh"

namespace jaxmg::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kColumns = 32;                // Z's columns per thread block
constexpr int kApplyWarps = 8;              // one row tile of W per warp (ℓ <= 64)
constexpr int kColumnTiles = kColumns / 8;  // 8-column tiles
constexpr int kMaxGroup = 8 * kApplyWarps;  // ℓ at most 64
constexpr int kMaxRows = 8 * 24;            // h rounded up to 8, at most 192 (b <= 128)

using Accumulator = wmma::fragment<wmma::accumulator, 8, 8, 4, double>;
using RowMajorA = wmma::fragment<wmma::matrix_a, 8, 8, 4, double, wmma::row_major>;
using ColMajorA = wmma::fragment<wmma::matrix_a, 8, 8, 4, double, wmma::col_major>;
using ColMajorB = wmma::fragment<wmma::matrix_b, 8, 8, 4, double, wmma::col_major>;

// Shared memory: Z's tile (h8 x kColumns, ld h8 + 4) and W (ℓ x kColumns, ld ℓ + 4); the
// leading dimensions are multiples of 4 doubles (32-byte aligned fragments) and not of 32 (banks).
__host__ __device__ inline int TileLd(int rows) { return rows + 4; }
size_t ApplyBytes(int h8, int ell) {
  return sizeof(double) * static_cast<size_t>(TileLd(h8) + TileLd(ell)) * kColumns;
}

__global__ void __launch_bounds__(32 * kApplyWarps)
    WaveApplyKernel(const double* vb, int64_t ldv, const double* t, int b, int ell, int h,
                    double* z, int64_t ldz, int64_t stride, int64_t cols) {
  extern __shared__ __align__(128) double apply_shared[];
  const int h8 = (h + 7) / 8 * 8, ldzs = TileLd(h8), ldw = TileLd(ell);
  double* zs = apply_shared;
  double* ws = zs + ldzs * kColumns;
  const int64_t i = blockIdx.y;
  const double* v = vb + i * ldv * ell;
  const double* ti = t + i * static_cast<int64_t>(ell) * ell;
  double* zi = z + i * stride;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kColumns;
  const int width = static_cast<int>(cols - c0 < kColumns ? cols - c0 : kColumns);
  for (int idx = threadIdx.x; idx < h8 * kColumns; idx += blockDim.x) {
    const int r = idx % h8, c = idx / h8;
    zs[r + c * ldzs] = r < h && c < width ? zi[r + (c0 + c) * ldz] : 0.0;
  }
  __syncthreads();
  const int warp = threadIdx.x / 32;
  // 1. W = Vᵀ Z, then 2. W = −T W (each warp keeps its row tile of T W until every warp has
  // read W).
  Accumulator acc[kColumnTiles];
  const int rt = warp, row0 = 8 * rt;
  const bool has_row_tile = row0 < ell;
  if (has_row_tile) {
    for (int j = 0; j < kColumnTiles; ++j) wmma::fill_fragment(acc[j], 0.0);
    const int k1 = min(h8, (row0 + 7 + b + 3) / 4 * 4);
    for (int k = row0; k < k1; k += 4) {
      RowMajorA a;  // (r, kk) = V[k + kk, row0 + r]
      wmma::load_matrix_sync(a, v + k + row0 * ldv, static_cast<unsigned>(ldv));
      for (int j = 0; j < kColumnTiles; ++j) {
        ColMajorB bf;
        wmma::load_matrix_sync(bf, zs + k + 8 * j * ldzs, ldzs);
        wmma::mma_sync(acc[j], a, bf, acc[j]);
      }
    }
    for (int j = 0; j < kColumnTiles; ++j) {
      wmma::store_matrix_sync(ws + row0 + 8 * j * ldw, acc[j], ldw, wmma::mem_col_major);
    }
  }
  __syncthreads();
  if (has_row_tile) {
    for (int j = 0; j < kColumnTiles; ++j) wmma::fill_fragment(acc[j], 0.0);
    for (int k = row0; k < ell; k += 4) {
      ColMajorA a;  // (r, kk) = T[row0 + r, k + kk]
      wmma::load_matrix_sync(a, ti + row0 + k * ell, ell);
      for (int j = 0; j < kColumnTiles; ++j) {
        ColMajorB bf;
        wmma::load_matrix_sync(bf, ws + k + 8 * j * ldw, ldw);
        wmma::mma_sync(acc[j], a, bf, acc[j]);
      }
    }
  }
  __syncthreads();
  if (has_row_tile) {
    for (int j = 0; j < kColumnTiles; ++j) {
      for (int e = 0; e < acc[j].num_elements; ++e) acc[j].x[e] = -acc[j].x[e];
      wmma::store_matrix_sync(ws + row0 + 8 * j * ldw, acc[j], ldw, wmma::mem_col_major);
    }
  }
  __syncthreads();
  // 3. Z += V W, row tile by row tile.
  for (int rz = warp; rz < h8 / 8; rz += kApplyWarps) {
    const int r0 = 8 * rz;
    const int k0 = max(0, r0 - b + 1) / 4 * 4, k1 = min(ell, r0 + 8);
    if (k0 >= k1) continue;
    Accumulator zacc[kColumnTiles];
    for (int j = 0; j < kColumnTiles; ++j) {
      wmma::load_matrix_sync(zacc[j], zs + r0 + 8 * j * ldzs, ldzs, wmma::mem_col_major);
    }
    for (int k = k0; k < k1; k += 4) {
      ColMajorA a;  // (r, kk) = V[r0 + r, k + kk]
      wmma::load_matrix_sync(a, v + r0 + k * ldv, static_cast<unsigned>(ldv));
      for (int j = 0; j < kColumnTiles; ++j) {
        ColMajorB bf;
        wmma::load_matrix_sync(bf, ws + k + 8 * j * ldw, ldw);
        wmma::mma_sync(zacc[j], a, bf, zacc[j]);
      }
    }
    for (int j = 0; j < kColumnTiles; ++j) {
      wmma::store_matrix_sync(zs + r0 + 8 * j * ldzs, zacc[j], ldzs, wmma::mem_col_major);
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < h8 * kColumns; idx += blockDim.x) {
    const int r = idx % h8, c = idx / h8;
    if (r < h && c < width) zi[r + (c0 + c) * ldz] = zs[r + c * ldzs];
  }
}

}  // namespace

bool WaveApplies(Dtype dt, int64_t b, int64_t ell) {
  return dt == Dtype::kF64 && b >= 1 && ell >= 8 && ell % 8 == 0 && ell <= kMaxGroup &&
         (b + ell - 1 + 7) / 8 * 8 <= kMaxRows;
}

cudaError_t WaveApply(Dtype dt, const void* vb, int64_t ldv, const void* t, int64_t b, int64_t ell,
                      int64_t count, void* z, int64_t ldz, int64_t stride, int64_t cols,
                      cudaStream_t stream) {
  if (count <= 0 || cols <= 0) return cudaSuccess;
  const int64_t h = b + ell - 1, h8 = (h + 7) / 8 * 8;
  if (!WaveApplies(dt, b, ell) || ldv < h8 || ldv % 8 != 0 || count > 65535) {
    return cudaErrorInvalidValue;
  }
  const size_t bytes = ApplyBytes(static_cast<int>(h8), static_cast<int>(ell));
  cudaError_t e = cudaFuncSetAttribute(WaveApplyKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes));
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>((cols + kColumns - 1) / kColumns),
                  static_cast<unsigned>(count));
  WaveApplyKernel<<<grid, 32 * kApplyWarps, bytes, stream>>>(
      static_cast<const double*>(vb), ldv, static_cast<const double*>(t), static_cast<int>(b),
      static_cast<int>(ell), static_cast<int>(h), static_cast<double*>(z), ldz, stride, cols);
  return cudaGetLastError();
}

}  // namespace jaxmg::cuda
