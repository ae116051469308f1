// qr and least_squares: Householder QR of a tall matrix A (M x N, M >= N) and the
// least-squares solve min ‖A x − b‖ through it.
//
// jaxmg/routines/qr.py hands aᵀ (a transpose local to each device), so the engine matrix (the
// shards read column-major) is A itself: rows relabeled (B = Π_r A; a row permutation of A
// permutes the rows of Q and leaves R unchanged, and padded zero rows give zero rows of Q), the
// columns in their order (kOrderedColumns: a column permutation would change R), padded only at
// their end, beyond the N columns factored.
//   B = (Π_r Q) R:  Q comes back through the plan (ShardOut: Π_r undone, padding dropped), in the
//   layout of aᵀ (read row-major, Qᵀ), which qr.py transposes back; R is the first N rows of
//   the factored B in engine order (LeadingRowsOut), taken before Orgqr overwrites them.
//   least squares: min ‖B x − Π_r b‖ has the same x, the first N rows of the solved right-hand
//   side.
#pragma once

#include "routines/contract.h"

namespace jaxmg::routines {

struct Qr : RoutineTraits {
  static constexpr layout::Symmetry kSymmetry = layout::Symmetry::kOrderedColumns;
  static constexpr bool kRectangular = true;

  template <class E, class T>
  static Status Run(E& e, const CallAttrs& attrs, const CallBuffers<T>& io) {
    MatrixOf<E, T> a;
    typename E::Reflectors tau;
    JAXMG_RETURN_IF_ERROR(e.Prepare(io.a, &a));
    int info = 0;
    JAXMG_RETURN_IF_ERROR(e.Geqrf(&a, &tau, &info));  // agreed by every rank
    JAXMG_RETURN_IF_ERROR(e.WriteStatus(info, io.status));
    if (info != 0) {
      JAXMG_RETURN_IF_ERROR(e.FillNan(io.x, io.x_count));
      return e.FillNan(io.a, io.a_count);
    }
    JAXMG_RETURN_IF_ERROR(e.LeadingRowsOut(a, io.x, io.x_rows));  // R
    JAXMG_RETURN_IF_ERROR(e.Orgqr(&a, tau));                      // a := Q
    return e.ShardOut(a, io.a);
  }
};

struct LeastSquares : RoutineTraits {
  static constexpr layout::Symmetry kSymmetry = layout::Symmetry::kOrderedColumns;
  static constexpr bool kRectangular = true;

  template <class E, class T>
  static Status Run(E& e, const CallAttrs& attrs, const CallBuffers<T>& io) {
    MatrixOf<E, T> a, c, z;
    JAXMG_RETURN_IF_ERROR(e.Prepare(io.a, &a));
    JAXMG_RETURN_IF_ERROR(e.RhsIn(io.b, io.nrhs, Axis::kRows, /*conj=*/false, &c));
    int info = 0;
    JAXMG_RETURN_IF_ERROR(e.Gels(&a, c, &z, &info));  // agreed by every rank
    JAXMG_RETURN_IF_ERROR(e.WriteStatus(info, io.status));
    if (info != 0) return e.FillNan(io.x, io.x_count);
    return e.LeadingRowsOut(z, io.x, io.x_rows);
  }
};

}  // namespace jaxmg::routines
