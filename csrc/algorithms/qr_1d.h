// The 1-D QR with look-ahead and its Q formed in place, written once over a backend (the GPU
// engine's: cusolverDn panels, cuBLAS, NCCL and the reflector kernels, with a side stream for the
// look-ahead; the CPU engine's: LAPACK, BLAS, MPI and host loops, one lane).
//
// On a 1 x P grid every row is local and the columns are block-cyclic in tiles of t. Blocked
// Householder QR in the compact WY form Q_k = I − V T Vᴴ of each tile column k: its owner factors
// the panel (rows k t .. m; geqrf in blocks of ib columns, the panel's columns right of each block
// updated as the trailing matrix is, so that the unblocked part is ib wide), builds V (unit lower
// trapezoidal) and T = S⁻¹ for S = striu(VᴴV) + diag(1/τ) (Joffrain et al.'s UT transform; one
// small trsm), and broadcasts V and T; every rank applies Q_kᴴ to its columns right of the panel
// (W = Vᴴ C, W' = Tᴴ W by trmm, C −= V W'). About 2 m n² − 2n³/3 flops, all but the panels' in
// gemm and trmm spread over the P ranks.
//
// Look-ahead: the owner of panel k + 1 updates that tile first, then factors it on the side lane
// while it updates the rest of its columns, so that the panels (latency-bound) may overlap the
// updates. A backend with one lane runs the same order.
//
// The matrix is left as geqrf leaves it (R on and above the diagonal, the vectors below), with τ
// and every T_k in the Qr1DFactors that Orgqr1D takes. Orgqr1D forms Q (the leading n columns, in
// place) by backward accumulation, tile column k from the last: its owner rebuilds V_k from its
// columns and broadcasts it; every rank applies Q_k to its columns right of tile k (already Q's);
// the owner then writes tile k's own columns, Q_k [0; I; 0] = [0; I; 0] − [0; V X] with
// X = T (V's leading block)ᴴ.
//
// Failures: the buffers are agreed before the first broadcast. A local error inside a loop stops
// this rank's computing but not its part of the broadcasts, and every rank returns the same error
// at the agreement after the loop. The test hook's steps are the tile columns ("qr:<rank>:<k>")
// and, for Q, the tile columns from the last ("orgqr:<rank>:<s>").
//
// The backend B, for the scalar T (every call returns a Status; Broadcast and Agree are
// collective, the others local; a Lane is where local work is queued, in order):
//   Buffer(count, T** out)                 zeroed scratch for the call's lifetime
//   MainLane(Lane*), SideLane(Lane*)       the call's lane and the look-ahead's
//   Join(const Lane& from, const Lane& to, int event)  `to` waits for the work queued on `from`
//   PrepareGeqrf<T>(m, n, T* a, lda, T* tau)  whatever geqrf of at most m x n needs
//   Geqrf(lane, m, n, T* a, lda, T* tau)   local Householder QR
//   Gemm(lane, adjoint_a, adjoint_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
//   Trmm(lane, adjoint, m, n, const T* f, ldf, const T* w, ldw, T* out, ldo)
//                                          out := op(F) W, F m x m upper triangular
//   TrsmUpper(lane, m, n, const T* s, lds, T* b, ldb)  b := S⁻¹ b, S upper triangular
//   ReflectorBlock(lane, const T* a, lda, rows, cols, const T* tau, T* v, ldv)
//                                          v := the unit lower trapezoid of a (zero columns
//                                          where τ = 0)
//   ReflectorDiagonal(lane, T* s, ld, k, const T* tau)  s := striu(s) + diag(1/τ) (1 where
//                                          τ = 0), zero below
//   IdentityBlock(lane, T* a, ld, rows, cols, row0)  a := columns row0 .. of the identity
//   Adjoint(lane, const T* src, lds, rows, cols, T* dst, ldd)  dst := srcᴴ
//   Broadcast(T* a, na, U* b, nb, root)    from grid column root (both, grouped)
//   Agree(const char* algorithm, const Status& local)
#pragma once

#include <algorithm>
#include <cstdint>

