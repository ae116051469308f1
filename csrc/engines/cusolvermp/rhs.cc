// Right-hand sides and outputs by rows: b in and x out, the identity, the leading rows (R, a
// least-squares solution), singular values and vectors out, pivots in and out.
#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/chunk.h"
#include "common/deferred.h"
#include "common/scalar.h"
#include "common/symmetry.h"
#include "cuda/kernels.h"
#include "engines/cusolvermp/engine.h"
#include "engines/cusolvermp/engine_internal.h"
#include "engines/cusolvermp/engine_util.h"
#include "engines/cusolvermp/local_blas.h"

namespace jaxmg::cusolvermp {

template <typename T>
Status Engine::RhsIn(const T* b, int64_t nrhs, Axis axis, bool conj, Matrix<T>* c) {
  StepTimer timer("RhsIn", stream_);
  const layout::Plan& plan = state_.plan;
  const size_t es = sizeof(T);
  const int64_t n = plan.rows.extent, t = plan.tile, lr = local_rows_;
  // This shard's block of b: split over the mesh's rows, or its columns when transposed.
  const int64_t block = rhs_by_cols_ ? ctx_.mesh_v : ctx_.mesh_u;
  const int64_t shard_rows = n / (rhs_by_cols_ ? plan.mesh_cols : plan.mesh_rows);
  const bool holder = (rhs_by_cols_ ? ctx_.mesh_u : ctx_.mesh_v) == 0;
  const int64_t lc = CyclicAxis{t, ctx_.npcol, ctx_.mycol}.Extent(nrhs);
  const size_t full_bytes = es * n * nrhs;
  Status buffers = NewMatrix<T>(plan.engine_rows(), nrhs, c);
  if (buffers.ok()) buffers = Scratch(full_bytes, &full_);
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(buffers));
  // The whole right-hand side on every rank (it is small): the shards of mesh column 0, summed.
  JAXMG_CUDA(cudaMemsetAsync(full_, 0, full_bytes, stream_));
  if (holder) {
    char* mine = static_cast<char*>(full_) + es * block * shard_rows * nrhs;
    JAXMG_CUDA(cudaMemcpyAsync(mine, b, es * shard_rows * nrhs, cudaMemcpyDeviceToDevice, stream_));
  }
  const size_t reals = static_cast<size_t>(n * nrhs * Scalar<T>::kParts);
  JAXMG_NCCL(ncclAllReduce(full_, full_, reals, NcclRealOf<T>(), ncclSum, ctx_.comm, stream_));
  JAXMG_CUDA(cuda::GatherRhs(KernelType<T>(), full_, nrhs, state_.d_rhs_map[static_cast<int>(axis)],
                             lr, lc, t, ctx_.npcol, ctx_.mycol, conj, c->data, stream_));
  return Status();
}

template <typename T>
Status Engine::RhsOut(const Matrix<T>& z, T* x, Axis axis, bool conj) {
  StepTimer timer("RhsOut", stream_);
  const layout::Plan& plan = state_.plan;
  const size_t es = sizeof(T);
  const int64_t n = plan.rows.extent, t = plan.tile, nrhs = z.cols;
  const int64_t block = rhs_by_cols_ ? ctx_.mesh_v : ctx_.mesh_u;
  const int64_t shard_rows = n / (rhs_by_cols_ ? plan.mesh_cols : plan.mesh_rows);
  // full_: RhsIn's whole right-hand side (n x nrhs), reused.
  const size_t full_bytes = es * n * nrhs;
  JAXMG_CUDA(cudaMemsetAsync(full_, 0, full_bytes, stream_));
  JAXMG_CUDA(cuda::ScatterRhs(KernelType<T>(), z.data, nrhs,
                              state_.d_rhs_map[static_cast<int>(axis)], z.local_rows, z.local_cols,
                              t, ctx_.npcol, ctx_.mycol, conj, full_, stream_));
  const size_t reals = static_cast<size_t>(n * nrhs * Scalar<T>::kParts);
  JAXMG_NCCL(ncclAllReduce(full_, full_, reals, NcclRealOf<T>(), ncclSum, ctx_.comm, stream_));
  const char* mine = static_cast<const char*>(full_) + es * block * shard_rows * nrhs;
  JAXMG_CUDA(cudaMemcpyAsync(x, mine, es * shard_rows * nrhs, cudaMemcpyDeviceToDevice, stream_));
  return Status();
}

template <typename T>
Status Engine::Identity(const Matrix<T>& like, Matrix<T>* out) {
  const int64_t lr = like.local_rows, lc = like.local_cols;
  JAXMG_RETURN_IF_ERROR(NewLike<T>(like, out));
  JAXMG_CUDA(cudaMemsetAsync(out->data, 0, sizeof(T) * lr * lc, stream_));
  JAXMG_CUDA(cuda::SetDiagonal(KernelType<T>(), out->data, lr, lc, like.tile, ctx_.nprow,
                               ctx_.npcol, ctx_.myrow, ctx_.mycol, stream_));
  return Status();
}

