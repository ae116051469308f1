// The own 1-D LU (1 x P grids) and its pivoted solves.
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

bool Engine::UseOwnLu() const {
  // The 1-D LU needs every engine row on every process (a 1 x P grid) and the relabeled layout.
  const char* choice = std::getenv("JAXMG_GPU_LU");
  const bool library = choice != nullptr && std::string(choice) == "cusolvermp";
  return !library && ctx_.nprow == 1 && state_.plan.strategy == layout::Strategy::kRelabel;
}

// Right-looking LU with partial pivoting on a 1 x P grid (columns block-cyclic, every row local):
// for each tile column k, its owner factors the panel (rows k t .. n) with cusolverDn, broadcasts
// it and its pivots (NCCL); every rank interchanges the rows of its other columns, solves for its
// part of the block row of U (cuBLAS trsm) and updates its trailing columns (cuBLAS gemm). The
// factors are stored as ScaLAPACK's p?getrf stores them; the 1-based global pivots are kept on
// the host for the solve.
template <typename T>
Status Engine::Lu1D(int* info) {
  const LocalBlas* lb = nullptr;
  cublasHandle_t blas = nullptr;
  cusolverDnHandle_t dn = nullptr;
  cusolverDnParams_t params = nullptr;
  const int64_t n = state_.plan.engine_rows(), t = state_.plan.tile, lr = local_rows_;
  const int64_t lc = local_cols_, procs = ctx_.npcol, me = ctx_.mycol;
  const size_t es = sizeof(T);
  int ilr = 0, it = 0;
  void *panel = nullptr, *pivots = nullptr, *panel_info = nullptr, *d_work = nullptr;
  size_t dev = 0, host = 0;
  // Handles and buffers first, agreed; then the panels, where a local error stops this rank's
  // computing but not its part of the broadcasts, agreed at the end (no rank leaves alone).
  Deferred local;
  local.Run([&] { return LocalSolver(&lb, &blas, &dn, &params); });
  local.Run([&] { return CheckedInt(lr, "local rows", &ilr); });
  local.Run([&] { return CheckedInt(t, "tile", &it); });
  local.Run([&] { return Scratch(es * n * t, &panel); });
  local.Run([&] { return Scratch(sizeof(int64_t) * n, &pivots); });
  local.Run([&] { return Scratch(sizeof(int), &panel_info); });
  local.Run([&] {
    return SolverCheck(lb->getrf_buffer_size(dn, params, n, t, DataTypeOf<T>(), panel, n,
                                             DataTypeOf<T>(), &dev, &host),
                       "cusolverDnXgetrf_bufferSize");
  });
  local.Run([&] { return Workspace(dev, host, &d_work); });
  local.Run([&] {
    return CudaCheck(cudaMemsetAsync(pivots, 0, sizeof(int64_t) * n, stream_), "cudaMemsetAsync");
  });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("lu", local));
  const T one(1), minus_one(-1);
  char* a = static_cast<char*>(work_);
  int64_t* piv = static_cast<int64_t*>(pivots);
  const size_t reals = static_cast<size_t>(Scalar<T>::kParts);
  Deferred failed;
  for (int64_t k = 0; k * t < n; ++k) {
    const int64_t owner = k % procs, row0 = k * t, m = n - row0, panel_col = (k / procs) * t;
    failed.Step("lu", ctx_.rank, k);
    if (me == owner) {
      char* column = a + es * (row0 + panel_col * lr);
      failed.Run([&] {
        return SolverCheck(
            lb->getrf(dn, params, m, t, DataTypeOf<T>(), column, lr, piv + row0, DataTypeOf<T>(),
                      d_work, workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size(),
                      static_cast<int*>(panel_info)),
            "cusolverDnXgetrf");
      });
      failed.Run([&] {
        return CudaCheck(cudaMemcpy2DAsync(panel, es * m, column, es * lr, es * m, t,
                                           cudaMemcpyDeviceToDevice, stream_),
                         "cudaMemcpy2DAsync (panel)");
      });
    }
    if (procs > 1) {
      JAXMG_NCCL(ncclGroupStart());
      JAXMG_NCCL(
          ncclBroadcast(panel, panel, m * t * reals, NcclRealOf<T>(), owner, ctx_.comm, stream_));
      JAXMG_NCCL(ncclBroadcast(piv + row0, piv + row0, t, ncclInt64, owner, ctx_.comm, stream_));
      JAXMG_NCCL(ncclGroupEnd());
    }
    if (!failed.ok()) continue;
    // This rank's columns right of tile k: local tiles j with j * procs + me > k.
    const int64_t first = k >= me ? (k - me) / procs + 1 : 0;
    const int64_t cols = lc - first * t;
    failed.Run([&]() -> Status {
      const int64_t skip_begin = me == owner ? panel_col : 0,
                    skip_end = me == owner ? panel_col + t : 0;
      JAXMG_CUDA(cuda::RowSwaps(KernelType<T>(), work_, lr, 0, lc, skip_begin, skip_end, row0,
                                piv + row0, std::min(t, m), stream_));
      if (cols <= 0) return Status();
      int icols = 0, im = 0;
      JAXMG_RETURN_IF_ERROR(CheckedInt(cols, "columns", &icols));
      JAXMG_RETURN_IF_ERROR(CheckedInt(m, "rows", &im));
      char* block = a + es * (row0 + first * t * lr);
      JAXMG_RETURN_IF_ERROR(CublasCheck(
          lb->trsm[Scalar<T>::kIndex](blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N,
                                      CUBLAS_DIAG_UNIT, it, icols, &one, panel, im, block, ilr),
          "cublas trsm"));
      if (m <= t) return Status();
      return CublasCheck(
          lb->gemm[Scalar<T>::kIndex](blas, CUBLAS_OP_N, CUBLAS_OP_N, im - it, icols, it,
                                      &minus_one, static_cast<char*>(panel) + es * t, im, block,
                                      ilr, &one, block + es * t, ilr),
          "cublas gemm");
    });
  }
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("lu", failed));
  // Global 1-based pivots: panel k's are relative to its first row.
  own_pivots_.assign(static_cast<size_t>(n), 0);
  JAXMG_CUDA(cudaMemcpyAsync(own_pivots_.data(), piv, sizeof(int64_t) * n, cudaMemcpyDeviceToHost,
                             stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  for (int64_t i = 0; i < n; ++i) own_pivots_[i] += (i / t) * t;
  own_lu_ = true;
  return Agree<T>(false, info);  // the diagonal check finds a zero or non-finite pivot
}

// Solves op(B) z = c with P B = L U held as p?getrf stores it and the global 1-based pivots:
// op = N: L U z = P c (pivots first, then two cuBLASMp triangular solves); op = T: Uᵀ Lᵀ (P z) =
// c (the solves with transposition, then the pivots in reverse order). cuSOLVERMp's Getrs has
// no transposed solve, and the engine's own LU keeps its pivots on the host. The pivots are
// applied to the whole right-hand side (n x nrhs, small) on the host, on every rank.
template <typename T>
Status Engine::LuSolveWithPivots(bool transpose, const std::vector<int64_t>& piv) {
  const int64_t n = state_.plan.engine_rows();
  for (int64_t i = 0; i < n; ++i) {  // (the same pivots on every rank)
    if (piv[i] - 1 < i || piv[i] > n) return JAXMG_ERROR("a pivot is out of range");
  }
  // Local errors are kept (every rank still enters each collective) and agreed at the end.
  Deferred failed;
  if (!transpose) JAXMG_RETURN_IF_ERROR(PivotRhs<T>(piv, /*reverse=*/false, &failed));
  JAXMG_RETURN_IF_ERROR(TriangularSolves<T>(transpose, &failed));
  if (transpose) JAXMG_RETURN_IF_ERROR(PivotRhs<T>(piv, /*reverse=*/true, &failed));
  return AgreeOnFailure("lu_solve", failed);
}

template <typename T>
Status Engine::TriangularSolves(bool transpose, Deferred* failed) {
  const layout::Plan& plan = state_.plan;
  const int64_t n = plan.engine_rows(), t = plan.tile, lr = local_rows_, nrhs = nrhs_;
  BlasDescriptor da, db;
  const cublasComputeType_t compute = ComputeOf<T>();
  const T one(1);
  const cublasOperation_t op = transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  const std::pair<cublasFillMode_t, cublasDiagType_t> lower{CUBLAS_FILL_MODE_LOWER,
                                                            CUBLAS_DIAG_UNIT};
  const std::pair<cublasFillMode_t, cublasDiagType_t> upper{CUBLAS_FILL_MODE_UPPER,
                                                            CUBLAS_DIAG_NON_UNIT};
  const auto order = transpose ? std::array{upper, lower} : std::array{lower, upper};
  // Descriptors and the workspace of both solves first (agreed: the solves are collective).
  Deferred local;
  local.Run([&] { return da.Create(ctx_, DataTypeOf<T>(), n, n, t, t, std::max<int64_t>(lr, 1)); });
  local.Run(
      [&] { return db.Create(ctx_, DataTypeOf<T>(), n, nrhs, t, t, std::max<int64_t>(lr, 1)); });
  local.Run(
      [&] { return BlasMpCheck(cublasMpSetStream(ctx_.blas, stream_), "cublasMpSetStream"); });
  size_t dev = 0, host = 0;
  for (const auto& [uplo, diag] : order) {
    local.Run([&]() -> Status {
      size_t d = 0, h = 0;
      JAXMG_BLASMP(cublasMpTrsm_bufferSize(ctx_.blas, CUBLAS_SIDE_LEFT, uplo, op, diag, n, nrhs,
                                           &one, work_, 1, 1, da.get(), local_b_, 1, 1, db.get(),
                                           compute, &d, &h));
      dev = std::max(dev, d), host = std::max(host, h);
      return Status();
    });
  }
  void* d_work = nullptr;
  local.Run([&] { return Workspace(dev, host, &d_work); });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("lu_solve", local));
  int64_t step = 0;
  for (const auto& [uplo, diag] : order) {
    failed->Step("lu_solve", ctx_.rank, step++);
    failed->Keep(
        BlasMpCheck(cublasMpTrsm(ctx_.blas, CUBLAS_SIDE_LEFT, uplo, op, diag, n, nrhs, &one, work_,
                                 1, 1, da.get(), local_b_, 1, 1, db.get(), compute, d_work,
                                 workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size()),
                    "cublasMpTrsm"));
  }
  return Status();
}

