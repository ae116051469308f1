// The blocked inverses on the GPU engine (algorithms/inverses.h over the cuBLASMp backend): of a
// triangular matrix, of a Cholesky factorization (B⁻¹ = L⁻ᴴ L⁻¹) and of an LU factorization
// (M⁻¹ = U⁻¹ L⁻¹ Pᵀ: the algorithm's product, then the column moves and the transposition here).
#include "algorithms/inverses.h"

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
#include "engines/cusolvermp/backend.h"
#include "engines/cusolvermp/engine.h"
#include "engines/cusolvermp/engine_internal.h"
#include "engines/cusolvermp/engine_util.h"
#include "engines/cusolvermp/local_blas.h"

namespace jaxmg::cusolvermp {

algorithms::Square Engine::Square(int64_t n, int64_t ld) const {
  algorithms::Square g;
  g.n = n;
  g.t = state_.plan.tile;
  g.ld = std::max<int64_t>(ld, 1);
  g.rank = ctx_.rank;
  return g;
}

template <typename T>
Status Engine::CholeskyInverse() {
  // B⁻¹ = L⁻ᴴ L⁻¹ by blocks (algorithms/inverses.h): N³ flops against 7N³/3 for the solve with
  // the identity.
  StepTimer timer("CholeskyInverse", stream_);
  const int64_t n = state_.plan.engine_rows();
  // B⁻¹ into a buffer of its own (work_ may be the shard, which InverseOut writes).
  void* y = nullptr;
  const size_t bytes = sizeof(T) * std::max<int64_t>(local_rows_ * local_cols_, 1);
  Deferred local;
  local.Run([&] { return Identity<T>(); });  // W := I (local_b_, distributed like B)
  local.Run([&] { return Scratch(bytes, &y); });
  local.Run([&] { return CudaCheck(cudaMemsetAsync(y, 0, bytes, stream_), "cudaMemsetAsync"); });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv_cholesky", local));
  Backend backend(*this);
  JAXMG_RETURN_IF_ERROR(
      algorithms::CholeskyInverse<T>(backend, Square(n, local_rows_), static_cast<const T*>(work_),
                                     static_cast<T*>(local_b_), static_cast<T*>(y)));
  local_b_ = y;  // (desc_b_ describes it: the same distribution as W's)
  return Status();
}

template <typename T>
Status Engine::InverseSolve(bool transpose) {
  // M = P L U: M⁻¹ = U⁻¹ L⁻¹ Pᵀ by blocks (algorithms/inverses.h LuInverse), 4N³/3 flops
  // against 2N³ for two triangular solves with the N columns of the identity.
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
  const size_t bytes = sizeof(T) * std::max<int64_t>(lr * lc, 1);
  void *w_upper = nullptr, *x = nullptr;
  BlasDescriptor dm;
  const T one(1), zero(0);
  // Buffers first, agreed; the algorithm agrees its own errors.
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
  // local_b_ := M⁻¹ (X Pᵀ, moved from x)
  Backend backend(*this);
  T* w_lower = static_cast<T*>(local_b_);
  JAXMG_RETURN_IF_ERROR(
      algorithms::LuInverse<T>(backend, Square(n, lr), static_cast<const T*>(work_), piv, w_lower,
                               static_cast<T*>(w_upper), static_cast<T*>(x), w_lower));
  if (!transpose) return Status();
  // M⁻ᵀ: the transpose (not the adjoint) of M⁻¹, into x (free again).
  const vendor::BlasMpGeadd<T> transpose_op{
      ctx_.blas, CUBLAS_OP_T,
      n,         n,
      one,       {static_cast<const T*>(local_b_), 1, 1, dm.get()},
      zero,      {static_cast<T*>(x), 1, 1, dm.get()}};
  vendor::Work work;
  size_t dev = 0, host = 0;
  local.Run([&] { return vendor::Size(transpose_op, &dev, &host); });
  local.Run([&] { return Workspace(dev, host, &work); });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv", local));
  Deferred failed;
  failed.Keep(vendor::Run(transpose_op, work));

  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv", failed));
  local_b_ = x;  // (desc_b_ describes it)
  return Status();
}

#define JAXMG_INSTANTIATE_INVERSES(T)           \
  template Status Engine::CholeskyInverse<T>(); \
  template Status Engine::InverseSolve<T>(bool transpose);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_INVERSES)
#undef JAXMG_INSTANTIATE_INVERSES

}  // namespace jaxmg::cusolvermp
