// The blocked inverses: of a triangular matrix, of a Cholesky factorization (B⁻¹ = L⁻ᴴ L⁻¹) and
// of an LU factorization (M⁻¹ = U⁻¹ L⁻¹ Pᵀ).
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
Status Engine::TriangularInverse(const void* l, int64_t ll, void* w, int64_t lw, int64_t n,
                                 bool upper, bool unit, Deferred* failed) {
  // Column block k of W = L⁻¹ is L[k:, k:]⁻¹ I[k:, k] for a lower L, and of W = U⁻¹ it is
  // U[:e, :e]⁻¹ I[:e, k] for an upper U (e: the block's end): one cuBLASMp trsm per block of
  // about n / 8 (whole tiles), N³/3 flops in all instead of N³.
  const int64_t t = state_.plan.tile, tiles = (n + t - 1) / t;
  const int64_t nb = t * std::max<int64_t>(1, (tiles + 7) / 8);
  BlasDescriptor dl, dw;
  const cublasComputeType_t compute = ComputeOf<T>();
  const cublasFillMode_t fill = upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
  const cublasDiagType_t diag = unit ? CUBLAS_DIAG_UNIT : CUBLAS_DIAG_NON_UNIT;
  const T one(1);
  // The triangle's part that block k needs: rows and columns from `first` (1-based), m of them.
  auto part = [&](int64_t k0, int64_t* first, int64_t* m) {
    *first = upper ? 1 : k0 + 1;
    *m = upper ? k0 + std::min(nb, n - k0) : n - k0;
  };
  // Descriptors and the largest block's workspace first, agreed (the trsm are collective).
  Deferred local;
  local.Run([&] { return dl.Create(ctx_, DataTypeOf<T>(), n, n, t, t, std::max<int64_t>(ll, 1)); });
  local.Run([&] { return dw.Create(ctx_, DataTypeOf<T>(), n, n, t, t, std::max<int64_t>(lw, 1)); });
  local.Run(
      [&] { return BlasMpCheck(cublasMpSetStream(ctx_.blas, stream_), "cublasMpSetStream"); });
  size_t dev = 0, host = 0;
  for (int64_t k0 = 0; k0 < n && local.ok(); k0 += nb) {
    int64_t first = 0, m = 0;
    part(k0, &first, &m);
    local.Run([&]() -> Status {
      size_t d = 0, h = 0;
      JAXMG_BLASMP(cublasMpTrsm_bufferSize(ctx_.blas, CUBLAS_SIDE_LEFT, fill, CUBLAS_OP_N, diag, m,
                                           std::min(nb, n - k0), &one, l, first, first, dl.get(), w,
                                           first, k0 + 1, dw.get(), compute, &d, &h));
      dev = std::max(dev, d), host = std::max(host, h);
      return Status();
    });
  }
  void* d_work = nullptr;
  local.Run([&] { return Workspace(dev, host, &d_work); });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv_triangular", local));
  for (int64_t k0 = 0; k0 < n; k0 += nb) {
    const int64_t kb = std::min(nb, n - k0);
    int64_t first = 0, m = 0;
    part(k0, &first, &m);
    failed->Step("inv_triangular", ctx_.rank, k0 / nb);
    failed->Keep(BlasMpCheck(
        cublasMpTrsm(ctx_.blas, CUBLAS_SIDE_LEFT, fill, CUBLAS_OP_N, diag, m, kb, &one, l, first,
                     first, dl.get(), w, first, k0 + 1, dw.get(), compute, d_work, workspace_bytes_,
                     ctx_.host_work.data(), ctx_.host_work.size()),
        "cublasMpTrsm"));
  }
  return Status();
}

