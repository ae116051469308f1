// The two-stage eigensolver's second stage and its back-transformation, written once over a
// backend (the GPU engine's: its chase and wave kernels, cuBLAS and NCCL; the CPU engine's: host
// loops, BLAS and MPI), on 1 x P and P x 1 grids.
//
// ChaseBand: the band (band storage, algorithms/band_reduce.h) := a tridiagonal matrix unitarily
// similar to it, on rank 0, by Householder bulge chasing: sweep s annihilates column s below the
// subdiagonal and chases the bulge it makes down the band (Lang's one-column sweeps in the task
// order of LAPACK's ?sytrd_sb2st). Reflector (s, j) of sweep s at block row j acts on rows
// s + 1 + (j − 1) b .. s + j b (clipped at n − 1); the chase keeps it as the
// (ChaseOffset(n, b, j) + s)-th of v2 (b entries, v₀ = 1, zero past its length) and τ₂, with
// H = I − τ v vᴴ and the band = Q₂ T Q₂ᴴ for Q₂ the product of the reflectors in the chase's
// order. T's real form (d, e >= 0) and the phases p with T = diag(p) T_real diag(p)ᴴ then go
// with the reflectors to every rank.
//
// BackChase: Z := Q₂ Z on this rank's columns of Z, in waves of compact WY blocks. Group g holds
// sweeps g ℓ .. g ℓ + ℓ − 1; its block at block row j, H(g ℓ, j) ⋯ H(g ℓ + ℓ − 1, j) = I − V T Vᴴ,
// acts on rows g ℓ + 1 + (j − 1) b .. + b + ℓ − 1. Q₂ = G₀ G₁ ⋯ with G_g = B(g, J) ⋯ B(g, 1), so
// Q₂ Z applies the groups from the last, each from block row 1 down; wave w = (j − 1) +
// 2 (G − 1 − g) holds blocks that share no row, and the waves in order respect every overlap.
// Each wave is strided batched products: S = VᴴV, T from S and τ, then Z −= (V T)(Vᴴ Z); or,
// fused, the backend's WaveApply: Z −= V (T (Vᴴ Z)) in one pass over Z per block, skipping the
// zeros of V's parallelogram (the GPU's tensor-core kernel for float64). Z holds b + ℓ − 1 rows
// of zero padding below its n, so that every block of a wave has one shape.
//
// The backend B, for the scalar T (R its real type), on a lane:
//   ChaseBand(lane, T* band, n, b, int* sync, T* v2, T* tau2)   the chase (v2 null: values only);
//                                          sync: n + 1 ints of scratch
//   TridiagonalOf(lane, const T* band, n, b, R* d, R* e, T* phase)
//   WaveBlocks(lane, const T* v2, const T* tau2, n, b, ell, g0, j0, count, ldv, T* vb, T* taub)
//                                          the wave's blocks g0 + i at block rows j0 + 2i:
//                                          V (ldv x ℓ each, zero past row b + ℓ − 1) and τ (ℓ
//                                          each)
//   WaveApplies<T>(b, ell), WaveApply(lane, vb, ldv, t, b, ell, count, T* z, ldz, stride, cols,
//             T* w, w_count)            Z_i −= V_i (T_i (V_iᴴ Z_i)) for the wave's blocks, Z_i
//                                          at z + i stride; w: scratch (2 ℓ x chunk)
//   WaveFactors(lane, const T* s, const T* taub, ell, count, T* t)   T_i from S_i = V_iᴴ V_i
//   GemmStrided(lane, adjoint_a, adjoint_b, m, n, k, alpha, a, lda, stride_a, b, ldb,
//               stride_b, beta, c, ldc, stride_c, count)   count products, each C_i := α op(A_i)
//                                          op(B_i) + β C_i
//   Zero(lane, T* p, count), Broadcast(a, na, b, nb, root)   (band_reduce.h's)
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "algorithms/band_reduce.h"
#include "common/deferred.h"
#include "common/scalar.h"
#include "common/status.h"