// Applies the row interchanges of `piv` (1-based, global) to the distributed right-hand side
// (forward, or in reverse order), through its whole copy on every rank's host.
template <typename T>
Status Engine::PivotRhs(const std::vector<int64_t>& piv, bool reverse, Deferred* failed) {
  const int64_t n = state_.plan.engine_rows(), t = state_.plan.tile, lr = local_rows_;
  const int64_t nrhs = nrhs_, lbc = rhs_local_cols_;
  const size_t es = sizeof(T);
  std::vector<T> mine(static_cast<size_t>(std::max<int64_t>(lr * lbc, 1)));
  std::vector<T> whole(static_cast<size_t>(n * nrhs), T(0));
  auto each = [&](auto&& fn) {
    for (int64_t c = 0; c < lbc; ++c) {
      const int64_t j = layout::CyclicGlobal(c, t, ctx_.npcol, ctx_.mycol);
      for (int64_t r = 0; r < lr; ++r) {
        fn(mine[r + c * lr], whole[layout::CyclicGlobal(r, t, ctx_.nprow, ctx_.myrow) * nrhs + j]);
      }
    }
  };
  // After a local failure this rank adds zeros to the sum (full_ is n x nrhs on every rank).
  failed->Run([&]() -> Status {
    JAXMG_CUDA(
        cudaMemcpyAsync(mine.data(), local_b_, es * lr * lbc, cudaMemcpyDeviceToHost, stream_));
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
        cudaMemcpyAsync(local_b_, mine.data(), es * lr * lbc, cudaMemcpyHostToDevice, stream_));
    JAXMG_CUDA(cudaStreamSynchronize(stream_));  // `mine` is freed on return
    return Status();
  });
  return Status();
}

#define JAXMG_INSTANTIATE_LU_1D(T)                                                               \
  template Status Engine::Lu1D<T>(int* info);                                                    \
  template Status Engine::LuSolveWithPivots<T>(bool transpose, const std::vector<int64_t>& piv); \
  template Status Engine::TriangularSolves<T>(bool transpose, Deferred* failed);                 \
  template Status Engine::PivotRhs<T>(const std::vector<int64_t>& piv, bool reverse,             \
                                      Deferred* failed);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_LU_1D)
#undef JAXMG_INSTANTIATE_LU_1D

}  // namespace jaxmg::cusolvermp
