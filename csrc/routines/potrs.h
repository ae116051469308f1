// potrs: Cholesky solve of a symmetric (Hermitian) positive-definite system, with log det A.
//
// The engine holds conj(A) relabeled (B = Π conj(A) Πᵀ, see layout.h), so it solves
// conj(A) y = conj(b): the right-hand side goes in and the solution comes out conjugated, both
// through the same Π.
#pragma once

#include "routines/contract.h"

namespace jaxmg::routines {

struct Potrs {
  static constexpr layout::Symmetry kSymmetry = layout::Symmetry::kSymmetric;
  static constexpr int kNotSymmetric = -1;  // the status of a matrix that is not Hermitian

  // The symmetry check (when asked) and the Cholesky factorization with its status and
  // log-determinant; *factored is false (and nan_count entries of nan_out are NaN) when the
  // matrix is not Hermitian or not positive definite. Shared by potri.
  // With attrs.check_symmetry: *rejected (agreed) when the matrix is not Hermitian, with the
  // status kNotSymmetric and nan_count entries of nan_out NaN. Shared by syevd.
  template <class E, class T>
  static Status RejectAsymmetric(E& e, const SolveAttrs& attrs, const SolveIo& io, void* nan_out,
                                 int64_t nan_count, bool* rejected) {
    *rejected = false;
    if (!attrs.check_symmetry) return Status();
    JAXMG_RETURN_IF_ERROR(e.template Asymmetric<T>(io.a, rejected));  // agreed
    if (!*rejected) return Status();
    JAXMG_RETURN_IF_ERROR(e.WriteStatus(kNotSymmetric, io.status));
    return e.template FillNan<T>(nan_out, nan_count);
  }

  template <class E, class T>
  static Status Factor(E& e, const SolveAttrs& attrs, const SolveIo& io, void* nan_out,
                       int64_t nan_count, bool* factored) {
    *factored = false;
    // The symmetry check's verdict comes with the factorization's status agreement (a matrix
    // that is not Hermitian costs a wasted factorization, the Hermitian one no extra wait).
    if (attrs.check_symmetry) JAXMG_RETURN_IF_ERROR(e.template CheckSymmetry<T>(io.a));
    JAXMG_RETURN_IF_ERROR(e.template Prepare<T>(io.a));
    int info = 0;
    JAXMG_RETURN_IF_ERROR(e.template Potrf<T>(&info));  // agreed by every rank
    if (attrs.check_symmetry && e.asymmetric()) info = kNotSymmetric;
    JAXMG_RETURN_IF_ERROR(e.WriteStatus(info, io.status));
    JAXMG_RETURN_IF_ERROR(e.template LogAbsDiag<T>(2.0, info == 0, io.logdet));
    if (info != 0) return e.template FillNan<T>(nan_out, nan_count);
    *factored = true;
    return Status();
  }

  template <class E, class T>
  static Status Run(E& e, const SolveAttrs& attrs, const SolveIo& io) {
    bool factored = false;
    JAXMG_RETURN_IF_ERROR((Factor<E, T>(e, attrs, io, io.x, io.x_count, &factored)));
    if (!factored) return Status();
    JAXMG_RETURN_IF_ERROR(e.template RhsIn<T>(io.b, io.nrhs, Axis::kRows, /*conj=*/true));
    JAXMG_RETURN_IF_ERROR(e.template Potrs<T>());
    return e.template RhsOut<T>(io.x, Axis::kCols, /*conj=*/true);
  }
};

}  // namespace jaxmg::routines
