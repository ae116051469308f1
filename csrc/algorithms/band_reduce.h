// The two-stage eigensolver's first stage and its back-transformation, written once over a
// backend (the GPU engine's: cusolverDn panels, cuBLAS, NCCL and its kernels; the CPU engine's:
// LAPACK, BLAS, MPI and host loops), on 1 x P and P x 1 grids.
//
// BandReduce: the Hermitian n x n matrix reduced to a band of width b (BLAS3; the one-stage
// tridiagonal reduction reads the whole trailing matrix for every column and is bound by memory
// bandwidth). For each panel of b columns from c0 (inside one tile, so on one process): QR of its
// rows below the band (r0 = c0 + b .. n), Q = I − V T Vᴴ; then A22 := Qᴴ A22 Q on the trailing
// matrix (rows and columns r0 .. n, both triangles kept) as A22 −= V Wᴴ + W Vᴴ with X = A22 V T,
// M = Tᴴ Vᴴ X, W = X − ½ V M. Every rank forms the rows of A22 V that match its own columns or
// rows ((A22 V)[C, :] = A22[:, C]ᴴ V = A22[C, :] V, A22 Hermitian) and one all-reduce joins them.
// The panel's columns then hold the band: the diagonal block and R. On a 1 x P grid every rank
// holds whole columns; on a P x 1 grid whole rows, and the panel (A's columns c0 .. c0 + b from
// row c0) is the adjoint of its owner's rows. The band (band storage: entry (i, j), j <= i <=
// j + b, at band[i − j + j (2b + 1)]) is summed onto rank 0; each panel's τ is kept by its owner,
// whose panel columns (rows, as their adjoint) keep V below R.
//
// BandBackReduce: Z := Q₁ Z for this rank's columns of Z, tile by tile from the last: a group of
// panels (one owner) joined into one compact WY block (V_p placed p b rows down, T of all their
// reflectors), so that the products are gw wide instead of b; its owner rebuilds V and T and
// broadcasts them, as Orgqr1D does.
//
// Failures: the buffers are agreed before the first broadcast; a local error stops this rank's
// computing but not its part of the collectives (the broadcasts and the all-reduce of each
// panel), and is agreed after the loop (BandReduce) or
// kept in the caller's Deferred (BandBackReduce). The test hook's steps are the panels
// ("band_reduce:<rank>:<panel>") and the back-transformation ("band_eigh:<rank>:3").
//
// The backend B, for the scalar T: qr_1d.h's local steps (Buffer, MainLane, PrepareGeqrf, Geqrf,
// Gemm, Trmm, TrsmUpper, ReflectorBlock, ReflectorDiagonal, IdentityBlock, Adjoint), its grouped
// Broadcast and Agree, and
//   TrmmRight(lane, m, n, const T* f, ldf, const T* x, ldx, T* out, ldo)   out := X F, F n x n
//                                          upper triangular
//   Zero(lane, T* p, count)
//   CyclicRows(lane, to_global, T* local, ldl, count, cols, first, t, procs, me, offset,
//              T* global, ldg, shift)      rows between a cyclic distribution and global order
//                                          (cuda/band.h CyclicRows)
//   BandFromColumns(lane, const T* a, lda, row0, c0, cols, n, b, T* band)
//                                          the lower band of `cols` columns from c0 into band
//                                          storage (global row i of column j at
//                                          a[i − row0 + (j − c0) lda])
//   AllreduceSum(T* x, count), ReduceToRoot(T* x, count)   sums over the grid (on every rank,
//                                          on rank 0), collective
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "algorithms/distribution.h"
#include "algorithms/qr_1d.h"
#include "common/deferred.h"
#include "common/status.h"
#include "layout/layout.h"

