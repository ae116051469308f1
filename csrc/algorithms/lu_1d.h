// The 1-D LU: right-looking LU with partial pivoting on a 1 x P grid, written once over a
// backend (the GPU engine's: cusolverDn, cuBLAS, NCCL and a row-swap kernel; the CPU engine's:
// LAPACK, BLAS, MPI and a host loop).
//
// On a 1 x P grid every row is local and the columns are block-cyclic in tiles of t (the last
// may be narrower: a redistributed matrix is not padded). For each tile column k its owner
// factors the panel (rows k t .. n, the tile's columns: getrf), copies it out and
// broadcasts it with its t pivots; every rank interchanges the rows of its other columns, solves
// for its part of the block row of U (trsm with the panel's unit lower triangle) and updates its
// trailing columns (gemm). The factors end where ScaLAPACK's p?getrf leaves them, and the pivots
// come back global and 1-based on every rank (row i was interchanged with row piv[i] - 1), the
// same list p?getrf holds on a 1 x P grid.
//
// Failures: the buffers and the backend's preparation are agreed before the first broadcast. A
// local error inside the loop (a panel's getrf, a copy, a swap, trsm or gemm) stops this rank's
// computing but not its part of the broadcasts, and every rank returns the same error at the
// agreement after the loop. The test hook's steps are the tile columns ("lu:<rank>:<k>").
//
// The backend B, for the scalar T (every call returns a Status; `Broadcast` and `Agree` are
// collective, the others local):
//   Buffer(count, T** out), Buffer(count, int64_t** out)  scratch for the call's lifetime
//   PrepareGetrf<T>(m, n, T* a, lda)    whatever getrf of at most m x n needs (a workspace)
//   Getrf(m, n, T* a, lda, int64_t* piv)  local LU, 1-based pivots relative to the panel; a
//                                      singular panel is not an error (the status finds it)
//   Copy(T* dst, ldd, const T* src, lds, m, n)
//   Broadcast(T* panel, count, int64_t* piv, npiv, root)  from grid column root
//   RowSwaps(T* a, lda, cols, skip_begin, skip_end, row0, const int64_t* piv, count)
//                                      rows row0 + i <-> row0 + piv[i] - 1 of columns [0, cols)
//                                      outside [skip_begin, skip_end), i = 0 .. count - 1
//   TrsmLowerUnit(m, n, const T* l, ldl, T* b, ldb)  b := L⁻¹ b, L m x m unit lower
//   GemmMinus('N', m, n, k, const T* a, lda, const T* b, ldb, T* c, ldc)  c -= a b
//   PivotsOut(const int64_t* piv, count, int64_t* host)  into host memory (waits)
//   Agree(const char* algorithm, const Status& local)  every rank's outcome: the lowest failing
//                                      rank's error on every rank, or ok
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "algorithms/distribution.h"
#include "common/deferred.h"
#include "common/status.h"

namespace jaxmg::algorithms {

// P A = L U in place (a: this rank's columns of the n x n matrix g, on a 1 x P grid: every row,
// leading dimension g.ld >= n); *pivots := the global 1-based pivots (n), the
// same on every rank. Errors are agreed (every rank returns the same Status).
template <typename T, class B>
Status Lu1D(B& b, const Distribution& g, T* a, std::vector<int64_t>* pivots) {
  const int64_t n = g.rows, t = g.tile(), ld = g.ld, lc = g.local_cols();
  const CyclicAxis& columns = g.col_axis;  // every row is local (1 x P)
  const int me = columns.coord;
  T* panel = nullptr;
  int64_t* piv = nullptr;
  Deferred local;
  local.Run([&] { return b.Buffer(n * t, &panel); });
  local.Run([&] { return b.Buffer(n, &piv); });
  local.Run([&] { return b.PrepareGetrf(n, t, panel, n); });
  JAXMG_RETURN_IF_ERROR(b.Agree("lu", local.status()));
  Deferred failed;
  for (int64_t k = 0; k * t < n; ++k) {
    const GlobalIndex row0{k * t};  // panel k's first row and column
    const int owner = columns.Owner(row0);
    const int64_t m = n - row0.value;
    const int64_t kb = std::min(t, m);  // the last tile column may be narrower (no padding)
    failed.Step("lu", g.rank, k);
    // (on its owner) the panel's first local column
    const int64_t panel_col = me == owner ? columns.Local(row0).value : 0;
    if (me == owner) {
      T* column = a + row0.value + panel_col * ld;
      failed.Run([&] { return b.Getrf(m, kb, column, ld, piv + row0.value); });
      failed.Run([&] { return b.Copy(panel, m, column, ld, m, kb); });
    }
    if (columns.procs > 1) {
      JAXMG_RETURN_IF_ERROR(b.Broadcast(panel, m * kb, piv + row0.value, kb, owner));
    }
    if (!failed.ok()) continue;
    // This rank's columns right of tile column k: from its first local column at tile k + 1.
    const int64_t first = columns.LocalFrom(GlobalIndex{(k + 1) * t}).value;
    const int64_t cols = lc - first;
    const int64_t skip_begin = me == owner ? panel_col : 0;
    const int64_t skip_end = me == owner ? panel_col + kb : 0;
    failed.Run([&] {
      return b.RowSwaps(a, ld, lc, skip_begin, skip_end, row0.value, piv + row0.value, kb);
    });
    if (cols <= 0) continue;
    T* block = a + row0.value + first * ld;
    failed.Run([&] { return b.TrsmLowerUnit(kb, cols, panel, m, block, ld); });
    if (m > kb) {
      failed.Run([&] {
        return b.GemmMinus('N', m - kb, cols, kb, panel + kb, m, block, ld, block + kb, ld);
      });
    }
  }
  // The pivots' copy to the host is local too: inside the agreement, so that every rank leaves
  // together (the engine's status agreement follows).
  pivots->assign(static_cast<size_t>(n), 0);
  failed.Run([&] { return b.PivotsOut(piv, n, pivots->data()); });
  JAXMG_RETURN_IF_ERROR(b.Agree("lu", failed.status()));
  // Panel k's pivots are relative to its first row.
  for (int64_t i = 0; i < n; ++i) (*pivots)[i] += (i / t) * t;
  return Status();
}

}  // namespace jaxmg::algorithms