template <typename T>
Status Engine::LeadingRows(const Matrix<T>& a, void** out) {
  const layout::Plan& plan = state_.plan;
  const size_t es = sizeof(T);
  const int64_t n = plan.cols.extent, cols = n, lc = a.local_cols;
  // Every entry is held by one process: the sum over the grid assembles the n x cols rows.
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(Scratch(es * n * cols, out)));
  JAXMG_CUDA(cudaMemsetAsync(*out, 0, es * n * cols, stream_));
  JAXMG_CUDA(cuda::ScatterRhs(KernelType<T>(), a.data, cols, state_.d_rhs_map[2], a.local_rows, lc,
                              plan.tile, ctx_.npcol, ctx_.mycol, /*conj=*/false, *out, stream_));
  const size_t reals = static_cast<size_t>(n * cols * Scalar<T>::kParts);
  JAXMG_NCCL(ncclAllReduce(*out, *out, reals, NcclRealOf<T>(), ncclSum, ctx_.comm, stream_));
  return Status();
}

int64_t Engine::FirstRow(int64_t x_rows) const {
  const int64_t n = state_.plan.cols.extent;
  return x_rows == n ? 0 : x_rows * (rhs_by_cols_ ? ctx_.mesh_v : ctx_.mesh_u);
}

template <typename T>
Status Engine::LeadingRowsOut(const Matrix<T>& y, T* x, int64_t x_rows) {
  StepTimer timer("LeadingRowsOut", stream_);
  const size_t es = sizeof(T);
  if (y.replicated) {  // QrSolve's solution, whole on every rank
    const char* mine = reinterpret_cast<const char*>(y.data) + es * FirstRow(x_rows) * y.cols;
    JAXMG_CUDA(cudaMemcpyAsync(x, mine, es * x_rows * y.cols, cudaMemcpyDeviceToDevice, stream_));
    return Status();
  }
  // R: the factor's leading cols.extent columns; a solution: all its columns.
  const int64_t cols = y.factored == Factorization::kQr ? state_.plan.cols.extent : y.cols;
  return RowsOut<T>(y.data, y.local_rows, y.local_cols, cols, x, x_rows, cols);
}

template <typename T>
Status Engine::RowsOut(const void* local, int64_t ld, int64_t lc, int64_t cols, void* x,
                       int64_t x_rows, int64_t x_cols) {
  const layout::Plan& plan = state_.plan;
  const size_t es = sizeof(T);
  const int64_t n = plan.cols.extent, first = FirstRow(x_rows);
  // Chunks of rows (bounded scratch: R alone is n x n): each entry is held by one process, so
  // the sum over the grid assembles a chunk on every rank, which keeps its part of its block.
  // (The leading-rows map d_rhs_map[2] is the cyclic map for the first ld <= local_rows_ rows.)
  const int64_t chunk = RowsPerChunk(kRowsOutChunkBytes, es * cols, n, config_.rows_per_chunk);
  void* part = nullptr;
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(Scratch(es * chunk * cols, &part)));
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t r1 = std::min(n, r0 + chunk);
    JAXMG_CUDA(cudaMemsetAsync(part, 0, es * (r1 - r0) * cols, stream_));
    JAXMG_CUDA(cuda::ScatterRhs(KernelType<T>(), local, cols, state_.d_rhs_map[2], ld, lc,
                                plan.tile, ctx_.npcol, ctx_.mycol, /*conj=*/false, part, stream_,
                                r0, r1));
    const size_t reals = static_cast<size_t>((r1 - r0) * cols * Scalar<T>::kParts);
    JAXMG_NCCL(ncclAllReduce(part, part, reals, NcclRealOf<T>(), ncclSum, ctx_.comm, stream_));
    const int64_t lo = std::max(r0, first), hi = std::min(r1, first + x_rows);
    if (lo < hi) {
      JAXMG_CUDA(cudaMemcpy2DAsync(static_cast<char*>(x) + es * (lo - first) * x_cols, es * x_cols,
                                   static_cast<const char*>(part) + es * (lo - r0) * cols,
                                   es * cols, es * cols, hi - lo, cudaMemcpyDeviceToDevice,
                                   stream_));
    }
  }
  return Status();
}

template <typename T>
Status Engine::VectorsOut(const Matrix<T>& z, const Matrix<T>& work, T* shard) {
  StepTimer timer("VectorsOut", stream_);
  // The two-stage path on a P x 1 grid leaves Zᴴ itself.
  if (z.adjoint) return MatrixOut<T>(z.data, shard);
  // work := Zᴴ, then back to the block layout.
  JAXMG_RETURN_IF_ERROR(GridAdjoint<T>(z.data, work.data));
  return MatrixOut<T>(work.data, shard);
}

