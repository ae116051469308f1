// The GPU engine's two-stage eigensolver (algorithms/band_eigh.h over the GPU backend) on 1 x P
// and P x 1 grids: which calls take it, its shape and tuning, and its two entry points
// (eigenvalues alone; with eigenvectors into a new matrix).
#include "algorithms/band_eigh.h"

#include <algorithm>
#include <complex>
#include <cstdint>
#include <type_traits>

#include "common/scalar.h"
#include "cuda/band.h"
#include "cuda/kernels.h"
#include "engines/cusolvermp/backend.h"
#include "engines/cusolvermp/engine.h"
#include "engines/cusolvermp/engine_util.h"

namespace jaxmg::cusolvermp {

template <typename T>
int64_t Engine::EigBand(int64_t t, int64_t n, bool vectors) const {
  // config.eig_band: the widest band tried (algorithms/band_reduce.h BandWidth), up to the
  // chase's widest (cuda::MaxChaseBand: 128, 64 for complex128). 0, the default, by measurement
  // on one H200 (random matrices; bench/results/eigsweep_b_l_random_h200x1_54f15a8.json): 128
  // with eigenvectors for float64 and complex64 from n = 16384, where Q₂ and the band reduction
  // gain more than the wider chase loses; otherwise 64 (float32, and eigenvalues alone, where
  // the chase weighs most).
  const bool wide = vectors && n >= 16384 &&
                    (std::is_same_v<T, double> || std::is_same_v<T, std::complex<float>>);
  const int64_t widest = config_.eig_band > 0 ? config_.eig_band : wide ? 128 : 64;
  return algorithms::BandWidth(t, widest, cuda::MaxChaseBand(KernelType<T>()));
}

// Which eigensolver: config.gpu_eigvals (eigenvalues alone) or config.gpu_eigh (with vectors)
// set to "cusolvermp" or "two-stage" decides; "auto", one GPU takes the two stages and grids of
// several take cuSOLVERMp's Syevd, until the two stages' runs on several GPUs (their
// collectives, and the P x 1 transposes) have been measured there.
bool Engine::UseTwoStage(Choice choice, int64_t t) const {
  const bool wanted =
      choice == Choice::kOwn || (choice == Choice::kAuto && ctx_.nprow * ctx_.npcol == 1);
  return wanted && (ctx_.nprow == 1 || ctx_.npcol == 1) && EigBand<double>(t, 0, false) > 0;
}

bool Engine::UseBandEigenvalues(int64_t t) const { return UseTwoStage(config_.gpu_eigvals, t); }

bool Engine::UseBandEigh() const { return UseTwoStage(config_.gpu_eigh, state_.plan.tile); }

template <typename T>
Status Engine::BandEigenvalues(const BandSource& src, void* w) {
  StepTimer timer("BandEigenvalues", stream_);
  Backend backend(*this);
  JAXMG_RETURN_IF_ERROR(algorithms::TwoStageValues<T>(
      backend, DistributionOf(src.n, src.n, src.lr), EigBand<T>(src.t, src.n, false),
      static_cast<T*>(src.a), static_cast<RealOf<T>*>(w)));
  if (DebugParts()) PrintParts("BandEigenvalues");
  // No solver status: AgreeValues reads small_[0] as one (non-finite eigenvalues still count).
  JAXMG_RETURN_IF_ERROR(Small());
  JAXMG_CUDA(cudaMemsetAsync(small_, 0, sizeof(int32_t), stream_));
  return Status();
}

template <typename T>
Status Engine::BandEigh(const Matrix<T>& a, EigenRange subset, void* w, Matrix<T>* z_out) {
  StepTimer timer("BandEigh", stream_);
  using R = RealOf<T>;
  const int64_t n = a.cols, t = a.tile, lr = a.local_rows, b = EigBand<T>(t, n, true);
  // 1 x P: the columns are distributed; P x 1 (s.by_rows()): the rows.
  const algorithms::Distribution s = DistributionOf(n, n, lr);
  const size_t es = sizeof(T);
  algorithms::EighTuning tune;
  // ℓ: sweeps per Q₂ block (config.eig_q2_group, 0: min(b, 64); at most 128 and ℓ² elements in
  // 160 KB, the factor kernel's shared memory). At N = 32768 on one H200 ℓ = 64 beat ℓ = 128
  // at b = 64 and at b = 128 (the same sweep): their blocks hold more zeros than their larger
  // products gain.
  const int64_t group = config_.eig_q2_group;
  int64_t ell = std::clamp<int64_t>(group > 0 ? group : std::min<int64_t>(b, 64), 1, 128);
  while (ell > 1 && static_cast<int64_t>(es) * ell * ell > (int64_t{160} << 10)) ell /= 2;
  tune.ell = ell;
  // Q₂'s waves: by default three cuBLAS products, W as Wᴴ = Zᴴ V (EighTuning's default; Z's
  // columns the long side, faster than W = Vᴴ Z on one H200). config.eig_q2 = fused applies
  // each block in one pass over Z on the tensor cores (cuda::WaveApply, where it applies:
  // float64, ℓ a multiple of 8 up to 64): correct, but slower as it stands
  // (bench/results/eigsweep_q2_fused_random_h200x1_0968828.json).
  tune.fused_q2 = config_.eig_q2 == Choice::kOwn && cuda::WaveApplies(KernelType<T>(), b, ell);
  // config.eig_q1_width: the panels joined in Q₁ (a multiple of b dividing t; 0: t).
  tune.q1_width = config_.eig_q1_width > 0 ? config_.eig_q1_width : t;
  tune.wave_bytes = tune.fused_q2 ? 0 : int64_t{1} << 30;  // W: the products' scratch
  // *z_out: Stedc's real vectors, until the eigenvectors are written there at the end.
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(NewLike<T>(a, z_out)));
  void* out = z_out->data;
  Backend backend(*this);
  T* z = nullptr;
  int64_t ldz = 0, held = 0;
  algorithms::EigenPairs pairs;
  if (!subset.all()) pairs = {subset.lo, subset.hi - subset.lo};
  JAXMG_RETURN_IF_ERROR(algorithms::TwoStageVectors<T>(backend, s, b, tune, a.data,
                                                       static_cast<R*>(w), static_cast<R*>(out), &z,
                                                       &ldz, pairs, &held));
  if (DebugParts()) PrintParts("BandEigh");
  const cuda::Dtype dt = KernelType<T>();
  if (s.by_rows()) {
    // Zᴴ's rows of this rank are its columns of Z: VectorsOut needs no exchange.
    // (A subset's: its first `held` rows; the rest are never read.)
    JAXMG_CUDA(cuda::Adjoint(dt, z, ldz, n, held, out, std::max<int64_t>(lr, 1), stream_));
    z_out->adjoint = true;
  } else if (held > 0) {
    JAXMG_CUDA(cudaMemcpy2DAsync(out, es * lr, z, es * ldz, es * n, held, cudaMemcpyDeviceToDevice,
                                 stream_));
  }
  return Status();
}

#define JAXMG_INSTANTIATE_BAND_EIGH(T)                                                \
  template Status Engine::BandEigenvalues<T>(const BandSource& src, void* w);         \
  template Status Engine::BandEigh<T>(const Matrix<T>& a, EigenRange subset, void* w, \
                                      Matrix<T>* z_out);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_BAND_EIGH)
#undef JAXMG_INSTANTIATE_BAND_EIGH

}  // namespace jaxmg::cusolvermp
