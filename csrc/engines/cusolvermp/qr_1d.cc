// The own 1-D QR (1 x P grids) with look-ahead, and its Q formed in place: algorithms/qr_1d.h
// over this engine's backend (cusolverDn panels, cuBLAS, NCCL broadcasts, the reflector kernels,
// the side stream for the look-ahead).
#include "algorithms/qr_1d.h"

#include <algorithm>
#include <cstdint>

#include "common/scalar.h"
#include "engines/cusolvermp/backend.h"
#include "engines/cusolvermp/engine.h"
#include "engines/cusolvermp/engine_util.h"

namespace jaxmg::cusolvermp {

int64_t Engine::QrPanelBlock(int64_t t) {
  // The width of the blocks a panel is factored in: 256 (measured on H200s: cusolverDn's geqrf's
  // time per column did not fall with the width from 128 to 1024, and it answered INVALID_VALUE
  // for a 32768 x 2048 panel).
  return std::min<int64_t>(256, t);
}

bool Engine::UseOwnQr() const {
  // The 1-D QR needs every engine row on every process: a 1 x P grid (config.gpu_qr =
  // cusolvermp: cuSOLVERMp's Geqrf and Orgqr everywhere).
  return config_.gpu_qr != Choice::kLibrary && ctx_.nprow == 1;
}

algorithms::Distribution Engine::QrDistribution() const {
  const layout::Plan& plan = state_.plan;
  return DistributionOf(plan.engine_rows(), plan.cols.extent, local_rows_);
}

// The factors stay as geqrf leaves them, τ and the T_k in tau->own for Orgqr1D. About
// 2 m n² − 2n³/3 flops, all but the panels' in gemm and trmm (a trsm with S in each update
// instead: slower on H200s, see bench/results/qr_own_h200x2_*.json).
template <typename T>
Status Engine::Qr1D(const Matrix<T>& a, Reflectors* tau) {
  Backend backend(*this);
  algorithms::Qr1DFactors<T> f;
  const Status s =
      algorithms::Qr1D(backend, QrDistribution(), QrPanelBlock(state_.plan.tile), a.data, &f);
  tau->own = algorithms::Qr1DKept::Of(f);
  if (DebugParts()) PrintParts("Qr1D");
  return s;
}

template <typename T>
Status Engine::Orgqr1D(const Matrix<T>& a, const Reflectors& tau) {
  Backend backend(*this);
  const Status s = algorithms::Orgqr1D(backend, QrDistribution(), a.data, tau.own.As<T>());
  if (DebugParts()) PrintParts("Orgqr1D");
  return s;
}

template <typename T>
Status Engine::ReflectorFactorOf(const Lane& lane, const void* v, int64_t rows, int64_t cols,
                                 const void* tau, void* f, void* s) {
  Backend backend(*this);
  return algorithms::ReflectorFactor(backend, lane, static_cast<const T*>(v), rows, cols,
                                     static_cast<const T*>(tau), static_cast<T*>(f),
                                     state_.plan.tile, static_cast<T*>(s));
}

template <typename T>
Status Engine::ApplyReflectors(const Lane& lane, const void* v, int64_t rows, int64_t k,
                               const void* f, int64_t ldf, bool adjoint, void* c, int64_t cols,
                               int64_t ldc, const QrWork& work) {
  Backend backend(*this);
  const algorithms::ReflectorWork<T> w{static_cast<T*>(work.w), static_cast<T*>(work.w2),
                                       static_cast<T*>(work.s)};
  return algorithms::ApplyReflectors(backend, lane, static_cast<const T*>(v), rows, k,
                                     static_cast<const T*>(f), ldf, adjoint, static_cast<T*>(c),
                                     cols, ldc, w);
}

#define JAXMG_INSTANTIATE_QR_1D(T)                                                               \
  template Status Engine::Qr1D<T>(const Matrix<T>& a, Reflectors* tau);                          \
  template Status Engine::ReflectorFactorOf<T>(const Lane& lane, const void* v, int64_t rows,    \
                                               int64_t cols, const void* tau, void* f, void* s); \
  template Status Engine::ApplyReflectors<T>(                                                    \
      const Lane& lane, const void* v, int64_t rows, int64_t k, const void* f, int64_t ldf,      \
      bool adjoint, void* c, int64_t cols, int64_t ldc, const QrWork& work);                     \
  template Status Engine::Orgqr1D<T>(const Matrix<T>& a, const Reflectors& tau);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_QR_1D)
#undef JAXMG_INSTANTIATE_QR_1D

}  // namespace jaxmg::cusolvermp