template <typename T>
Status Engine::SquareRowsOut(const Matrix<T>& s, T* x, int64_t x_rows, int64_t x_cols) {
  StepTimer timer("SquareRowsOut", stream_);
  return RowsOut<T>(s.data, s.local_rows, s.local_cols, s.cols, x, x_rows, x_cols);
}

template <typename T>
Status Engine::SingularValuesOut(const void* w, int64_t n, void* x, int64_t x_rows,
                                 int64_t x_cols) {
  using R = RealOf<T>;
  const size_t es = sizeof(T);
  // Descending, at least 0 (H is positive semi-definite), into x's last column for x's rows.
  std::vector<R> values(static_cast<size_t>(n));
  JAXMG_CUDA(cudaMemcpyAsync(values.data(), w, sizeof(R) * n, cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  const int64_t first = FirstRow(x_rows);
  std::vector<T> column(static_cast<size_t>(std::max<int64_t>(x_rows, 1)));
  for (int64_t i = 0; i < x_rows; ++i) column[i] = T(std::max<R>(values[n - 1 - (first + i)], 0));
  // From pageable memory: the copy has read `column` when cudaMemcpy2DAsync returns.
  JAXMG_CUDA(cudaMemcpy2DAsync(static_cast<char*>(x) + es * (x_cols - 1), es * x_cols,
                               column.data(), es, es, x_rows, cudaMemcpyHostToDevice, stream_));
  return Status();
}

template <typename T>
Status Engine::GlobalPivots(const Matrix<T>& lu, const Pivots& pivots, std::vector<int64_t>* out) {
  JAXMG_RETURN_IF_ERROR(CheckLu(lu.factored, "Pivots"));
  if (lu.factored == Factorization::kLuHostPivots) {
    *out = pivots.global;
    return Status();
  }
  return EnginePivots(pivots, out);
}

template <typename T>
Status Engine::PivotsOut(const Matrix<T>& lu, const Pivots& pivots, int32_t* out) {
  std::vector<int64_t> piv;
  JAXMG_RETURN_IF_ERROR(GlobalPivots(lu, pivots, &piv));
  std::vector<int32_t> narrow(piv.begin(), piv.end());
  // Pageable: the copy has read `narrow` when cudaMemcpyAsync returns.
  JAXMG_CUDA(cudaMemcpyAsync(out, narrow.data(), sizeof(int32_t) * narrow.size(),
                             cudaMemcpyHostToDevice, stream_));
  return Status();
}

template <typename T>
Status Engine::PivotsIn(const int32_t* in, Matrix<T>* lu, Pivots* piv) {
  // The kept pivots go to the solve that applies them on the host (LuSolveWithPivots), as the
  // engine's own LU does.
  const int64_t n = state_.plan.engine_rows();
  std::vector<int32_t> narrow(static_cast<size_t>(n));
  JAXMG_CUDA(
      cudaMemcpyAsync(narrow.data(), in, sizeof(int32_t) * n, cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  piv->global.assign(narrow.begin(), narrow.end());
  piv->device = nullptr;
  lu->factored = Factorization::kLuHostPivots;
  return Status();
}

#define JAXMG_INSTANTIATE_RHS(T)                                                                  \
  template Status Engine::RhsIn<T>(const T* b, int64_t nrhs, Axis axis, bool conj, Matrix<T>* c); \
  template Status Engine::RhsOut<T>(const Matrix<T>& z, T* x, Axis axis, bool conj);              \
  template Status Engine::Identity<T>(const Matrix<T>& like, Matrix<T>* out);                     \
  template Status Engine::LeadingRows<T>(const Matrix<T>& a, void** out);                         \
  template Status Engine::LeadingRowsOut<T>(const Matrix<T>& y, T* x, int64_t x_rows);            \
  template Status Engine::RowsOut<T>(const void* local, int64_t ld, int64_t lc, int64_t cols,     \
                                     void* x, int64_t x_rows, int64_t x_cols);                    \
  template Status Engine::VectorsOut<T>(const Matrix<T>& z, const Matrix<T>& work, T* shard);     \
  template Status Engine::SquareRowsOut<T>(const Matrix<T>& s, T* x, int64_t x_rows,              \
                                           int64_t x_cols);                                       \
  template Status Engine::GlobalPivots<T>(const Matrix<T>& lu, const Pivots& piv,                 \
                                          std::vector<int64_t>* out);                             \
  template Status Engine::PivotsOut<T>(const Matrix<T>& lu, const Pivots& piv, int32_t* out);     \
  template Status Engine::PivotsIn<T>(const int32_t* in, Matrix<T>* lu, Pivots* piv);             \
  template Status Engine::SingularValuesOut<T>(const void* w, int64_t n, void* x, int64_t x_rows, \
                                               int64_t x_cols);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_RHS)
#undef JAXMG_INSTANTIATE_RHS

}  // namespace jaxmg::cusolvermp
