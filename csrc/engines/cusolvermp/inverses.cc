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

algorithms::Distribution Engine::DistributionOf(int64_t rows, int64_t cols, int64_t ld) const {
  return algorithms::Distribution::Of(rows, cols, state_.plan.tile, ctx_.nprow, ctx_.myrow,
                                      ctx_.npcol, ctx_.mycol, ld, ctx_.rank);
}

// B = L Lᴴ: B⁻¹ = Wᴴ W with W = L⁻¹.
template <typename T>
Status Engine::CholeskyInverse(const Matrix<T>& l, Matrix<T>* inverse) {
  // B⁻¹ = L⁻ᴴ L⁻¹ by blocks (algorithms/inverses.h): N³ flops against 7N³/3 for the solve with
  // the identity.
  StepTimer timer("CholeskyInverse", stream_);
  if (l.factored != Factorization::kCholesky) {
    return JAXMG_ERROR("CholeskyInverse: the matrix handed holds no Cholesky factor");
  }
  // B⁻¹ into a buffer of its own (l may be the shard, which ShardOut writes).
  Matrix<T> w;
  void* y = nullptr;
  const size_t bytes = sizeof(T) * std::max<int64_t>(l.local_rows * l.local_cols, 1);
  Deferred local;
  local.Run([&] { return Identity<T>(l, &w); });  // W := I, distributed like B
  local.Run([&] { return Scratch(bytes, &y); });
  local.Run([&] { return CudaCheck(cudaMemsetAsync(y, 0, bytes, stream_), "cudaMemsetAsync"); });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv_cholesky", local));
  Backend backend(*this);
  JAXMG_RETURN_IF_ERROR(algorithms::CholeskyInverse<T>(
      backend, DistributionOf(l.rows, l.cols, l.local_rows), l.data, w.data, static_cast<T*>(y)));
  *inverse = w;
  inverse->data = static_cast<T*>(y);  // (W's descriptor describes it: the same distribution)
  return Status();
}

// M⁻¹ = U⁻¹ L⁻¹ Pᵀ from the two triangular inverses, their product by blocks and a column
// permutation (about 4N³/3 flops), and for M⁻ᵀ one distributed transpose (Geadd).
template <typename T>
Status Engine::InverseSolve(const Matrix<T>& lu, const Pivots& pivots, bool transpose,
                            Matrix<T>* inverse) {
  // M = P L U: M⁻¹ = U⁻¹ L⁻¹ Pᵀ by blocks (algorithms/inverses.h LuInverse), 4N³/3 flops
  // against 2N³ for two triangular solves with the N columns of the identity.
  StepTimer timer("InverseSolve", stream_);
  JAXMG_RETURN_IF_ERROR(CheckLu(lu.factored, "InverseSolve"));
  if (lu.factored == Factorization::kLuHostPivots && OneDevice()) {
    // One device: M⁻¹ (op = T: M⁻ᵀ) = cusolverDn's getrs with the identity, as jnp.linalg.inv
    // solves (2N³ flops, against 4N³/3 for the blocks below; measured faster on one H200:
    // bench/one_device.py).
    JAXMG_RETURN_IF_ERROR(Identity<T>(lu, inverse));
    return LocalGetrs<T>(lu, pivots.global, *inverse, transpose);
  }
  const int64_t n = lu.rows, t = lu.tile, lr = lu.local_rows, lc = lu.local_cols;
  const int64_t ld = lu.ld;
  std::vector<int64_t> piv;
  JAXMG_RETURN_IF_ERROR(GlobalPivots(lu, pivots, &piv));
  const size_t bytes = sizeof(T) * std::max<int64_t>(lr * lc, 1);
  Matrix<T> w_lower;
  void *w_upper = nullptr, *x = nullptr;
  BlasDescriptor dm;
  const T one(1), zero(0);
  // Buffers first, agreed; the algorithm agrees its own errors.
  Deferred local;
  local.Run([&] { return Identity<T>(lu, &w_lower); });  // W_L := I
  local.Run([&] { return Scratch(bytes, &w_upper); });
  local.Run([&] { return Scratch(bytes, &x); });
  local.Run([&] { return dm.Create(ctx_, DataTypeOf<T>(), n, n, t, t, ld); });
  local.Run([&]() -> Status {
    JAXMG_CUDA(cudaMemcpyAsync(w_upper, w_lower.data, sizeof(T) * lr * lc, cudaMemcpyDeviceToDevice,
                               stream_));
    JAXMG_CUDA(cudaMemsetAsync(x, 0, sizeof(T) * lr * lc, stream_));
    return Status();
  });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv", local));
  // W_L := M⁻¹ (X Pᵀ, moved from x)
  Backend backend(*this);
  JAXMG_RETURN_IF_ERROR(algorithms::LuInverse<T>(backend, DistributionOf(n, n, lr), lu.data, piv,
                                                 w_lower.data, static_cast<T*>(w_upper),
                                                 static_cast<T*>(x), w_lower.data));
  *inverse = w_lower;
  if (!transpose) return Status();
  // M⁻ᵀ: the transpose (not the adjoint) of M⁻¹, into x (free again).
  const vendor::BlasMpGeadd<T> transpose_op{ctx_.blas, CUBLAS_OP_T,
                                            n,         n,
                                            one,       {w_lower.data, 1, 1, dm.get()},
                                            zero,      {static_cast<T*>(x), 1, 1, dm.get()}};
  vendor::Work work;
  size_t dev = 0, host = 0;
  local.Run([&] { return vendor::Size(transpose_op, &dev, &host); });
  local.Run([&] { return Workspace(dev, host, &work); });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv", local));
  Deferred failed;
  failed.Keep(vendor::Run(transpose_op, work));

  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv", failed));
  inverse->data = static_cast<T*>(x);  // (W_L's descriptor describes it)
  return Status();
}

#define JAXMG_INSTANTIATE_INVERSES(T)                                                 \
  template Status Engine::CholeskyInverse<T>(const Matrix<T>& l, Matrix<T>* inverse); \
  template Status Engine::InverseSolve<T>(const Matrix<T>& lu, const Pivots& pivots,  \
                                          bool transpose, Matrix<T>* inverse);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_INVERSES)
#undef JAXMG_INSTANTIATE_INVERSES

}  // namespace jaxmg::cusolvermp