namespace jaxmg::algorithms {

// Where the chase keeps reflector (s, j): block row j's sweeps after those of the rows above it,
// each n − 1 − (i − 1) b sweeps long (n − 2 for the first). (The GPU's chase kernel computes the
// same in cuda/band_device.cuh.)
inline int64_t ChaseOffset(int64_t n, int64_t b, int64_t j) {
  if (j <= 1) return 0;
  const int64_t m = j - 2;
  return (n - 2) + m * (n - 1) - b * m * (m + 1) / 2;
}
// The number of sweeps with a block row j (1-based) and the chase's reflectors in all.
inline int64_t ChaseSweeps(int64_t n, int64_t b, int64_t j) {
  return std::max<int64_t>(0, std::min(n - 2, n - 1 - (j - 1) * b));
}
inline int64_t ChaseReflectors(int64_t n, int64_t b) {
  return n <= 2 ? 0 : ChaseOffset(n, b, (n - 2) / b + 2);
}

// One wave of Q₂'s blocks: the first group, its block row and the number of blocks.
struct ChaseWave {
  int64_t g0 = -1, j0 = 0, count = 0;
};

// Q₂'s shape for an n x n band of width b in groups of ℓ sweeps, on a rank holding `held`
// columns of Z, with products within `wave_bytes` bytes of scratch for W. `fused`: the backend's
// WaveApply (V's blocks ldv = h rounded up to 8 rows; W two ℓ x chunk halves, one block at a
// time).
struct ChaseShape {
  int64_t n = 0, b = 0, ell = 1, h = 0, ldv = 0, ldz = 0, kept = 0, chunk = 1, batch_max = 1;
  int64_t cols = 1;  // Z's columns allocated (at least one)
  bool fused = false;
  std::vector<ChaseWave> waves;
  int64_t w_count() const { return fused ? 2 * ell * chunk : batch_max * ell * chunk; }
};

inline ChaseShape ChaseShapeOf(int64_t n, int64_t b, int64_t ell, int64_t held, int64_t es,
                               int64_t wave_bytes, bool fused) {
  ChaseShape c;
  c.n = n, c.b = b, c.ell = std::max<int64_t>(ell, 1), c.fused = fused;
  c.h = b + c.ell - 1, c.ldz = n + c.h, c.kept = ChaseReflectors(n, b);
  c.ldv = fused ? (c.h + 7) / 8 * 8 : c.h;
  const int64_t groups = n > 2 ? (n - 2 + c.ell - 1) / c.ell : 0;
  const int64_t rows_j = n > 2 ? (n - 2) / b + 1 : 0;
  for (int64_t wave = 0; groups > 0 && wave < (rows_j - 1) + 2 * (groups - 1) + 1; ++wave) {
    ChaseWave v;
    for (int64_t g = std::max<int64_t>(0, groups - 1 - wave / 2 - 1); g < groups; ++g) {
      const int64_t j = wave + 1 - 2 * (groups - 1 - g);
      if (j < 1) continue;
      if (j > rows_j || g * c.ell >= ChaseSweeps(n, b, j)) break;
      if (v.g0 < 0) v.g0 = g, v.j0 = j;
      ++v.count;
    }
    if (v.count == 0) continue;
    c.waves.push_back(v);
    c.batch_max = std::max(c.batch_max, v.count);
  }
  c.cols = std::max<int64_t>(held, 1);
  c.chunk = std::clamp<int64_t>(wave_bytes / (es * (fused ? 2 : c.batch_max) * c.ell), 1, c.cols);
  return c;
}

// The chase's and Q₂'s buffers: the reflectors (v2: kept x b, τ₂: kept), the tridiagonal matrix
// (d, e) and its phases, sync (n + 1 ints), and a wave's blocks: V (batch_max of ldv x ℓ) and
// V T (batch_max of h x ℓ; none when fused), τ (batch_max x ℓ), S and T (batch_max of ℓ x ℓ),
// W (ChaseShape::w_count).
template <typename T>
struct ChaseWork {
  T *v2 = nullptr, *tau2 = nullptr, *phase = nullptr;
  RealOf<T>*d = nullptr, *e = nullptr;
  int* sync = nullptr;
  T *vb = nullptr, *taub = nullptr, *sb = nullptr, *tb = nullptr, *vtb = nullptr, *wb = nullptr;
};

template <typename T, class B>
Status ChaseBuffers(B& bk, const ChaseShape& c, ChaseWork<T>* w, Deferred* local) {
  using R = RealOf<T>;
  const int64_t n = c.n, b = c.b, ell = c.ell, h = c.h, kept = std::max<int64_t>(c.kept, 1);
  const int64_t bm = c.batch_max;
  for (auto [p, count] : {std::pair<T**, int64_t>{&w->v2, kept * b},
                          {&w->tau2, kept},
                          {&w->phase, n},
                          {&w->vb, bm * c.ldv * ell},
                          {&w->taub, bm * ell},
                          {&w->sb, bm * ell * ell},
                          {&w->tb, bm * ell * ell},
                          {&w->vtb, c.fused ? 1 : bm * h * ell},
                          {&w->wb, c.w_count()}}) {
    local->Run([&] { return bk.Buffer(count, p); });
  }
  for (R** p : {&w->d, &w->e}) local->Run([&] { return bk.Buffer(n, p); });
  local->Run([&] { return bk.Buffer(n + 1, &w->sync); });
  return Status();
}

// Stage two: the chase on rank 0 keeping its reflectors, which every rank then receives with
// the tridiagonal matrix. Local errors are kept in *failed; after one on rank 0, d and e are a
// well-formed zero matrix for the collective tridiagonal solve.
template <typename T, class B>
Status ChaseWithReflectors(B& bk, const typename B::Lane& lane, const Distribution& s,
                           const ChaseShape& c, T* band, const ChaseWork<T>& w, Deferred* failed) {
  const int64_t n = c.n, b = c.b;
  failed->Step("band_eigh", s.rank, 0);
  if (s.cyclic().coord == 0) {
    failed->Run([&]() -> Status {
      JAXMG_RETURN_IF_ERROR(bk.ChaseBand(lane, band, n, b, w.sync, w.v2, w.tau2));
      return bk.TridiagonalOf(lane, band, n, b, w.d, w.e, w.phase);
    });
    if (!failed->ok()) {
      failed->Keep(bk.Zero(lane, w.d, n));
      failed->Keep(bk.Zero(lane, w.e, n));
    }
  }
  if (s.cyclic().procs > 1) {
    JAXMG_RETURN_IF_ERROR(bk.Broadcast(w.phase, n, w.d, n, 0));
    JAXMG_RETURN_IF_ERROR(bk.Broadcast(w.tau2, c.kept, w.e, n, 0));
    JAXMG_RETURN_IF_ERROR(bk.Broadcast(w.v2, c.kept * b, w.tau2, 0, 0));
  }
  return Status();
}

// Z := Q₂ Z for this rank's held columns of Z (leading dimension c.ldz; rank: this process in
// the test hook). Local errors are kept in *failed (no collective: every rank works on its own
// columns).
template <typename T, class B>
Status BackChase(B& bk, const typename B::Lane& lane, int rank, const ChaseShape& c,
                 const ChaseWork<T>& w, T* z, int64_t held, Deferred* failed) {
  const int64_t n = c.n, b = c.b, ell = c.ell, h = c.h, ldv = c.ldv, ldz = c.ldz;
  failed->Step("band_eigh", rank, 2);
  failed->Run([&]() -> Status {
    for (const ChaseWave& v : c.waves) {
      const int64_t count = v.count;
      JAXMG_RETURN_IF_ERROR(
          bk.WaveBlocks(lane, w.v2, w.tau2, n, b, ell, v.g0, v.j0, count, ldv, w.vb, w.taub));
      JAXMG_RETURN_IF_ERROR(bk.GemmStrided(lane, true, false, ell, ell, h, T(1), w.vb, ldv,
                                           ldv * ell, w.vb, ldv, ldv * ell, T(0), w.sb, ell,
                                           ell * ell, count));
      JAXMG_RETURN_IF_ERROR(bk.WaveFactors(lane, w.sb, w.taub, ell, count, w.tb));
      const int64_t row0 = v.g0 * ell + 1 + (v.j0 - 1) * b, stride = ell + 2 * b;
      if (c.fused) {
        JAXMG_RETURN_IF_ERROR(bk.WaveApply(lane, w.vb, ldv, w.tb, b, ell, count, z + row0, ldz,
                                           stride, held, w.wb, c.w_count()));
        continue;
      }
      JAXMG_RETURN_IF_ERROR(bk.GemmStrided(lane, false, false, h, ell, ell, T(1), w.vb, ldv,
                                           ldv * ell, w.tb, ell, ell * ell, T(0), w.vtb, h, h * ell,
                                           count));
      for (int64_t c0 = 0; c0 < held; c0 += c.chunk) {
        const int64_t cw = std::min(c.chunk, held - c0);
        T* zc = z + (row0 + c0 * ldz);
        // Wᴴ = Zᴴ V (columns x ℓ: Z's columns the long side, measured faster than W = Vᴴ Z),
        // then Z −= (V T) (Wᴴ)ᴴ.
        JAXMG_RETURN_IF_ERROR(bk.GemmStrided(lane, true, false, cw, ell, h, T(1), zc, ldz, stride,
                                             w.vb, ldv, ldv * ell, T(0), w.wb, cw, ell * cw,
                                             count));
        JAXMG_RETURN_IF_ERROR(bk.GemmStrided(lane, false, true, h, cw, ell, T(-1), w.vtb, h,
                                             h * ell, w.wb, cw, ell * cw, T(1), zc, ldz, stride,
                                             count));
      }
    }
    return Status();
  });
  return Status();
}

}  // namespace jaxmg::algorithms
