// The 1-D Cholesky: right-looking blocked Cholesky A = L Lᴴ (lower) on a 1 x P grid, written once
// over a backend (the GPU engine's: cusolverDn for the diagonal tiles, cuBLAS for the panels and
// the trailing updates, NCCL; the CPU engine's: LAPACK, BLAS, MPI). Its products are the
// backend's own, so on GPUs config.gpu_math = "tf32" puts a float32 factor's trailing updates,
// nearly all of its flops, on tensor cores (the low-precision factor of mixed precision).
//
// On a 1 x P grid every row is local and the columns are block-cyclic in tiles of t (the last
// may be narrower: a redistributed matrix is not padded). For each tile column k its owner
// factors the diagonal tile (potrf), solves for the tiles below it (L₂₁ := A₂₁ L₁₁⁻ᴴ), copies
// the panel (rows k t .. n) out and broadcasts it; every rank then updates its tile columns right
// of k, each from its diagonal down (A[c:, c] −= L[c:, k] L[c, k]ᴴ, one product a tile
// column). Only the lower triangle and the diagonal tiles are written: the factor ends where
// p?potrf leaves it, and the strictly upper part of the diagonal tiles holds the products'
// by-products (no solve reads it).
//
// Look-ahead (as the 1-D QR's): the owner of tile column k + 1 updates it first, then factors it
// on the side lane while the main lane updates the rest, so that the panel's potrf and solve,
// which cannot fill a GPU, run beside the products (panels k and k + 1 in two buffers).
//
// Failures: a diagonal tile that is not positive definite is not an error: its potrf's info
// (1-based, within the tile) is kept and the first one is returned as the global 1-based column
// of the failure, as LAPACK's info (0: positive definite); the steps after it compute on, and the
// engine makes the output NaN. The buffers and the backend's preparation are agreed before the
// first broadcast; a local error inside the loop (a potrf, a copy, trsm or gemm) stops this
// rank's computing but not its part of the broadcasts, and every rank returns the same error at
// the agreement after the loop. The test hook's steps are the tile columns ("cholesky:<rank>:<k>").
//
// The backend B, for the scalar T (every call returns a Status; `Broadcast` and `Agree` are
// collective, the others local; a Lane is where local work is queued, in order):
//   MainLane(Lane*), SideLane(Lane*)       the call's lane and the look-ahead's
//   Join(const Lane& from, const Lane& to, int event)  `to` waits for the work queued on `from`
//   Buffer(count, T** out), Buffer(count, int** out)   scratch for the call's lifetime (zeroed)
//   PreparePanel<T>(t, m, T* a, lda)    whatever the panel's steps below need, for potrf of at
//                                      most t x t and the solve of at most m x t
//   Potrf(lane, n, T* a, lda, int* info)   local Cholesky of the lower triangle; *info (backend
//                                      memory) > 0 where the tile is not positive definite
//   TrsmRightLowerAdjoint(lane, m, n, const T* l, ldl, T* b, ldb)   b := b L⁻ᴴ, L n x n lower
//   Copy(lane, T* dst, ldd, const T* src, lds, m, n)
//   Gemm(lane, false, true, m, n, k, T(-1), const T* a, lda, const T* b, ldb, T(1), T* c, ldc)
//                                      c −= a bᴴ
//   Broadcast(T* panel, count, T* none, 0, root)   from grid column root, on the main lane
//   InfosOut(const int* infos, count, int* host)   into host memory (waits for the main lane)
//   Agree(const char* algorithm, const Status& local)
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "algorithms/distribution.h"
#include "common/deferred.h"
#include "common/status.h"

