// The blocked inverses, written once over a backend's distributed products (the GPU engine's:
// cuBLASMp; the CPU engine's: PBLAS): of a triangular matrix, of a Cholesky factorization
// (B⁻¹ = L⁻ᴴ L⁻¹) and of an LU factorization (M⁻¹ = U⁻¹ L⁻¹ Pᵀ).
//
// Every operand is an n x n matrix block-cyclic in t x t tiles over the backend's 2-D grid, all
// with the same distribution (g: a Distribution, rows = cols = n). The work is split into column
// blocks of whole tiles, about eight, so that each product skips the zero part of a triangle:
// - W = L⁻¹: column block k of W is L[k:, k:]⁻¹ I[k:, k] (lower), and of W = U⁻¹ it is
//   U[:e, :e]⁻¹ I[:e, k] (upper; e: the block's end): one distributed trsm per block, N³/3 flops
//   in all instead of the N³ of one trsm with the identity;
// - B⁻¹ = Wᴴ W = Σ_k W_kᴴ W_k over W's row blocks W_k = W[k, :e_k] (zero beyond e_k): one gemm
//   each into the leading e_k x e_k block, 2N³/3 flops, both triangles;
// - X = W_U W_L = Σ_k W_U[:e_k, k] W_L[k, :e_k]: the same blocks, for the LU's inverse.
//
// Failures: each algorithm sizes its products' workspace first (a pass of size queries), takes
// it, and agrees; after that every rank enters every product (they are collective), a local
// error is kept in `failed` and agreed by the caller (CholeskyInverse agrees its own). The test
// hook's steps are the blocks ("inv_triangular:<rank>:<k>", "inv_cholesky:...", "inv:...").
//
// The backend B, for the scalar T (indices are 1-based and global, as PBLAS takes them; Size
// accumulates a call's workspace, Run makes it; PTrsm, PGemm and Agree are collective):
//   PrepareSquare<T>(const Distribution&)  the distribution's descriptors
//   PTrsm<T>(pass, upper, unit, m, n, const T* a, ia, ja, T* b, ib, jb)
//                                           B[ib.., jb..] := A[ia.., ja..]⁻¹ B (left, m x n)
//   PGemm<T>(pass, adjoint_a, m, n, k, const T* a, ia, ja, const T* b, ib, jb, T* c, ic, jc)
//                                           C += op(A) B (op: N, or ᴴ when adjoint_a)
//   PWorkspace()                           the workspace the Size calls asked for
//   PMoveColumns<T>(const T* x, T* out, const std::vector<int64_t>& order)
//                                           column i of x to column order[i] of out (collective)
//   Agree(const char* algorithm, const Status& local)
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "algorithms/distribution.h"
#include "common/deferred.h"
#include "common/status.h"