template <typename T>
Status Engine::CholeskyInverse() {
  // W = L⁻¹ (TriangularInverse), then B⁻¹ = Wᴴ W = Σ_k W_kᴴ W_k over W's row blocks W_k = W[k,
  // :e_k], which are zero beyond column e_k = the block's end (one gemm each into the leading e_k x
  // e_k block, 2N³/3 flops in all, both triangles). With the factorization, N³ flops against 7N³/3
  // for the solve with the identity.
  StepTimer timer("CholeskyInverse", stream_);
  const layout::Plan& plan = state_.plan;
  const int64_t n = plan.engine_rows(), t = plan.tile, ld = std::max<int64_t>(local_rows_, 1);
  const int64_t tiles = (n + t - 1) / t;
  const int64_t nb = t * std::max<int64_t>(1, (tiles + 7) / 8);  // about 8 blocks, whole tiles
  BlasDescriptor dl, dw;
  const cublasComputeType_t compute = ComputeOf<T>();
  const T one(1);
  const cublasOperation_t adjoint = AdjointOp<T>();
  // B⁻¹ into a buffer of its own (work_ may be the shard, which InverseOut writes).
  void* y = nullptr;
  const size_t bytes = sizeof(T) * std::max<int64_t>(local_rows_ * local_cols_, 1);
  // Buffers and the products' workspace first, agreed; local errors after that are kept and
  // agreed at the end (every rank enters each collective product).
  Deferred local;
  local.Run([&] { return Identity<T>(); });  // W := I (local_b_, distributed like B)
  local.Run([&] { return dl.Create(ctx_, DataTypeOf<T>(), n, n, t, t, ld); });
  local.Run([&] { return dw.Create(ctx_, DataTypeOf<T>(), n, n, t, t, ld); });
  local.Run([&] { return Scratch(bytes, &y); });
  local.Run([&] { return CudaCheck(cudaMemsetAsync(y, 0, bytes, stream_), "cudaMemsetAsync"); });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv_cholesky", local));
  Deferred failed;
  JAXMG_RETURN_IF_ERROR(TriangularInverse<T>(work_, ld, local_b_, ld, n, false, false, &failed));
  size_t dev = 0, host = 0;
  for (int64_t k0 = 0; k0 < n && local.ok(); k0 += nb) {
    const int64_t kb = std::min(nb, n - k0), e = k0 + kb;
    local.Run([&]() -> Status {
      size_t d = 0, h = 0;
      JAXMG_BLASMP(cublasMpGemm_bufferSize(ctx_.blas, adjoint, CUBLAS_OP_N, e, e, kb, &one,
                                           local_b_, k0 + 1, 1, dw.get(), local_b_, k0 + 1, 1,
                                           dw.get(), &one, y, 1, 1, dl.get(), compute, &d, &h));
      dev = std::max(dev, d), host = std::max(host, h);
      return Status();
    });
  }
  void* d_work = nullptr;
  local.Run([&] { return Workspace(dev, host, &d_work); });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv_cholesky", local));
  for (int64_t k0 = 0; k0 < n; k0 += nb) {
    const int64_t kb = std::min(nb, n - k0), e = k0 + kb;
    failed.Step("inv_cholesky", ctx_.rank, k0 / nb);
    failed.Keep(BlasMpCheck(
        cublasMpGemm(ctx_.blas, adjoint, CUBLAS_OP_N, e, e, kb, &one, local_b_, k0 + 1, 1, dw.get(),
                     local_b_, k0 + 1, 1, dw.get(), &one, y, 1, 1, dl.get(), compute, d_work,
                     workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size()),
        "cublasMpGemm"));
  }
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv_cholesky", failed));
  local_b_ = y;  // (desc_b_ describes it: the same distribution as W's)
  return Status();
}