namespace jaxmg::algorithms {

// Elements of band storage for an n x n matrix of bandwidth b (b more rows a column than the band
// needs: the bulge chase's scratch).
inline int64_t BandElements(int64_t n, int64_t b) { return n * (2 * b + 1); }

// The band's width for tiles of t: the widest divisor of t up to `widest` and the backend's
// `limit` (the GPU's chase keeps a b x b block in shared memory), so that the panels stay inside
// tiles; 0 where the two stages do not apply (below 2).
inline int64_t BandWidth(int64_t t, int64_t widest, int64_t limit) {
  int64_t b = std::min<int64_t>(widest > 0 ? widest : limit, limit);
  while (b > 1 && t % b != 0) --b;
  return b >= 2 ? b : 0;
}

// The band (BandElements(n, b), whole on rank 0) and τ (n: each panel's on its owner).
template <typename T>
struct Banded {
  T *band = nullptr, *taus = nullptr;
};

// The reduction of the n x n matrix a to a band of width b (dividing the tile): a is this rank's
// part, on a 1 x P grid every row (lr = n) and its columns, on a P x 1 grid (s.by_rows()) its
// rows (lr of them) and every column, leading dimension lr. *out in the backend's buffers.
template <typename T, class B>
Status BandReduce(B& bk, const Distribution& s, int64_t b, T* a, Banded<T>* out) {
  const int64_t n = s.rows, t = s.tile(), lr = s.local_rows(), held = s.held();
  const CyclicAxis& axis = s.cyclic();  // the distributed columns (rows)
  const int procs = axis.procs, me = axis.coord;
  const bool by_rows = s.by_rows();
  // (on its owner) the local column (row) of global column (row) c
  auto local_of = [&](int64_t c) { return axis.Local(GlobalIndex{c}).value; };
  typename B::Lane main;
  T *vw = nullptr, *x = nullptr, *y = nullptr, *g = nullptr, *f = nullptr, *sc = nullptr;
  T *m1 = nullptr, *m2 = nullptr, *taus = nullptr, *band = nullptr, *panel_copy = nullptr;
  const int64_t rows_held = std::max<int64_t>(held, 1);
  Deferred local;
  local.Run([&] { return bk.MainLane(&main); });
  for (auto [p, count] : {std::pair<T**, int64_t>{&vw, n * 2 * b},
                          {&x, n * b},
                          {&y, rows_held * b},
                          {&g, rows_held * 2 * b},
                          {&f, t * t},
                          {&sc, t * t},
                          {&m1, b * b},
                          {&m2, b * b},
                          {&taus, n},  // τ = 0 (H = I) where none is made
                          {&band, BandElements(n, b)},
                          {&panel_copy, by_rows ? n * b : 0}}) {
    if (count > 0) local.Run([&] { return bk.Buffer(count, p); });
  }
  local.Run([&] { return bk.PrepareGeqrf(n, b, vw, n, taus); });
  JAXMG_RETURN_IF_ERROR(bk.Agree("buffers", local.status()));

  // The panel's columns c0 .. c0 + b on its owner, global row i at column[i − row0 + c ld].
  struct Panel {
    T* column;
    int64_t ld, row0;
  };
  auto panel_of = [&](int64_t c0) -> Panel {
    if (!by_rows) return Panel{a + lr * local_of(c0), lr, 0};
    return Panel{panel_copy, n - c0, c0};
  };
  // The panel's QR: V into vw's first k columns (ld rows), T into f (ld t).
  auto factor = [&](const Panel& pc, int64_t r0, int64_t rows, int64_t k) -> Status {
    T* below = pc.column + (r0 - pc.row0);
    T* tau = taus + (r0 - b);  // the panel's τ, kept for Q₁
    JAXMG_RETURN_IF_ERROR(bk.Geqrf(main, rows, b, below, pc.ld, tau));
    JAXMG_RETURN_IF_ERROR(bk.ReflectorBlock(main, below, pc.ld, rows, k, tau, vw, rows));
    return ReflectorFactor(bk, main, vw, rows, k, tau, f, t, sc);
  };
  // A22 := Qᴴ A22 Q on this rank's columns (rows) from local index lf, in two local parts around
  // the all-reduce of X = A22 V (which every rank enters, failed or not).
  const auto part_of = [&](int64_t r0, int64_t* lf, int64_t* count) -> T* {
    *lf = axis.LocalFrom(GlobalIndex{r0}).value;
    *count = held - *lf;
    // This rank's part of A22: columns lf .. from row r0 (1 x P), or rows lf .. from column r0.
    return by_rows ? a + (*lf + r0 * lr) : a + (r0 + *lf * lr);
  };
  auto rows_of_product = [&](int64_t r0, int64_t rows, int64_t k) -> Status {
    int64_t lf = 0, count = 0;
    const T* c = part_of(r0, &lf, &count);
    JAXMG_RETURN_IF_ERROR(bk.Zero(main, x, rows * k));
    if (count <= 0) return Status();
    JAXMG_RETURN_IF_ERROR(
        bk.Gemm(main, !by_rows, false, count, k, rows, T(1), c, lr, vw, rows, T(0), y, count));
    return bk.CyclicRows(main, true, y, count, count, k, lf, t, procs, me, r0, x, rows, 0);
  };
  auto update = [&](int64_t r0, int64_t rows, int64_t k) -> Status {
    int64_t lf = 0, count = 0;
    T* c = part_of(r0, &lf, &count);
    T* wk = vw + rows * k;  // W, after V in vw
    JAXMG_RETURN_IF_ERROR(bk.TrmmRight(main, rows, k, f, t, x, rows, wk, rows));  // X = A22 V T
    JAXMG_RETURN_IF_ERROR(
        bk.Gemm(main, true, false, k, k, rows, T(1), vw, rows, wk, rows, T(0), m1, k));
    JAXMG_RETURN_IF_ERROR(bk.Trmm(main, true, k, k, f, t, m1, k, m2, k));  // M = Tᴴ Vᴴ X
    JAXMG_RETURN_IF_ERROR(                                                 // W = X − ½ V M
        bk.Gemm(main, false, false, rows, k, k, T(-0.5), vw, rows, m2, k, T(1), wk, rows));
    if (count <= 0) return Status();
    // g := this rank's rows of [W V]; its columns −= [V W] gᴴ = V Wᴴ + W Vᴴ, or its rows
    // −= g [V W]ᴴ.
    JAXMG_RETURN_IF_ERROR(
        bk.CyclicRows(main, false, g, count, count, 2 * k, lf, t, procs, me, r0, vw, rows, k));
    if (by_rows) {
      return bk.Gemm(main, false, true, count, rows, 2 * k, T(-1), g, count, vw, rows, T(1), c, lr);
    }
    return bk.Gemm(main, false, true, rows, count, 2 * k, T(-1), vw, rows, g, count, T(1), c, lr);
  };
  for (int64_t c0 = 0; c0 < n; c0 += b) {
    const int owner = axis.Owner(GlobalIndex{c0});
    const int64_t r0 = c0 + b, rows = n - r0, k = std::min(rows, b), width = std::min(b, n - c0);
    const bool mine = owner == me;
    const Panel pc = panel_of(c0);
    local.Step("band_reduce", s.rank, c0 / b);
    if (mine && by_rows) {
      // The panel := the adjoint of this rank's rows c0 .. c0 + width from column c0.
      local.Run([&] {
        return bk.Adjoint(main, a + (local_of(c0) + c0 * lr), lr, width, n - c0, pc.column, pc.ld);
      });
    }
    if (rows >= 2) {
      if (mine) local.Run([&] { return factor(pc, r0, rows, k); });
      if (mine && by_rows) {
        // The factored rows below the band (V under R) back into this rank's rows c0 .. as their
        // adjoint (rows no later step reads), for the eigenvectors' back-transformation.
        local.Run([&] {
          return bk.Adjoint(main, pc.column + (r0 - pc.row0), pc.ld, rows, k,
                            a + (local_of(c0) + r0 * lr), lr);
        });
      }
      if (procs > 1) JAXMG_RETURN_IF_ERROR(bk.Broadcast(vw, rows * k, f, t * k, owner));
      local.Run([&] { return rows_of_product(r0, rows, k); });
      if (procs > 1) JAXMG_RETURN_IF_ERROR(bk.AllreduceSum(x, rows * k));
      local.Run([&] { return update(r0, rows, k); });
    }
    if (mine) {
      // The panel's columns are final: the diagonal block and R below it.
      local.Run([&] {
        return bk.BandFromColumns(main, pc.column, pc.ld, pc.row0, c0, width, n, b, band);
      });
    }
  }
  JAXMG_RETURN_IF_ERROR(bk.Agree("band_reduce", local.status()));
  if (procs > 1) JAXMG_RETURN_IF_ERROR(bk.ReduceToRoot(band, BandElements(n, b)));
  *out = Banded<T>{band, taus};
  return Status();
}

// The back-transformation's scratch: vw (n x gw), f (t x t, T), qs (t x t), vt (n x b, P x 1
// grids), and the reflector products' (w, w2: t x the columns of Z held).
template <typename T>
struct BackReduceWork {
  T *vw = nullptr, *f = nullptr, *qs = nullptr, *vt = nullptr;
  ReflectorWork<T> products;
};

// Z := Q₁ Z for this rank's z_cols columns of Z (leading dimension ldz >= n), Q₁ from the
// reduced matrix a (distributed as s) and τ (BandReduce's, band width b) in groups of gw columns
// (a multiple of b dividing t). Local errors are kept in *failed.
template <typename T, class B>
Status BandBackReduce(B& bk, const typename B::Lane& main, const Distribution& s, int64_t b,
                      const T* a, const T* taus, int64_t gw, T* z, int64_t z_cols, int64_t ldz,
                      const BackReduceWork<T>& w, Deferred* failed) {
  const int64_t n = s.rows, t = s.tile(), lr = s.local_rows();
  const CyclicAxis& axis = s.cyclic();
  const int64_t groups = (n + gw - 1) / gw;
  failed->Step("band_eigh", s.rank, 3);
  for (int64_t kg = groups - 1; kg >= 0; --kg) {
    const int64_t c0 = kg * gw, r0 = c0 + b, rows = n - r0;
    if (rows < 2) continue;
    const int64_t k = std::min(std::min(gw, n - c0), rows);  // τ = 0 past each panel's
    const int owner = axis.Owner(GlobalIndex{c0});
    if (axis.coord == owner) {
      failed->Run([&]() -> Status {
        JAXMG_RETURN_IF_ERROR(bk.Zero(main, w.vw, rows * k));
        const int64_t lc0 = axis.Local(GlobalIndex{c0}).value;
        const T* column = a + lr * lc0;
        for (int64_t p = 0; p * b < k; ++p) {
          const int64_t pr0 = r0 + p * b, prows = n - pr0, pk = std::min(prows, b);
          if (prows < 2) break;
          const T* at = column + (pr0 + p * b * lr);
          int64_t ld_at = lr;
          if (s.by_rows()) {  // BandReduce left the factored rows' adjoint in this rank's rows
            JAXMG_RETURN_IF_ERROR(
                bk.Adjoint(main, a + (lc0 + p * b + pr0 * lr), lr, pk, prows, w.vt, prows));
            at = w.vt, ld_at = prows;
          }
          JAXMG_RETURN_IF_ERROR(bk.ReflectorBlock(main, at, ld_at, prows, pk, taus + (c0 + p * b),
                                                  w.vw + (p * b + p * b * rows), rows));
        }
        return ReflectorFactor(bk, main, w.vw, rows, k, taus + c0, w.f, t, w.qs);
      });
    }
    if (axis.procs > 1) JAXMG_RETURN_IF_ERROR(bk.Broadcast(w.vw, rows * k, w.f, t * k, owner));
    failed->Run([&] {
      return ApplyReflectors(bk, main, w.vw, rows, k, w.f, t, /*adjoint=*/false, z + r0, z_cols,
                             ldz, w.products);
    });
  }
  return Status();
}

}  // namespace jaxmg::algorithms