namespace jaxmg::algorithms {

enum class Pass { kSize, kRun };

// The column blocks: whole tiles, about eight of them.
inline int64_t InverseBlock(const Distribution& g) {
  return g.tile() * std::max<int64_t>(1, (g.col_tiles() + 7) / 8);
}

namespace detail {

// One sweep over the column blocks k0 = 0, nb, 2 nb, ... of g: block(pass, k0, kb) makes (Run)
// or sizes (Size) block k0's product. The size pass runs first, with the square's descriptors;
// the workspace is taken and the ranks agree; then the run pass enters every block's product
// (they are collective), its local errors and the test hook's (algorithm:<rank>:<block>) kept
// in `failed`.
template <typename T, class B, class Block>
Status BlockSweep(B& b, const Distribution& g, const char* algorithm, Deferred* failed,
                  Block&& block) {
  const int64_t n = g.rows, nb = InverseBlock(g);
  Deferred local;
  local.Run([&] { return b.template PrepareSquare<T>(g); });
  for (int64_t k0 = 0; k0 < n && local.ok(); k0 += nb) {
    local.Keep(block(Pass::kSize, k0, std::min(nb, n - k0)));
  }
  local.Run([&] { return b.PWorkspace(); });
  JAXMG_RETURN_IF_ERROR(b.Agree(algorithm, local.status()));
  for (int64_t k0 = 0; k0 < n; k0 += nb) {
    failed->Step(algorithm, g.rank, k0 / nb);
    failed->Keep(block(Pass::kRun, k0, std::min(nb, n - k0)));
  }
  return Status();
}

}  // namespace detail

// W := L⁻¹ (lower; upper: U⁻¹), L's diagonal unit or not. W holds the identity on entry.
template <typename T, class B>
Status TriangularInverse(B& b, const Distribution& g, const T* l, T* w, bool upper, bool unit,
                         Deferred* failed) {
  const int64_t n = g.rows;
  return detail::BlockSweep<T>(
      b, g, "inv_triangular", failed, [&](Pass pass, int64_t k0, int64_t kb) {
        // The triangle's part that block k needs: rows and columns
        // from `first`, m of them.
        const int64_t first = upper ? 1 : k0 + 1;
        const int64_t m = upper ? k0 + kb : n - k0;
        return b.PTrsm(pass, upper, unit, m, kb, l, first, first, w, first, k0 + 1);
      });
}

// y := B⁻¹ = L⁻ᴴ L⁻¹ from B's Cholesky factor L (lower, in l); w holds the identity and y zeros
// on entry (w ends as L⁻¹). Errors are agreed (every rank returns the same Status).
template <typename T, class B>
Status CholeskyInverse(B& b, const Distribution& g, const T* l, T* w, T* y) {
  Deferred failed;
  JAXMG_RETURN_IF_ERROR(TriangularInverse<T>(b, g, l, w, false, false, &failed));
  JAXMG_RETURN_IF_ERROR(
      detail::BlockSweep<T>(b, g, "inv_cholesky", &failed, [&](Pass pass, int64_t k0, int64_t kb) {
        const int64_t e = k0 + kb;
        return b.PGemm(pass, true, e, e, kb, w, k0 + 1, 1, w, k0 + 1, 1, y, 1, 1);
      }));
  return b.Agree("inv_cholesky", failed.status());
}

// x += W_U W_L by blocks (W_U = U⁻¹ upper, W_L = L⁻¹ lower, both from TriangularInverse): the
// product step of M⁻¹ = U⁻¹ L⁻¹ Pᵀ (the caller moves the columns). Local errors are kept in
// `failed`, for the caller's agreement.
template <typename T, class B>
Status LuInverseProduct(B& b, const Distribution& g, const T* w_upper, const T* w_lower, T* x,
                        Deferred* failed) {
  return detail::BlockSweep<T>(b, g, "inv", failed, [&](Pass pass, int64_t k0, int64_t kb) {
    const int64_t e = k0 + kb;
    return b.PGemm(pass, false, e, e, kb, w_upper, 1, k0 + 1, w_lower, k0 + 1, 1, x, 1, 1);
  });
}

// out := M⁻¹ = U⁻¹ L⁻¹ Pᵀ from P M = L U (factors: L's unit lower and U's upper triangle, as
// getrf leaves them) and its global pivots (1-based: row i was interchanged with row
// pivots[i] − 1, in order): W_L = L⁻¹ and W_U = U⁻¹, X = W_U W_L by blocks, then X's columns
// moved by the pivots. 4N³/3 flops, against 2N³ for the solve with the identity. w_lower and
// w_upper hold the identity and x zeros on entry; out may be w_lower. Errors are agreed.
template <typename T, class B>
Status LuInverse(B& b, const Distribution& g, const T* factors, const std::vector<int64_t>& pivots,
                 T* w_lower, T* w_upper, T* x, T* out) {
  const int64_t n = g.rows;
  // Pᵀ is the identity with the pivots' interchanges applied in order: its row i is
  // e_{order[i]}ᵀ, so column order[i] of X Pᵀ is column i of X. (The pivots are the same on
  // every rank, so every rank takes this error or none.)
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  for (int64_t i = 0; i < n; ++i) {
    if (static_cast<int64_t>(pivots.size()) != n || pivots[i] - 1 < i || pivots[i] > n) {
      return Status::Error("jaxmg: an LU pivot is out of range");
    }
    std::swap(order[i], order[pivots[i] - 1]);
  }
  Deferred failed;
  JAXMG_RETURN_IF_ERROR(TriangularInverse<T>(b, g, factors, w_lower, false, true, &failed));
  JAXMG_RETURN_IF_ERROR(TriangularInverse<T>(b, g, factors, w_upper, true, false, &failed));
  JAXMG_RETURN_IF_ERROR(LuInverseProduct<T>(b, g, w_upper, w_lower, x, &failed));
  failed.Keep(b.PMoveColumns(x, out, order));
  return b.Agree("inv", failed.status());
}

}  // namespace jaxmg::algorithms
