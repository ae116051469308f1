// The CPU engine's two-stage eigensolver on 1 x P and P x 1 grids: jaxmg's own
// (algorithms/band_eigh.h over the CPU backend): the band reduction over the processes, the
// bulge chase on process 0, the tridiagonal solve (?sterf on process 0 for eigenvalues alone,
// p?stedc on the grid with vectors) and both back-transformations over the processes.
#include "algorithms/band_eigh.h"

#include <algorithm>
#include <memory>

#include "common/scalar.h"
#include "engines/scalapack/backend.h"
#include "engines/scalapack/engine.h"
#include "engines/scalapack/engine_util.h"

namespace jaxmg::scalapack {

bool Engine::UseTwoStage(bool vectors, bool subset) const {
  // The two stages need every row (1 x P) or every column (P x 1) on each process and a band
  // that divides the tile. config.cpu_eigh = two-stage or = scalapack chooses; "auto", the measured
  // one (bench/cpu_own.py --routine eigh|eigvalsh; bench/results/cpu_own_eig*_71444db.json):
  // eigenvalues alone by the two stages (they beat p?syevd on 1 x 2 and 1 x 4), with
  // eigenvectors p?syevd (the two stages lose on 1 x 2 and 2 x 1); a subset's eigenvectors by
  // the two stages, Q₂ and Q₁ on its k columns (as fast as p?syevr on 1 x 2 and 2 x 1,
  // bench/results/cpu_syevd_subset_2proc_*.json; the GPU engine's algorithm, which the CPU tests
  // then exercise).
  const Choice c = config_.cpu_eigh;
  const bool wanted = c == Choice::kOwn || (c == Choice::kAuto && (!vectors || subset));
  const bool one_dimensional = grid_->nprow == 1 || grid_->npcol == 1;
  return wanted && one_dimensional && EigBand(plan_->tile) > 0;
}

int64_t Engine::EigBand(int64_t t) const {
  // config.eig_band, 0: 64 (the band the CPU engine's two stages were measured at).
  return algorithms::BandWidth(t, config_.eig_band > 0 ? config_.eig_band : 64, 128);
}

template <typename T>
Status Engine::TwoStageEigh(const Matrix<T>& a, bool vectors, EigenRange subset, RealOf<T>* w,
                            const Matrix<T>& zm, int* info) {
  using R = RealOf<T>;
  const int64_t n = a.rows, t = a.tile;
  // 1 x P: the columns are distributed; P x 1 (s.by_rows()): the rows.
  const algorithms::Distribution s = DistributionOf(n, n, a.local_rows);
  const int64_t b = EigBand(t);
  Backend bk(*grid_);  // its buffers live for this step: the results are copied out below
  // A subset's pairs come first: of the values, those kept; with vectors, only their columns.
  algorithms::EigenPairs pairs;
  if (!subset.all()) pairs = {subset.lo, subset.hi - subset.lo};
  if (!vectors) {
    JAXMG_RETURN_IF_ERROR(algorithms::TwoStageValues<T>(bk, s, b, a.data, w));
    if (pairs.count > 0) std::copy(w + pairs.lo, w + pairs.lo + pairs.count, w);
  } else {
    // Q₂'s blocks of b sweeps, and one wave's W within 64 MiB.
    algorithms::EighTuning tune;
    tune.ell = b;
    tune.wave_bytes = int64_t{64} << 20;
    // config.eig_q2 = fused: each wave block through the backend's WaveApply (the GPU's
    // tensor-core path, here over BLAS) rather than the batched products.
    tune.fused_q2 = config_.eig_q2 == Choice::kOwn;
    T* z = nullptr;
    int64_t ldz = 0, held = 0;
    // Stedc's real vectors in zm (distributed as the matrix), until the eigenvectors.
    JAXMG_RETURN_IF_ERROR(algorithms::TwoStageVectors<T>(
        bk, s, b, tune, a.data, w, reinterpret_cast<R*>(zm.data), &z, &ldz, pairs, &held));
    // The eigenvectors in the engine's layout (zm, distributed as the matrix): this rank's
    // columns of Z (1 x P), or on a P x 1 grid Z's rows: the rows of Zᴴ this rank holds are its
    // columns of Z, and one distributed transpose gives Z.
    T* out = zm.data;
    // (A subset's k columns are this rank's first `held` columns of the first k.)
    if (!s.by_rows()) {
      JAXMG_RETURN_IF_ERROR(bk.Copy(out, n, z, ldz, n, held));
    } else {
      T* m = a.data;  // (the reduced matrix: no longer needed) := this rank's rows of Zᴴ
      JAXMG_RETURN_IF_ERROR(bk.Adjoint(Backend::Lane{}, z, ldz, n, held, m, a.local_rows));
      JAXMG_RETURN_IF_ERROR(scalapack::Adjoint<T>(n, m, *a.desc, out, *zm.desc));
    }
  }
  // The tridiagonal solve's status (?sterf's on process 0; p?stedc's), agreed.
  *info = static_cast<int>(std::min<int64_t>(bk.solver_info(), INT32_MAX));
  return AllreduceMax(*grid_, info);
}

#define JAXMG_INSTANTIATE_TWO_STAGE(T)                                                         \
  template Status Engine::TwoStageEigh<T>(const Matrix<T>& a, bool vectors, EigenRange subset, \
                                          RealOf<T>* w, const Matrix<T>& zm, int* info);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_TWO_STAGE)
#undef JAXMG_INSTANTIATE_TWO_STAGE

}  // namespace jaxmg::scalapack
