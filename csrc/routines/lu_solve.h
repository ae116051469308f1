// lu_solve: solve of a general nonsingular system by pivoted LU, with log |det A|.
//
// The engine matrix is B = Π_r M Π_cᵀ (independent row and column relabelings, layout.h), where
// M is what the shards hold read column-major: Aᵀ when the matrix is handed as it is, A when
// jaxmg/routines/lu_solve.py handed aᵀ (attrs.transposed).
//   M = Aᵀ: A x = b  <=>  Bᵀ (Π_r x) = Π_c b   (getrs with transpose)
//   M = A:  A x = b  <=>  B (Π_c x) = Π_r b    (getrs without)
#pragma once

#include "routines/contract.h"

namespace jaxmg::routines {

struct LuSolve : RoutineTraits {
  static constexpr layout::Symmetry kSymmetry = layout::Symmetry::kGeneral;

  // *lu := the engine matrix from the shard, factored by pivoted LU, *piv its row
  // interchanges; the status written, *info agreed by every rank. Shared by inv, slogdet and
  // lu_factor.
  template <class E, class T>
  static Status Factor(E& e, const CallBuffers<T>& io, MatrixOf<E, T>* lu, typename E::Pivots* piv,
                       int* info) {
    JAXMG_RETURN_IF_ERROR(e.Prepare(io.a, lu));
    *info = 0;
    JAXMG_RETURN_IF_ERROR(e.Getrf(lu, piv, info));
    return e.WriteStatus(*info, io.status);
  }

  template <class E, class T>
  static Status Run(E& e, const CallAttrs& attrs, const CallBuffers<T>& io) {
    MatrixOf<E, T> lu;
    typename E::Pivots piv;
    int info = 0;
    JAXMG_RETURN_IF_ERROR(Factor(e, io, &lu, &piv, &info));
    JAXMG_RETURN_IF_ERROR(e.LogAbsDiag(lu, 1.0, info == 0, io.logdet));
    if (info != 0) return e.FillNan(io.x, io.x_count);
    return Solve(e, attrs, io, lu, piv);
  }

  // The solve with the factors lu and their pivots (shared with the solves from a kept factor,
  // factor.h): A x = b, or Aᵀ x = b with `transpose` (M = Aᵀ: Aᵀ x = b <=> B (Π_c x) = Π_r b).
  template <class E, class T>
  static Status Solve(E& e, const CallAttrs& attrs, const CallBuffers<T>& io,
                      const MatrixOf<E, T>& lu, const typename E::Pivots& piv,
                      bool transpose = false) {
    const bool holds_transpose = !attrs.transposed != transpose;
    MatrixOf<E, T> c;
    JAXMG_RETURN_IF_ERROR(
        e.RhsIn(io.b, io.nrhs, holds_transpose ? Axis::kCols : Axis::kRows, /*conj=*/false, &c));
    JAXMG_RETURN_IF_ERROR(e.Getrs(lu, piv, c, holds_transpose));  // c := op(B)⁻¹ c
    return e.RhsOut(c, io.x, holds_transpose ? Axis::kRows : Axis::kCols,
                    /*conj=*/false);
  }
};

}  // namespace jaxmg::routines
