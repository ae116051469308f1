// slogdet: the sign (phase) and log |det A| of a general matrix, through pivoted LU.
//
// det B = det(P) · Π diag(U) for the engine matrix B = Π_r M Π_cᵀ, M = Aᵀ (or A when handed
// transposed): det A = det B · sgn(Π_r) · sgn(Π_c), which the engine's SignLogDet accounts for.
// An exactly singular matrix gives sign 0 and -inf (as NumPy) with status k > 0; a non-finite
// factor (NaN or Inf in a) gives NaN.
#pragma once

#include "routines/contract.h"
#include "routines/lu_solve.h"

namespace jaxmg::routines {

struct Slogdet : RoutineTraits {
  static constexpr layout::Symmetry kSymmetry = layout::Symmetry::kGeneral;

  template <class E, class T>
  static Status Run(E& e, const CallAttrs& attrs, const CallBuffers<T>& io) {
    MatrixOf<E, T> lu;
    typename E::Pivots piv;
    int info = 0;
    JAXMG_RETURN_IF_ERROR(LuSolve::Factor(e, io, &lu, &piv, &info));
    return e.SignLogDet(lu, piv, io.sign, io.logdet);
  }
};

}  // namespace jaxmg::routines