template <typename T>
Status Engine::InverseSolve(bool transpose) {
  // M = P L U: M⁻¹ = U⁻¹ L⁻¹ Pᵀ, in three steps of about N³/3, N³/3 and 2N³/3 flops (against
  // 2N³ for two triangular solves with the N columns of the identity): W_L = L⁻¹ and
  // W_U = U⁻¹ (TriangularInverse), X = W_U W_L by blocks (W_U's column block k is zero below
  // its end e_k and W_L's row block k beyond column e_k: one gemm into X's leading e_k x e_k
  // block each), then X Pᵀ, X's columns moved by the pivots (PermuteColumns).
  StepTimer timer("InverseSolve", stream_);
  if (own_lu_ && OneDevice()) {
    // One device: M⁻¹ (op = T: M⁻ᵀ) = cusolverDn's getrs with the identity, as jnp.linalg.inv
    // solves (2N³ flops, against 4N³/3 for the blocks below; measured faster on one H200:
    // bench/one_device.py).
    JAXMG_RETURN_IF_ERROR(Identity<T>());
    return LocalGetrs<T>(transpose);
  }
  const layout::Plan& plan = state_.plan;
  const int64_t n = plan.engine_rows(), t = plan.tile, lr = local_rows_, lc = local_cols_;
  const int64_t ld = std::max<int64_t>(lr, 1);
  std::vector<int64_t> piv;
  JAXMG_RETURN_IF_ERROR(Pivots(&piv));
  // Pᵀ = the identity with the pivots' row interchanges applied in order: its row i is
  // e_{order[i]}ᵀ, so column order[i] of X Pᵀ is column i of X.
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  for (int64_t i = 0; i < n; ++i) {
    if (piv[i] - 1 < i || piv[i] > n) return JAXMG_ERROR("a pivot is out of range");
    std::swap(order[i], order[piv[i] - 1]);
  }
  const size_t bytes = sizeof(T) * std::max<int64_t>(lr * lc, 1);
  void *w_upper = nullptr, *x = nullptr;
  BlasDescriptor dm;
  const cublasComputeType_t compute = ComputeOf<T>();
  const T one(1), zero(0);
  const int64_t tiles = (n + t - 1) / t;
  const int64_t nb = t * std::max<int64_t>(1, (tiles + 7) / 8);  // about 8 blocks, whole tiles
  // Buffers first, agreed; local errors after that are kept (every rank enters each collective)
  // and agreed at the end.
  Deferred local;
  local.Run([&] { return Identity<T>(); });  // W_L := I (local_b_, desc_b_)
  local.Run([&] { return Scratch(bytes, &w_upper); });
  local.Run([&] { return Scratch(bytes, &x); });
  local.Run([&] { return dm.Create(ctx_, DataTypeOf<T>(), n, n, t, t, ld); });
  local.Run([&]() -> Status {
    JAXMG_CUDA(
        cudaMemcpyAsync(w_upper, local_b_, sizeof(T) * lr * lc, cudaMemcpyDeviceToDevice, stream_));
    JAXMG_CUDA(cudaMemsetAsync(x, 0, sizeof(T) * lr * lc, stream_));
    return Status();
  });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv", local));
  Deferred failed;
  JAXMG_RETURN_IF_ERROR(TriangularInverse<T>(work_, ld, local_b_, ld, n, false, true, &failed));
  JAXMG_RETURN_IF_ERROR(TriangularInverse<T>(work_, ld, w_upper, ld, n, true, false, &failed));
  size_t dev = 0, host = 0;
  for (int64_t k0 = 0; k0 < n && local.ok(); k0 += nb) {
    const int64_t kb = std::min(nb, n - k0), e = k0 + kb;
    local.Run([&]() -> Status {
      size_t d = 0, h = 0;
      JAXMG_BLASMP(cublasMpGemm_bufferSize(ctx_.blas, CUBLAS_OP_N, CUBLAS_OP_N, e, e, kb, &one,
                                           w_upper, 1, k0 + 1, dm.get(), local_b_, k0 + 1, 1,
                                           dm.get(), &one, x, 1, 1, dm.get(), compute, &d, &h));
      dev = std::max(dev, d), host = std::max(host, h);
      return Status();
    });
  }
  if (transpose) {
    local.Run([&]() -> Status {
      size_t d = 0, h = 0;
      JAXMG_BLASMP(cublasMpGeadd_bufferSize(ctx_.blas, CUBLAS_OP_T, n, n, &one, local_b_, 1, 1,
                                            dm.get(), &zero, x, 1, 1, dm.get(), &d, &h));
      dev = std::max(dev, d), host = std::max(host, h);
      return Status();
    });
  }
  void* d_work = nullptr;
  local.Run([&] { return Workspace(dev, host, &d_work); });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv", local));
  for (int64_t k0 = 0; k0 < n; k0 += nb) {
    const int64_t kb = std::min(nb, n - k0), e = k0 + kb;
    failed.Step("inv", ctx_.rank, k0 / nb);
    failed.Keep(BlasMpCheck(
        cublasMpGemm(ctx_.blas, CUBLAS_OP_N, CUBLAS_OP_N, e, e, kb, &one, w_upper, 1, k0 + 1,
                     dm.get(), local_b_, k0 + 1, 1, dm.get(), &one, x, 1, 1, dm.get(), compute,
                     d_work, workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size()),
        "cublasMpGemm"));
  }
  // local_b_ := X Pᵀ = M⁻¹
  JAXMG_RETURN_IF_ERROR(PermuteColumns<T>(x, local_b_, order, &failed));
  if (transpose) {
    // M⁻ᵀ: the transpose (not the adjoint) of M⁻¹, into x (free again).
    failed.Keep(
        BlasMpCheck(cublasMpGeadd(ctx_.blas, CUBLAS_OP_T, n, n, &one, local_b_, 1, 1, dm.get(),
                                  &zero, x, 1, 1, dm.get(), d_work, workspace_bytes_,
                                  ctx_.host_work.data(), ctx_.host_work.size()),
                    "cublasMpGeadd"));
  }
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv", failed));
  if (transpose) local_b_ = x;  // (desc_b_ describes it)
  return Status();
}

#define JAXMG_INSTANTIATE_INVERSES(T)                                                          \
  template Status Engine::TriangularInverse<T>(const void* l, int64_t ll, void* w, int64_t lw, \
                                               int64_t n, bool upper, bool unit,               \
                                               Deferred* failed);                              \
  template Status Engine::CholeskyInverse<T>();                                                \
  template Status Engine::InverseSolve<T>(bool transpose);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_INVERSES)
#undef JAXMG_INSTANTIATE_INVERSES

}  // namespace jaxmg::cusolvermp