namespace jaxmg::algorithms {

// A = L Lᴴ in place (a: this rank's columns of the n x n matrix g, on a 1 x P grid: every row,
// leading dimension g.ld >= n); *failed_at := the 1-based global column where A is not positive
// definite (0: it is), as this rank saw it (the engine agrees on it). Errors are agreed (every
// rank returns the same Status).
template <typename T, class B>
Status Cholesky1D(B& b, const Distribution& g, T* a, int64_t* failed_at) {
  const int64_t n = g.rows, t = g.tile(), ld = g.ld, lc = g.local_cols();
  const CyclicAxis& columns = g.col_axis;  // every row is local (1 x P)
  const int me = columns.coord;
  const int64_t tiles = g.col_tiles();
  *failed_at = 0;
  typename B::Lane main, side;
  T* panels = nullptr;  // panel k (rows k t .. n of tile column k) at panels + (k % 2) n t
  int* infos = nullptr;
  Deferred local;
  local.Run([&] { return b.MainLane(&main); });
  local.Run([&] { return b.SideLane(&side); });
  local.Run([&] { return b.Buffer(2 * n * t, &panels); });
  local.Run([&] { return b.Buffer(tiles, &infos); });
  local.Run([&] { return b.PreparePanel(std::min(t, n), n, panels, n); });
  JAXMG_RETURN_IF_ERROR(b.Agree("cholesky", local.status()));
  auto panel_of = [&](int64_t k) { return panels + (k % 2) * n * t; };
  // The owner's part of tile column k, on `lane`: potrf, the solve below it, the panel's copy.
  auto factor = [&](const typename B::Lane& lane, int64_t k) -> Status {
    const int64_t row0 = k * t, m = n - row0, kb = std::min(t, m);
    T* column = a + row0 + columns.Local(GlobalIndex{row0}).value * ld;
    JAXMG_RETURN_IF_ERROR(b.Potrf(lane, kb, column, ld, infos + k));
    if (m > kb) {
      JAXMG_RETURN_IF_ERROR(b.TrsmRightLowerAdjoint(lane, m - kb, kb, column, ld, column + kb, ld));
    }
    return b.Copy(lane, panel_of(k), m, static_cast<const T*>(column), ld, m, kb);
  };
  // This rank's tile columns from local column `from` to `to` (each from its diagonal tile down)
  // less panel k's product, on the main lane.
  auto update = [&](int64_t k, int64_t from, int64_t to) -> Status {
    const int64_t row0 = k * t, m = n - row0, kb = std::min(t, m);
    for (int64_t j = from; j < std::min(to, lc); j += t) {
      const int64_t c0 = columns.Global(LocalIndex{j}).value;  // its first global column
      const int64_t w = std::min(t, n - c0);
      const T* rows = panel_of(k) + (c0 - row0);  // L[c0:, k] in the panel
      JAXMG_RETURN_IF_ERROR(b.Gemm(main, false, true, n - c0, w, kb, T(-1), rows, m, rows, m, T(1),
                                   a + c0 + j * ld, ld));
    }
    return Status();
  };
  Deferred failed;
  if (columns.Owner(GlobalIndex{0}) == me) failed.Run([&] { return factor(main, 0); });
  for (int64_t k = 0; k < tiles; ++k) {
    const GlobalIndex row0{k * t};  // tile column k's first row and column
    const int owner = columns.Owner(row0);
    const int64_t m = n - row0.value;
    const int64_t kb = std::min(t, m);  // the last tile column may be narrower (no padding)
    failed.Step("cholesky", g.rank, k);
    if (columns.procs > 1) {
      JAXMG_RETURN_IF_ERROR(b.Broadcast(panel_of(k), m * kb, static_cast<T*>(nullptr), 0, owner));
    }
    if (!failed.ok()) continue;
    // This rank's tile columns right of tile column k; the first of them is tile column k + 1
    // where this rank owns it.
    const int64_t first = columns.LocalFrom(GlobalIndex{(k + 1) * t}).value;
    if (k + 1 < tiles && columns.Owner(GlobalIndex{(k + 1) * t}) == me) {
      failed.Run([&] { return update(k, first, first + t); });
      failed.Run([&] { return b.Join(main, side, 0); });
      // The rest of the update is queued before the panel (a backend's panel may block the host
      // until its lane is done).
      failed.Run([&] { return update(k, first + t, lc); });
      failed.Run([&] { return factor(side, k + 1); });
      failed.Run([&] { return b.Join(side, main, 1); });
    } else {
      failed.Run([&] { return update(k, first, lc); });
    }
  }
  // The infos' copy to the host is local too: inside the agreement, so that every rank leaves
  // together (the engine's status agreement follows).
  std::vector<int> host(static_cast<size_t>(tiles), 0);
  failed.Run([&] { return b.InfosOut(infos, tiles, host.data()); });
  JAXMG_RETURN_IF_ERROR(b.Agree("cholesky", failed.status()));
  for (int64_t k = 0; k < tiles; ++k) {
    if (host[k] > 0) {
      *failed_at = k * t + host[k];
      break;
    }
  }
  return Status();
}

}  // namespace jaxmg::algorithms
