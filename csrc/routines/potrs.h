// potrs: Cholesky solve of a symmetric (Hermitian) positive-definite system, with log det A.
//
// The engine holds conj(A) relabeled (B = Π conj(A) Πᵀ, see layout.h), so it solves
// conj(A) y = conj(b): the right-hand side goes in and the solution comes out conjugated, both
// through the same Π.
#pragma once

#include "ffi/solve.h"

namespace jaxmg::routines {

struct Potrs {
  static constexpr layout::Symmetry kSymmetry = layout::Symmetry::kSymmetric;
  static constexpr int kNotSymmetric = -1;  // the status of a matrix that is not Hermitian

  // The symmetry check (when asked): true when the matrix is not Hermitian, after writing the
  // status and NaN log-determinant (the caller fills its own outputs with NaN).
  template <class E, class T>
  static Status Refused(E& e, const SolveAttrs& attrs, const SolveIo& io, bool* refused) {
    *refused = false;
    if (!attrs.check_symmetry) return Status();
    JAXMG_RETURN_IF_ERROR(e.template Asymmetric<T>(io.a, refused));  // agreed
    if (!*refused) return Status();
    JAXMG_RETURN_IF_ERROR(e.WriteStatus(kNotSymmetric, io.status));
    return e.template LogAbsDiag<T>(2.0, false, io.logdet);
  }

  template <class E, class T>
  static Status Run(E& e, const SolveAttrs& attrs, const SolveIo& io) {
    bool refused = false;
    JAXMG_RETURN_IF_ERROR((Refused<E, T>(e, attrs, io, &refused)));
    if (refused) return e.template FillNan<T>(io.x, io.x_count);
    JAXMG_RETURN_IF_ERROR(e.template Prepare<T>(io.a));
    int info = 0;
    JAXMG_RETURN_IF_ERROR(e.template Potrf<T>(&info));  // agreed by every rank
    JAXMG_RETURN_IF_ERROR(e.WriteStatus(info, io.status));
    JAXMG_RETURN_IF_ERROR(e.template LogAbsDiag<T>(2.0, info == 0, io.logdet));
    if (info != 0) return e.template FillNan<T>(io.x, io.x_count);
    JAXMG_RETURN_IF_ERROR(e.template RhsIn<T>(io.b, io.nrhs, Axis::kRows, /*conj=*/true));
    JAXMG_RETURN_IF_ERROR(e.template Potrs<T>());
    return e.template RhsOut<T>(io.x, Axis::kCols, /*conj=*/true);
  }
};

}  // namespace jaxmg::routines
