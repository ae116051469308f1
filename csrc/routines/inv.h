// inv: the inverse of a general nonsingular matrix, in the matrix's own sharding (the result
// aliases `a`), through pivoted LU.
//
// The engine redistributes (jaxmg/routines/inv.py asks for it), so it holds M, the shards read
// column-major, with no relabeling: M = Aᵀ. It forms Y = M⁻¹ = U⁻¹ L⁻¹ Pᵀ from M's LU factors,
// distributed like M (never gathered; InverseSolve), and writes Y = A⁻ᵀ back into the block layout:
// read row-major, that is A⁻¹. (With relabeling, B = Π_r M Π_cᵀ and B⁻¹ = Π_c M⁻¹ Π_rᵀ: an entry
// would belong to another device whenever Π_r ≠ Π_c.)
#pragma once

#include "routines/contract.h"
#include "routines/lu_solve.h"

namespace jaxmg::routines {

// kTranspose: the transpose of the inverse, A⁻ᵀ (M Y = I solved as Mᵀ Y = I), which the
// derivative of log |det A| needs elementwise against dA, in a's sharding.
template <bool kTranspose>
struct InvOf : RoutineTraits {
  static constexpr layout::Symmetry kSymmetry = layout::Symmetry::kGeneral;

  template <class E, class T>
  static Status Run(E& e, const CallAttrs& attrs, const CallBuffers<T>& io) {
    if (e.plan().strategy != layout::Strategy::kRedistribute) {
      return JAXMG_ERROR("inv runs on a redistributed matrix");
    }
    MatrixOf<E, T> lu, y;
    typename E::Pivots piv;
    int info = 0;
    JAXMG_RETURN_IF_ERROR(LuSolve::Factor(e, io, &lu, &piv, &info));
    JAXMG_RETURN_IF_ERROR(e.LogAbsDiag(lu, 1.0, info == 0, io.logdet));
    if (info != 0) return e.FillNan(io.a, io.a_count);
    JAXMG_RETURN_IF_ERROR(e.InverseSolve(lu, piv, kTranspose, &y));  // y := M⁻¹ (M⁻ᵀ)
    return e.ShardOut(y, io.a);
  }
};
using Inv = InvOf<false>;
using InvTransposed = InvOf<true>;

}  // namespace jaxmg::routines