#include "algorithms/distribution.h"
#include "common/deferred.h"
#include "common/status.h"

namespace jaxmg::algorithms {

// The scratch of the reflector products: w and w2 (a tile's rows x the columns updated), s
// (tile x tile, S before its inversion).
template <typename T>
struct ReflectorWork {
  T *w = nullptr, *w2 = nullptr, *s = nullptr;
};

// What Qr1D leaves for Orgqr1D: τ (n), every T_k (tile x tile, leading dimension t), the
// broadcast vectors (two buffers of m x t) and the update scratch.
template <typename T>
struct Qr1DFactors {
  T *tau = nullptr, *f = nullptr, *v = nullptr;
  ReflectorWork<T> work;
};

// The same, untyped, as an engine keeps it between its steps (empty: no 1-D QR was run).
struct Qr1DKept {
  void *tau = nullptr, *f = nullptr, *v = nullptr, *w = nullptr, *w2 = nullptr, *s = nullptr;
  bool empty() const { return f == nullptr; }
  template <typename T>
  static Qr1DKept Of(const Qr1DFactors<T>& k) {
    return {k.tau, k.f, k.v, k.work.w, k.work.w2, k.work.s};
  }
  template <typename T>
  Qr1DFactors<T> As() const {
    return {static_cast<T*>(tau),
            static_cast<T*>(f),
            static_cast<T*>(v),
            {static_cast<T*>(w), static_cast<T*>(w2), static_cast<T*>(s)}};
  }
};

// f (leading dimension ldf) := T of the compact WY form Q = I − V T Vᴴ of the rows x cols
// vectors v (leading dimension rows) and their τ: T = S⁻¹ for S = striu(VᴴV) + diag(1/τ) (built
// in s, ldf x ldf).
template <typename T, class B>
Status ReflectorFactor(B& b, const typename B::Lane& lane, const T* v, int64_t rows, int64_t cols,
                       const T* tau, T* f, int64_t ldf, T* s) {
  JAXMG_RETURN_IF_ERROR(
      b.Gemm(lane, true, false, cols, cols, rows, T(1), v, rows, v, rows, T(0), s, ldf));
  JAXMG_RETURN_IF_ERROR(b.ReflectorDiagonal(lane, s, ldf, cols, tau));
  JAXMG_RETURN_IF_ERROR(b.IdentityBlock(lane, f, ldf, cols, cols, 0));
  return b.TrsmUpper(lane, cols, cols, s, ldf, f, ldf);
}

// c (rows x cols, leading dimension ldc) := op(Q) c for Q = I − V F Vᴴ (adjoint: I − V Fᴴ Vᴴ),
// V rows x k (leading dimension rows), F k x k upper triangular (leading dimension ldf): two gemm
// and a trmm.
template <typename T, class B>
Status ApplyReflectors(B& b, const typename B::Lane& lane, const T* v, int64_t rows, int64_t k,
                       const T* f, int64_t ldf, bool adjoint, T* c, int64_t cols, int64_t ldc,
                       const ReflectorWork<T>& work) {
  if (cols <= 0 || rows <= 0 || k <= 0) return Status();
  JAXMG_RETURN_IF_ERROR(
      b.Gemm(lane, true, false, k, cols, rows, T(1), v, rows, c, ldc, T(0), work.w, k));
  JAXMG_RETURN_IF_ERROR(b.Trmm(lane, adjoint, k, cols, f, ldf, work.w, k, work.w2, k));
  return b.Gemm(lane, false, false, rows, cols, k, T(-1), v, rows, work.w2, k, T(1), c, ldc);
}

// A = Q R in place (a: this rank's columns of the m x n matrix q, on a 1 x P grid: every row,
// leading dimension q.ld >= m), panels factored in blocks of ib columns; *out := τ, the T_k and
// the scratch Orgqr1D reuses. Errors are agreed (every rank returns the same Status).
template <typename T, class B>
Status Qr1D(B& b, const Distribution& q, int64_t ib, T* a, Qr1DFactors<T>* out) {
  const int64_t m = q.rows, n = q.cols, t = q.tile(), ld = q.ld, held = q.local_cols();
  const int64_t tiles = q.col_tiles();
  const CyclicAxis& columns = q.col_axis;
  const int me = columns.coord;
  // Tile k's first local column on its owner, and this rank's first local column right of it.
  auto local_of = [&](int64_t k) { return columns.Local(GlobalIndex{k * t}).value; };
  auto right_of = [&](int64_t k) { return columns.LocalFrom(GlobalIndex{(k + 1) * t}).value; };
  typename B::Lane main, side;
  Qr1DFactors<T> f;
  ReflectorWork<T> side_work;
  Deferred local;
  local.Run([&] { return b.MainLane(&main); });
  local.Run([&] { return b.SideLane(&side); });
  local.Run([&] { return b.Buffer(n, &f.tau); });
  local.Run([&] { return b.Buffer(2 * m * t, &f.v); });  // V_k and V_k+1
  local.Run([&] { return b.Buffer(tiles * t * t, &f.f); });
  for (T** p : {&f.work.w, &f.work.w2}) {
    local.Run([&] { return b.Buffer(t * std::max(held, t), p); });
  }
  for (T** p : {&side_work.w, &side_work.w2}) {
    local.Run([&] { return b.Buffer(ib * t, p); });
  }
  for (T** p : {&f.work.s, &side_work.s}) {
    local.Run([&] { return b.Buffer(t * t, p); });
  }
  local.Run([&] { return b.PrepareGeqrf(m, ib, a, ld, f.tau); });
  JAXMG_RETURN_IF_ERROR(b.Agree("qr", local.status()));
  auto v_of = [&](int64_t k) { return f.v + (k % 2) * m * t; };
  auto f_of = [&](int64_t k) { return f.f + k * t * t; };
  // The owner's part of panel k: geqrf in blocks of ib columns, then V and T.
  auto panel = [&](const typename B::Lane& lane, int64_t k, const ReflectorWork<T>& w) -> Status {
    const int64_t row0 = k * t, rows = m - row0, cols = std::min(t, n - row0);
    T* column = a + row0 + local_of(k) * ld;
    T *tau = f.tau + row0, *v = v_of(k), *fk = f_of(k);
    for (int64_t j = 0; j < cols; j += ib) {
      const int64_t jb = std::min(ib, cols - j);
      T* block = column + j + j * ld;
      JAXMG_RETURN_IF_ERROR(b.Geqrf(lane, rows - j, jb, block, ld, tau + j));
      if (j + jb == cols) break;
      JAXMG_RETURN_IF_ERROR(b.ReflectorBlock(lane, block, ld, rows - j, jb, tau + j, v, rows - j));
      JAXMG_RETURN_IF_ERROR(ReflectorFactor(b, lane, v, rows - j, jb, tau + j, fk, t, w.s));
      JAXMG_RETURN_IF_ERROR(ApplyReflectors(b, lane, static_cast<const T*>(v), rows - j, jb,
                                            static_cast<const T*>(fk), t, /*adjoint=*/true,
                                            block + jb * ld, cols - j - jb, ld, w));
    }
    JAXMG_RETURN_IF_ERROR(b.ReflectorBlock(lane, column, ld, rows, cols, tau, v, rows));
    return ReflectorFactor(b, lane, static_cast<const T*>(v), rows, cols,
                           static_cast<const T*>(tau), fk, t, w.s);
  };
  Deferred failed;
  if (columns.Owner(GlobalIndex{0}) == me) failed.Run([&] { return panel(main, 0, f.work); });
  for (int64_t k = 0; k < tiles; ++k) {
    const int64_t row0 = k * t, rows = m - row0, kb = std::min(t, n - row0);
    const int owner = columns.Owner(GlobalIndex{row0});
    failed.Step("qr", q.rank, k);
    if (columns.procs > 1) {
      JAXMG_RETURN_IF_ERROR(b.Broadcast(v_of(k), rows * kb, f_of(k), t * kb, owner));
    }
    if (!failed.ok()) continue;
    // This rank's factored columns right of tile k; the first of them is tile k + 1's where this
    // rank owns it.
    const int64_t first = right_of(k), cols = held - first;
    T* c = a + row0 + first * ld;
    auto update = [&](T* at, int64_t width) {
      return ApplyReflectors(b, main, static_cast<const T*>(v_of(k)), rows, kb,
                             static_cast<const T*>(f_of(k)), t, /*adjoint=*/true, at, width, ld,
                             f.work);
    };
    if (k + 1 < tiles && columns.Owner(GlobalIndex{(k + 1) * t}) == me) {
      const int64_t next = std::min(t, n - (k + 1) * t);
      failed.Run([&] { return update(c, next); });
      failed.Run([&] { return b.Join(main, side, 0); });
      // The rest of the update is queued before the panel (a backend's panel may block the host
      // until its lane is done).
      failed.Run([&] { return update(c + next * ld, cols - next); });
      failed.Run([&] { return panel(side, k + 1, side_work); });
      failed.Run([&] { return b.Join(side, main, 1); });
    } else {
      failed.Run([&] { return update(c, cols); });
    }
  }
  *out = f;
  return b.Agree("qr", failed.status());
}

// a (this rank's columns of the factors Qr1D left) := the leading n columns of Q. Errors are
// agreed.
template <typename T, class B>
Status Orgqr1D(B& b, const Distribution& q, T* a, const Qr1DFactors<T>& f) {
  const int64_t m = q.rows, n = q.cols, t = q.tile(), ld = q.ld, held = q.local_cols();
  const int64_t tiles = q.col_tiles();
  const CyclicAxis& columns = q.col_axis;
  const int me = columns.coord;
  typename B::Lane main;
  JAXMG_RETURN_IF_ERROR(b.Agree("orgqr", b.MainLane(&main)));
  T* v = f.v;
  const ReflectorWork<T>& work = f.work;
  // Tile k's own columns from row 0: [0; I; 0] − [0; V X], X = T (V's leading block)ᴴ.
  auto own_columns = [&](T* column, int64_t row0, int64_t rows, int64_t kb, const T* fk) -> Status {
    JAXMG_RETURN_IF_ERROR(b.Adjoint(main, static_cast<const T*>(v), rows, kb, kb, work.w, kb));
    JAXMG_RETURN_IF_ERROR(
        b.Trmm(main, false, kb, kb, fk, t, static_cast<const T*>(work.w), kb, work.w2, kb));
    JAXMG_RETURN_IF_ERROR(b.IdentityBlock(main, column, ld, m, kb, row0));
    return b.Gemm(main, false, false, rows, kb, kb, T(-1), static_cast<const T*>(v), rows,
                  static_cast<const T*>(work.w2), kb, T(1), column + row0, ld);
  };
  Deferred failed;
  for (int64_t k = tiles - 1; k >= 0; --k) {
    const int64_t row0 = k * t, rows = m - row0, kb = std::min(t, n - row0);
    const int owner = columns.Owner(GlobalIndex{row0});
    // (on its owner) the tile's columns from row 0
    T* column = a + (me == owner ? columns.Local(GlobalIndex{row0}).value : 0) * ld;
    const T* fk = f.f + k * t * t;
    failed.Step("orgqr", q.rank, tiles - 1 - k);
    if (me == owner) {
      failed.Run([&] {
        return b.ReflectorBlock(main, static_cast<const T*>(column + row0), ld, rows, kb,
                                static_cast<const T*>(f.tau + row0), v, rows);
      });
    }
    if (columns.procs > 1) {
      JAXMG_RETURN_IF_ERROR(b.Broadcast(v, rows * kb, static_cast<T*>(nullptr), 0, owner));
    }
    if (!failed.ok()) continue;
    const int64_t first = columns.LocalFrom(GlobalIndex{(k + 1) * t}).value, cols = held - first;
    failed.Run([&] {
      return ApplyReflectors(b, main, static_cast<const T*>(v), rows, kb, fk, t,
                             /*adjoint=*/false, a + row0 + first * ld, cols, ld, work);
    });
    if (me == owner) failed.Run([&] { return own_columns(column, row0, rows, kb, fk); });
  }
  return b.Agree("orgqr", failed.status());
}

}  // namespace jaxmg::algorithms
