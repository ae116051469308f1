// The own 1-D LU (1 x P grids) and its pivoted solves; the own 1-D Cholesky.
#include "algorithms/lu_1d.h"

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

#include "algorithms/cholesky_1d.h"
#include "common/chunk.h"
#include "common/deferred.h"
#include "common/scalar.h"
#include "common/symmetry.h"
#include "cuda/kernels.h"
#include "engines/cusolvermp/backend.h"
#include "engines/cusolvermp/engine.h"
#include "engines/cusolvermp/engine_internal.h"
#include "engines/cusolvermp/engine_util.h"
#include "engines/cusolvermp/local_blas.h"

namespace jaxmg::cusolvermp {

bool Engine::UseOwnLu() const {
  // The 1-D LU needs every engine row on every process (a 1 x P grid) and the relabeled layout;
  // on one device any layout (the local array is the whole matrix: inv, slogdet). config.gpu_lu
  // = cusolvermp: cuSOLVERMp's Getrf everywhere.
  return config_.gpu_lu != Choice::kLibrary && ctx_.nprow == 1 &&
         (state_.plan.strategy == layout::Strategy::kRelabel || OneDevice());
}

// The 1-D LU (algorithms/lu_1d.h) over this engine's backend: cusolverDn panels, NCCL
// broadcasts, the row-swap kernel, cuBLAS trsm and gemm. The factors are stored as ScaLAPACK's
// p?getrf stores them; the 1-based global pivots are kept on the host for the solve.
template <typename T>
Status Engine::Lu1D(Matrix<T>* a, Pivots* piv, int* info) {
  Backend backend(*this);
  JAXMG_RETURN_IF_ERROR(algorithms::Lu1D(backend, DistributionOf(a->rows, a->cols, a->local_rows),
                                         a->data, &piv->global));
  a->factored = Factorization::kLuHostPivots;
  return Agree<T>(*a, false, info);  // the diagonal check finds a zero or non-finite pivot
}

bool Engine::UseOwnCholesky() const {
  // As the 1-D LU, where asked (config.gpu_cholesky = blocked): the library's is the default.
  return config_.gpu_cholesky == Choice::kOwn && ctx_.nprow == 1 &&
         (state_.plan.strategy == layout::Strategy::kRelabel || OneDevice());
}

// The 1-D Cholesky (algorithms/cholesky_1d.h) over this engine's backend: cusolverDn for the
// diagonal tiles, cuBLAS trsm and gemm (with config.gpu_math's mode), NCCL broadcasts. The
// factor is stored as p?potrf stores it; the first failing column goes into the status slot the
// library's potrf would have written, for Agree. On one device the tiles are only the
// algorithm's blocks: at least kOneDeviceCholeskyBlock wide (one H100, N = 32768, TF32, panel
// solves by the inverse: blocks of 2048 took 86 ms, of 1024 100 ms; by trsm 98, 105 and, of 512,
// 130 ms; bench/results/cholesky_blocks_probe_h100x1_9af010f.json).
constexpr int64_t kOneDeviceCholeskyBlock = 2048;

template <typename T>
Status Engine::Cholesky1D(Matrix<T>* a, int* info) {
  JAXMG_RETURN_IF_ERROR(Small());
  Backend backend(*this);
  int64_t failed_at = 0;
  algorithms::Distribution g = DistributionOf(a->rows, a->cols, a->local_rows);
  if (OneDevice()) {
    g = algorithms::Distribution::Of(a->rows, a->cols,
                                     std::max(state_.plan.tile, kOneDeviceCholeskyBlock), 1, 0, 1,
                                     0, a->local_rows, ctx_.rank);
  }
  JAXMG_RETURN_IF_ERROR(algorithms::Cholesky1D(backend, g, a->data, &failed_at));
  if (DebugParts()) PrintParts("cholesky");
  const int32_t first = static_cast<int32_t>(std::min<int64_t>(failed_at, INT32_MAX));
  // Pageable: the copy has read `first` when cudaMemcpyAsync returns.
  JAXMG_CUDA(cudaMemcpyAsync(small_, &first, sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  return Agree<T>(*a, false, info);
}

// Solves op(B) z = c with P B = L U held as p?getrf stores it and the global 1-based pivots:
// op = N: L U z = P c (pivots first, then two cuBLASMp triangular solves); op = T: Uᵀ Lᵀ (P z) =
// c (the solves with transposition, then the pivots in reverse order). cuSOLVERMp's Getrs has
// no transposed solve, and the engine's own LU keeps its pivots on the host. The pivots are
// applied to the whole right-hand side (n x nrhs, small) on the host, on every rank.
template <typename T>
Status Engine::LuSolveWithPivots(const Matrix<T>& lu, const Matrix<T>& c, bool transpose,
                                 const std::vector<int64_t>& piv) {
  const int64_t n = lu.rows;
  for (int64_t i = 0; i < n; ++i) {  // (the same pivots on every rank)
    if (piv[i] - 1 < i || piv[i] > n) return JAXMG_ERROR("a pivot is out of range");
  }
  // Local errors are kept (every rank still enters each collective) and agreed at the end.
  Deferred failed;
  if (!transpose) JAXMG_RETURN_IF_ERROR(PivotRhs<T>(c, piv, /*reverse=*/false, &failed));
  JAXMG_RETURN_IF_ERROR(TriangularSolves<T>(lu, c, transpose, &failed));
  if (transpose) JAXMG_RETURN_IF_ERROR(PivotRhs<T>(c, piv, /*reverse=*/true, &failed));
  return AgreeOnFailure("lu_solve", failed);
}

template <typename T>
Status Engine::TriangularSolves(const Matrix<T>& lu, const Matrix<T>& c, bool transpose,
                                Deferred* failed) {
  const int64_t n = lu.rows, t = lu.tile, nrhs = c.cols;
  BlasDescriptor da, db;
  const T one(1);
  const cublasOperation_t op = transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  const std::pair<cublasFillMode_t, cublasDiagType_t> lower{CUBLAS_FILL_MODE_LOWER,
                                                            CUBLAS_DIAG_UNIT};
  const std::pair<cublasFillMode_t, cublasDiagType_t> upper{CUBLAS_FILL_MODE_UPPER,
                                                            CUBLAS_DIAG_NON_UNIT};
  const auto order = transpose ? std::array{upper, lower} : std::array{lower, upper};
  // Descriptors and the workspace of both solves first (agreed: the solves are collective).
  Deferred local;
  local.Run([&] { return da.Create(ctx_, DataTypeOf<T>(), n, n, t, t, lu.ld); });
  local.Run([&] { return db.Create(ctx_, DataTypeOf<T>(), n, nrhs, t, t, c.ld); });
  local.Run(
      [&] { return BlasMpCheck(cublasMpSetStream(ctx_.blas, stream_), "cublasMpSetStream"); });
  const auto solve = [&](cublasFillMode_t uplo, cublasDiagType_t diag) {
    return vendor::BlasMpTrsm<T>{ctx_.blas,
                                 CUBLAS_SIDE_LEFT,
                                 uplo,
                                 op,
                                 diag,
                                 n,
                                 nrhs,
                                 one,
                                 {lu.data, 1, 1, da.get()},
                                 {c.data, 1, 1, db.get()}};
  };
  size_t dev = 0, host = 0;
  for (const auto& [uplo, diag] : order) {
    local.Run([&]() -> Status {
      size_t d = 0, h = 0;
      JAXMG_RETURN_IF_ERROR(vendor::Size(solve(uplo, diag), &d, &h));
      dev = std::max(dev, d), host = std::max(host, h);
      return Status();
    });
  }
  vendor::Work work;
  local.Run([&] { return Workspace(dev, host, &work); });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("lu_solve", local));
  int64_t step = 0;
  for (const auto& [uplo, diag] : order) {
    failed->Step("lu_solve", ctx_.rank, step++);
    failed->Keep(vendor::Run(solve(uplo, diag), work));
  }
  return Status();
}

// Applies the row interchanges of `piv` (1-based, global) to the distributed right-hand side
// (forward, or in reverse order), through its whole copy on every rank's host.
template <typename T>
Status Engine::PivotRhs(const Matrix<T>& c, const std::vector<int64_t>& piv, bool reverse,
                        Deferred* failed) {
  const int64_t n = c.rows, t = c.tile, lr = c.local_rows;
  const int64_t nrhs = c.cols, lbc = c.local_cols;
  const size_t es = sizeof(T);
  std::vector<T> mine(static_cast<size_t>(std::max<int64_t>(lr * lbc, 1)));
  std::vector<T> whole(static_cast<size_t>(n * nrhs), T(0));
  auto each = [&](auto&& fn) {
    for (int64_t c = 0; c < lbc; ++c) {
      const int64_t j =
          layout::CyclicAxis{t, ctx_.npcol, ctx_.mycol}.Global(layout::LocalIndex{c}).value;
      for (int64_t r = 0; r < lr; ++r) {
        fn(mine[r + c * lr],
           whole[layout::CyclicAxis{t, ctx_.nprow, ctx_.myrow}.Global(layout::LocalIndex{r}).value *
                     nrhs +
                 j]);
      }
    }
  };
  // After a local failure this rank adds zeros to the sum (full_ is n x nrhs on every rank).
  failed->Run([&]() -> Status {
    JAXMG_CUDA(
        cudaMemcpyAsync(mine.data(), c.data, es * lr * lbc, cudaMemcpyDeviceToHost, stream_));
    JAXMG_CUDA(cudaStreamSynchronize(stream_));
    each([](const T& local, T& global) { global = local; });
    return Status();
  });
  JAXMG_CUDA(cudaMemcpyAsync(full_, whole.data(), es * n * nrhs, cudaMemcpyHostToDevice, stream_));
  JAXMG_NCCL(ncclAllReduce(full_, full_, static_cast<size_t>(n * nrhs * Scalar<T>::kParts),
                           NcclRealOf<T>(), ncclSum, ctx_.comm, stream_));
  JAXMG_CUDA(cudaMemcpyAsync(whole.data(), full_, es * n * nrhs, cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  if (!failed->ok()) return Status();
  for (int64_t s = 0; s < n; ++s) {
    const int64_t i = reverse ? n - 1 - s : s, p = piv[i] - 1;
    if (p != i) {
      std::swap_ranges(whole.begin() + i * nrhs, whole.begin() + (i + 1) * nrhs,
                       whole.begin() + p * nrhs);
    }
  }
  each([](T& local, const T& global) { local = global; });
  failed->Run([&]() -> Status {
    JAXMG_CUDA(
        cudaMemcpyAsync(c.data, mine.data(), es * lr * lbc, cudaMemcpyHostToDevice, stream_));
    JAXMG_CUDA(cudaStreamSynchronize(stream_));  // `mine` is freed on return
    return Status();
  });
  return Status();
}

#define JAXMG_INSTANTIATE_LU_1D(T)                                                               \
  template Status Engine::Lu1D<T>(Matrix<T> * a, Pivots * piv, int* info);                       \
  template Status Engine::Cholesky1D<T>(Matrix<T> * a, int* info);                               \
  template Status Engine::LuSolveWithPivots<T>(const Matrix<T>& lu, const Matrix<T>& c,          \
                                               bool transpose, const std::vector<int64_t>& piv); \
  template Status Engine::TriangularSolves<T>(const Matrix<T>& lu, const Matrix<T>& c,           \
                                              bool transpose, Deferred* failed);                 \
  template Status Engine::PivotRhs<T>(const Matrix<T>& c, const std::vector<int64_t>& piv,       \
                                      bool reverse, Deferred* failed);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_LU_1D)
#undef JAXMG_INSTANTIATE_LU_1D

}  // namespace jaxmg::cusolvermp
