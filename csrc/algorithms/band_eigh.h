// The two-stage Hermitian eigensolver, written once over a backend, on 1 x P and P x 1 grids
// (algorithms/distribution.h, its cyclic() axis): its stages in order.
//   1. BandReduce (band_reduce.h): the matrix to a band of width b, over the grid.
//   2. The bulge chase (band_chase.h) on rank 0: the band to a tridiagonal matrix T.
//   3. The tridiagonal solve: eigenvalues alone on rank 0 (TridiagonalValues), or with
//      eigenvectors on the grid (the backend's collective Stedc: cuSOLVERMp's, or ScaLAPACK's
//      p?stedc), then Z = diag(phase) Q in Z's padded layout. For the eigenpairs lo..hi-1 alone
//      (a subset): where the backend solves for k pairs of a tridiagonal matrix
//      (kTridiagonalPairs: the CPU's LAPACK ?stemr, MRRR), every rank computes those k columns
//      of Q itself, O(n k) work and no collective; elsewhere Stedc computes all n and the k
//      columns are gathered on every rank (a broadcast by each owner of a run of them). Each
//      rank keeps its share of the first k columns.
//   4. Z := Q₂ Z (band_chase.h BackChase) on each rank's columns of Z (of the k, for a subset).
//   5. Z := Q₁ Z (band_reduce.h BandBackReduce), likewise.
// On a P x 1 grid each rank works on the columns of Z whose indices are its rows: Stedc's Q
// (distributed by rows) is transposed on the grid once.
//
// Failures: the buffers are agreed before the first collective; then a local error is kept
// (every rank still enters each collective) and agreed at the end. The test hook's steps:
// "band_eigvals:<rank>:0" (the values' chase and solve), "band_eigh:<rank>:<k>" for k = 0 the
// chase, 1 the tridiagonal solve, 2 and 3 the two back-transformations.
//
// The backend B, beyond band_reduce.h's and band_chase.h's steps:
//   TridiagonalValues(lane, const T* band, n, b, double* scratch, R* w)   eigenvalues
//                                          (ascending) of the chased band's tridiagonal matrix;
//                                          scratch: 2n + 4 doubles
//   Stedc(n, t, R* d, R* e, R* q, ldq)     Q := T_real's eigenvectors (distributed as the matrix,
//                                          tiles of t), d := its eigenvalues; collective
//   kTridiagonalPairs                      (a constant) whether the backend has:
//   TridiagonalPairs(n, const R* d, const R* e, lo, k, R* w, R* qk)   w := T_real's eigenvalues
//                                          lo..lo+k-1, qk (n x k) := their eigenvectors; local
//   GridAdjoint(n, t, ldq, const R* q, R* y)   y := qᵀ on the grid; collective
//   PhaseRows(lane, const R* q, ldq, const T* phase, rows, cols, T* z, ldz)   z := diag(p) q
//   Copy(dst, ldd, src, lds, m, n), Adjoint(lane, ...)   (lu_1d.h's and qr_1d.h's)
//   Stage(name)                            a timer for the stage (an object alive for it)
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "algorithms/band_chase.h"
#include "algorithms/band_reduce.h"
#include "common/deferred.h"
#include "common/scalar.h"
#include "common/status.h"

