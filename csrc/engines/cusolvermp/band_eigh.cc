// The two-stage eigensolver with vectors on 1 x P and P x 1 grids: the band reduction
// (band_reduce.cc), then its stages over one set of buffers (EighWork): the bulge chase
// (band_chase.cc), the tridiagonal solve (band_tridiagonal.cc) and the two back-transformations
// (band_back_chase.cc, band_back_reduce.cc).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "common/deferred.h"
#include "common/scalar.h"
#include "cuda/band.h"
#include "cuda/kernels.h"
#include "engines/cusolvermp/engine.h"
#include "engines/cusolvermp/engine_util.h"
#include "engines/cusolvermp/local_blas.h"

namespace jaxmg::cusolvermp {

// Eigenvalues and eigenvectors on a 1 x P or P x 1 grid: stage one (BandReduce), the chase on
// rank 0
// keeping its reflectors, which every rank then receives with the tridiagonal matrix; Stedc
// (cuSOLVERMp) gives its eigenvalues and eigenvectors Z on the grid; then Z := Q₂ Z on each
// rank's columns in waves of compact WY blocks (cuda/band.h WaveBlocks) with strided batched
// gemm, and Z := Q₁ Z panel by panel from the last (each owner rebuilds its panel's V and T and
// broadcasts them, as Orgqr1D does). Z is held with b + ℓ − 1 rows of zero padding below, so
// that every block of a wave has one shape. On a P x 1 grid each rank works on the columns of Z
// whose indices are its rows: Stedc's Z (by rows) is transposed on the grid once (Geadd), and
// the result's adjoint, by rows, is what VectorsOut writes back.
template <typename T>
Status Engine::BandEigh(void* w) {
  StepTimer timer("BandEigh", stream_);
  using R = RealOf<T>;
  const layout::Plan& plan = state_.plan;
  const bool by_rows = ctx_.npcol == 1 && ctx_.nprow > 1;  // P x 1: rows are distributed
  const int procs = by_rows ? ctx_.nprow : ctx_.npcol, me = by_rows ? ctx_.myrow : ctx_.mycol;
  const int64_t n = plan.cols.extent, t = plan.tile, lr = local_rows_, b = EigBand(t);
  const int64_t held = layout::CyclicLocalExtent(n, t, me, procs);  // local columns (rows)
  const size_t es = sizeof(T);
  const cuda::Dtype dt = KernelType<T>();
  // ℓ: sweeps per wave block (JAXMG_EIG_Q2_GROUP, default b; at most 128 and ℓ² elements in
  // 160 KB, the factor kernel's shared memory). At N = 32768 on one H200, ℓ = 128 (b = 64) took
  // 9.2 s against 8.3 s for ℓ = 64: its blocks hold more zeros than their larger products gain.
  const char* group_env = std::getenv("JAXMG_EIG_Q2_GROUP");
  int64_t ell = group_env != nullptr ? std::atoll(group_env) : b;
  ell = std::clamp<int64_t>(ell, 1, 128);
  while (ell > 1 && static_cast<int64_t>(es) * ell * ell > (int64_t{160} << 10)) ell /= 2;
  const int64_t h = b + ell - 1, ldz = n + h;
  const int64_t groups = n > 2 ? (n - 2 + ell - 1) / ell : 0;
  const int64_t rows_j = n > 2 ? (n - 2) / b + 1 : 0;
  const int64_t kept = cuda::ChaseReflectors(n, b);
  void *band = nullptr, *taus = nullptr;
  JAXMG_RETURN_IF_ERROR(BandReduce<T>(EngineMatrix(), b, &band, &taus));

  // Buffers (agreed), then the chase on rank 0.
  // The waves of Q₂'s blocks (cuda/band.h WaveBlocks): the first group, its block row and the
  // number of blocks of each.
  using Wave = EighWave;
  std::vector<Wave> waves;
  int64_t batch_max = 1;
  for (int64_t wave = 0; groups > 0 && wave < (rows_j - 1) + 2 * (groups - 1) + 1; ++wave) {
    Wave v{-1, 0, 0};
    for (int64_t g = std::max<int64_t>(0, groups - 1 - wave / 2 - 1); g < groups; ++g) {
      const int64_t j = wave + 1 - 2 * (groups - 1 - g);
      if (j < 1) continue;
      if (j > rows_j || g * ell >= cuda::ChaseSweeps(n, b, j)) break;
      if (v.g0 < 0) v.g0 = g, v.j0 = j;
      ++v.count;
    }
    if (v.count == 0) continue;
    waves.push_back(v);
    batch_max = std::max(batch_max, v.count);
  }
  // Columns of Z per product: W (ℓ x columns per block) within 1 GiB.
  const int64_t cols_held = std::max<int64_t>(held, 1);
  const int64_t chunk = std::clamp<int64_t>(
      (int64_t{1} << 30) / static_cast<int64_t>(es * batch_max * ell), 1, cols_held);
  void *v2 = nullptr, *tau2 = nullptr, *sync = nullptr, *d = nullptr, *e = nullptr;
  void *phase = nullptr, *z = nullptr, *q = nullptr, *vb = nullptr, *taub = nullptr;
  void *sb = nullptr, *tb = nullptr, *vtb = nullptr, *wb = nullptr, *vw = nullptr, *f = nullptr;
  void *qw1 = nullptr, *qw2 = nullptr, *qs = nullptr, *y = nullptr, *vt = nullptr;
  Lane main;
  Status local = MainLane(&main);
  for (auto [p, bytes] : {std::pair<void**, size_t>{&v2, es * std::max<int64_t>(kept, 1) * b},
                          {&tau2, es * std::max<int64_t>(kept, 1)},
                          {&sync, sizeof(int) * (n + 1)},
                          {&d, sizeof(R) * n},
                          {&e, sizeof(R) * n},
                          {&phase, es * n},
                          {&z, es * ldz * cols_held},
                          {&vb, es * batch_max * h * ell},
                          {&taub, es * batch_max * ell},
                          {&sb, es * batch_max * ell * ell},
                          {&tb, es * batch_max * ell * ell},
                          {&vtb, es * batch_max * h * ell},
                          {&wb, es * batch_max * ell * chunk},
                          {&vw, es * n * t},
                          {&f, es * t * t},
                          {&qw1, es * t * cols_held},
                          {&qw2, es * t * cols_held},
                          {&qs, es * t * t},
                          {&y, by_rows ? sizeof(R) * std::max<int64_t>(lr * local_cols_, 1) : 0},
                          {&vt, by_rows ? es * n * b : 0},
                          {&local_b_, es * std::max<int64_t>(lr * local_cols_, 1)}}) {
    if (local.ok()) local = Scratch(bytes, p);
  }
  q = local_b_;  // Stedc's real vectors, until the eigenvectors are written there at the end
  if (local.ok()) {
    local = desc_b_.Create(ctx_, DataTypeOf<T>(), n, n, t, t, std::max<int64_t>(lr, 1));
  }
  Descriptor desc_q;
  if (local.ok()) {
    local = desc_q.Create(ctx_, DataTypeOf<R>(), n, n, t, t, std::max<int64_t>(lr, 1));
  }
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(local));
  // From here a local error is kept (every rank still enters each collective) and agreed at the
  // end. The test hook's steps: 0 the chase, 1 the tridiagonal solve, 2 and 3 the two
  // back-transformations.
  Deferred failed;
  const EighWork ew{n,         t,     lr, b,       held,  ell,  h,    ldz,  kept, chunk,
                    cols_held, procs, me, by_rows, waves, main, band, taus, v2,   tau2,
                    sync,      d,     e,  phase,   z,     q,    vb,   taub, sb,   tb,
                    vtb,       wb,    vw, f,       qw1,   qw2,  qs,   y,    vt,   &desc_q};
  JAXMG_RETURN_IF_ERROR(EighChase<T>(ew, &failed));
  JAXMG_RETURN_IF_ERROR(EighTridiagonal<T>(ew, w, &failed));
  JAXMG_RETURN_IF_ERROR(EighBackChase<T>(ew, &failed));
  JAXMG_RETURN_IF_ERROR(EighBackReduce<T>(ew, &failed));
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("band_eigh", failed));
  if (by_rows) {
    // Zᴴ's rows of this rank are its columns of Z: VectorsOut needs no exchange.
    JAXMG_CUDA(cuda::Adjoint(dt, z, ldz, n, held, local_b_, std::max<int64_t>(lr, 1), stream_));
    vectors_adjointed_ = true;
  } else if (held > 0) {
    JAXMG_CUDA(cudaMemcpy2DAsync(local_b_, es * lr, z, es * ldz, es * n, held,
                                 cudaMemcpyDeviceToDevice, stream_));
  }
  return Status();
}

#define JAXMG_INSTANTIATE_BAND_EIGH(T) template Status Engine::BandEigh<T>(void* w);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_BAND_EIGH)
#undef JAXMG_INSTANTIATE_BAND_EIGH

}  // namespace jaxmg::cusolvermp