namespace jaxmg::algorithms {

// The vectors' tuning (the engine's choices): ℓ, sweeps per Q₂ block (0: b); whether Q₂'s waves
// take the backend's fused WaveApply where it applies (band_chase.h ChaseShape); the panels
// joined in Q₁ (a multiple of b dividing t; otherwise t); the bytes of one wave's W.
struct EighTuning {
  int64_t ell = 0;
  bool fused_q2 = false;
  int64_t q1_width = 0;
  int64_t wave_bytes = int64_t{1} << 30;
};

// w (n reals, every rank) := the eigenvalues of the n x n Hermitian matrix a (this rank's part
// in s, on a 1 x P or P x 1 grid; overwritten), through a band of width b (dividing the tile).
template <typename T, class B>
Status TwoStageValues(B& bk, const Distribution& s, int64_t b, T* a, RealOf<T>* w) {
  const int64_t n = s.rows;
  const CyclicAxis& axis = s.cyclic();
  Banded<T> banded;
  JAXMG_RETURN_IF_ERROR(BandReduce<T>(bk, s, b, a, &banded));
  typename B::Lane lane;
  double* scratch = nullptr;
  int* sync = nullptr;
  Deferred local;
  local.Run([&] { return bk.MainLane(&lane); });
  local.Run([&] { return bk.Buffer(2 * n + 4, &scratch); });
  local.Run([&] { return bk.Buffer(n + 1, &sync); });
  JAXMG_RETURN_IF_ERROR(bk.Agree("buffers", local.status()));
  // Rank 0's local error is kept past the broadcast and agreed after it.
  Deferred failed;
  failed.Step("band_eigvals", s.rank, 0);
  if (axis.coord == 0) {
    failed.Run([&]() -> Status {
      {
        auto timer = bk.Stage("BandToTridiagonal");
        JAXMG_RETURN_IF_ERROR(bk.ChaseBand(lane, banded.band, n, b, sync, static_cast<T*>(nullptr),
                                           static_cast<T*>(nullptr)));
      }
      auto timer = bk.Stage("TridiagonalEigenvalues");
      return bk.TridiagonalValues(lane, banded.band, n, b, scratch, w);
    });
  }
  if (axis.procs > 1)
    JAXMG_RETURN_IF_ERROR(bk.Broadcast(w, n, static_cast<int64_t*>(nullptr), 0, 0));
  return bk.Agree("band_eigvals", failed.status());
}

// The eigenpairs lo <= i < lo + count of the ascending order (count 0: every pair).
struct EigenPairs {
  int64_t lo = 0, count = 0;
};

// z := this rank's share of diag(phase) qk, qk the n x k eigenvectors whole on every rank: its
// tiles of t of the k columns, in order (local column j is global column axis.Global(j)).
template <typename T, typename R, class B>
void KeepShare(B& bk, const typename B::Lane& lane, const CyclicAxis& axis, int64_t n, int64_t t,
               int64_t k, int64_t held, const R* qk, const T* phase, T* z, int64_t ldz,
               Deferred* failed) {
  for (int64_t j = 0; j < held; j += t) {
    const int64_t j0 = axis.Global(LocalIndex{j}).value, count = std::min(t, k - j0);
    failed->Run(
        [&] { return bk.PhaseRows(lane, qk + j0 * n, n, phase, n, count, z + j * ldz, ldz); });
  }
}

// w and Z (this rank's columns of the eigenvectors, leading dimension *ldz, in the backend's
// buffers) of the Hermitian matrix a (this rank's part, overwritten: it keeps Q₁'s reflectors).
// q: the caller's memory for the tridiagonal matrix's real eigenvectors, distributed as the
// matrix (leading dimension max(lr, 1)). With pairs.count = k > 0, only the pairs lo..lo+k-1:
// their eigenvalues in w's first k entries, and Z's columns those of the first k columns in the
// matrix's distribution (this rank's share, *held_out; tiles of t, cyclic over the ranks).
template <typename T, class B>
Status TwoStageVectors(B& bk, const Distribution& s, int64_t b, const EighTuning& tune, T* a,
                       RealOf<T>* w, RealOf<T>* q, T** z_out, int64_t* ldz_out,
                       EigenPairs pairs = {}, int64_t* held_out = nullptr) {
  using R = RealOf<T>;
  const bool subset = pairs.count > 0;
  const CyclicAxis& axis = s.cyclic();
  const int me = axis.coord;
  // The columns of Z this rank holds, dealt as the matrix's: of the n, or of the subset's k.
  const int64_t n = s.rows, t = s.tile(), held = axis.Extent(subset ? pairs.count : n);
  const int64_t ld = std::max<int64_t>(s.local_rows(), 1);
  Banded<T> banded;
  JAXMG_RETURN_IF_ERROR(BandReduce<T>(bk, s, b, a, &banded));
  const int64_t ell = tune.ell > 0 ? tune.ell : b;
  const ChaseShape c =
      ChaseShapeOf(n, b, ell, held, static_cast<int64_t>(sizeof(T)), tune.wave_bytes,
                   tune.fused_q2 && bk.template WaveApplies<T>(b, ell));
  const int64_t cols = c.cols;

  // Buffers (agreed).
  typename B::Lane lane;
  ChaseWork<T> cw;
  BackReduceWork<T> rw;
  T* z = nullptr;
  R *y = nullptr, *qk = nullptr;
  Deferred local;
  local.Run([&] { return bk.MainLane(&lane); });
  JAXMG_RETURN_IF_ERROR(ChaseBuffers(bk, c, &cw, &local));
  for (auto [p, count] : {std::pair<T**, int64_t>{&z, c.ldz * cols},
                          {&rw.vw, n * t},
                          {&rw.f, t * t},
                          {&rw.qs, t * t},
                          {&rw.vt, s.by_rows() ? n * b : 0},
                          {&rw.products.w, t * cols},
                          {&rw.products.w2, t * cols}}) {
    if (count > 0) local.Run([&] { return bk.Buffer(count, p); });
  }
  // (Stedc's q on a P x 1 grid is transposed through y; the k pairs alone need neither)
  const bool stedc = !subset || !B::kTridiagonalPairs;
  if (subset) local.Run([&] { return bk.Buffer(n * pairs.count, &qk); });
  if (s.by_rows() && stedc) local.Run([&] { return bk.Buffer(ld * n, &y); });
  rw.products.s = rw.qs;
  JAXMG_RETURN_IF_ERROR(bk.Agree("buffers", local.status()));

  Deferred failed;
  {
    auto timer = bk.Stage("BandToTridiagonal (vectors)");
    JAXMG_RETURN_IF_ERROR(ChaseWithReflectors<T>(bk, lane, s, c, banded.band, cw, &failed));
  }
  if constexpr (B::kTridiagonalPairs) {
    if (subset) {
      // The k pairs alone, on every rank, then this rank's share of z = diag(p) qk.
      auto timer = bk.Stage("TridiagonalPairs");
      failed.Keep(bk.Zero(lane, z, c.ldz * cols));
      failed.Step("band_eigh", s.rank, 1);
      failed.Run([&] { return bk.TridiagonalPairs(n, cw.d, cw.e, pairs.lo, pairs.count, w, qk); });
      KeepShare(bk, lane, axis, n, t, pairs.count, held, qk, cw.phase, z, c.ldz, &failed);
    }
  }
  if (stedc) {
    // The tridiagonal matrix's eigenvectors (real) into q, then z = diag(p) q in z's padded
    // layout.
    auto timer = bk.Stage("Stedc");
    failed.Keep(bk.Zero(lane, z, c.ldz * cols));
    failed.Step("band_eigh", s.rank, 1);
    failed.Keep(bk.Stedc(n, t, cw.d, cw.e, q, ld));
    int64_t ldq = ld;
    if (s.by_rows()) {
      // q holds Z's rows: y := Zᵀ on the grid, whose local rows are Z's columns (transposed).
      JAXMG_RETURN_IF_ERROR(bk.GridAdjoint(n, t, ld, q, y));
      failed.Run([&] { return bk.Adjoint(lane, y, ld, s.held(), n, q, n); });
      ldq = n;
    }
    if (!subset) {
      failed.Run([&] { return bk.PhaseRows(lane, q, ldq, cw.phase, n, held, z, c.ldz); });
      failed.Run([&] { return bk.Copy(w, n, cw.d, n, n, int64_t{1}); });
    } else {
      // Q's columns lo..lo+k-1 into qk on every rank: each run of them within one tile from its
      // owner (ldq = n: a run is contiguous).
      const int64_t lo = pairs.lo, k = pairs.count;
      for (int64_t col = lo; col < lo + k;) {
        const int64_t run = std::min(t - col % t, lo + k - col);
        const int owner = axis.Owner(GlobalIndex{col});
        R* to = qk + (col - lo) * n;
        if (me == owner) {
          const int64_t from = axis.Local(GlobalIndex{col}).value;
          failed.Run([&] { return bk.Copy(to, n, q + from * ldq, ldq, n, run); });
        }
        if (axis.procs > 1) {
          JAXMG_RETURN_IF_ERROR(
              bk.Broadcast(to, n * run, static_cast<int64_t*>(nullptr), 0, owner));
        }
        col += run;
      }
      KeepShare(bk, lane, axis, n, t, k, held, qk, cw.phase, z, c.ldz, &failed);
      failed.Run([&] { return bk.Copy(w, k, cw.d + lo, k, k, int64_t{1}); });
    }
  }
  {
    auto timer = bk.Stage("Q2 (chase reflectors)");
    JAXMG_RETURN_IF_ERROR(BackChase<T>(bk, lane, s.rank, c, cw, z, held, &failed));
  }
  {
    auto timer = bk.Stage("Q1 (band reduction)");
    int64_t gw = tune.q1_width > 0 ? tune.q1_width : t;
    if (gw < b || t % gw != 0 || gw % b != 0) gw = t;
    JAXMG_RETURN_IF_ERROR(
        BandBackReduce<T>(bk, lane, s, b, a, banded.taus, gw, z, held, c.ldz, rw, &failed));
  }
  JAXMG_RETURN_IF_ERROR(bk.Agree("band_eigh", failed.status()));
  *z_out = z;
  *ldz_out = c.ldz;
  if (held_out != nullptr) *held_out = held;
  return Status();
}

}  // namespace jaxmg::algorithms
