// potrs (JAXMg's name; LAPACK's posv): Cholesky factorization and solve of a symmetric
// (Hermitian) positive-definite system, with log det A. The engine's solve with a factor is
// its Potrs step.
//
// The engine holds conj(A) relabeled (B = Π conj(A) Πᵀ, see layout.h), so it solves
// conj(A) y = conj(b): the right-hand side goes in and the solution comes out conjugated, both
// through the same Π.
#pragma once

#include "routines/contract.h"

namespace jaxmg::routines {

struct Posv : RoutineTraits {
  static constexpr layout::Symmetry kSymmetry = layout::Symmetry::kSymmetric;
  static constexpr int kNotSymmetric = -1;  // the status of a matrix that is not Hermitian

  // The symmetry check (when asked) and the Cholesky factorization with its status and
  // log-determinant: *l := the factor (l->empty() when the matrix is not Hermitian or not
  // positive definite; nan_count entries of nan_out are NaN then). Shared by potri and
  // cho_factor.
  // With attrs.check_symmetry: *rejected (agreed) when the matrix is not Hermitian, with the
  // status kNotSymmetric and nan_count entries of nan_out NaN. Shared by syevd.
  template <class E, class T>
  static Status RejectAsymmetric(E& e, const CallAttrs& attrs, const CallBuffers& io, void* nan_out,
                                 int64_t nan_count, bool* rejected) {
    *rejected = false;
    if (!attrs.check_symmetry) return Status();
    JAXMG_RETURN_IF_ERROR(e.template Asymmetric<T>(io.a, rejected));  // agreed
    if (!*rejected) return Status();
    JAXMG_RETURN_IF_ERROR(e.WriteStatus(kNotSymmetric, io.status));
    return e.template FillNan<T>(nan_out, nan_count);
  }

  template <class E, class T>
  static Status Factor(E& e, const CallAttrs& attrs, const CallBuffers& io, void* nan_out,
                       int64_t nan_count, typename E::Matrix* l) {
    *l = typename E::Matrix();
    // The symmetry check's verdict comes with the factorization's status agreement (a matrix
    // that is not Hermitian costs a wasted factorization, the Hermitian one no extra wait).
    if (attrs.check_symmetry) JAXMG_RETURN_IF_ERROR(e.template CheckSymmetry<T>(io.a));
    typename E::Matrix a;
    JAXMG_RETURN_IF_ERROR(e.template Prepare<T>(io.a, &a));
    int info = 0;
    JAXMG_RETURN_IF_ERROR(e.template Potrf<T>(&a, &info));  // agreed by every rank
    if (attrs.check_symmetry && e.asymmetric()) info = kNotSymmetric;
    JAXMG_RETURN_IF_ERROR(e.WriteStatus(info, io.status));
    JAXMG_RETURN_IF_ERROR(e.template LogAbsDiag<T>(a, 2.0, info == 0, io.logdet));
    if (info != 0) return e.template FillNan<T>(nan_out, nan_count);
    *l = a;
    return Status();
  }

  // x := B⁻¹ c for the factor l, c = conj(b) through Π (the solution conjugated back). Shared by
  // cho_solve.
  template <class E, class T>
  static Status Solve(E& e, const CallBuffers& io, const typename E::Matrix& l) {
    typename E::Matrix c;
    JAXMG_RETURN_IF_ERROR(e.template RhsIn<T>(io.b, io.nrhs, Axis::kRows, /*conj=*/true, &c));
    JAXMG_RETURN_IF_ERROR(e.template Potrs<T>(l, c));  // c := B⁻¹ c
    return e.template RhsOut<T>(c, io.x, Axis::kCols, /*conj=*/true);
  }

  template <class E, class T>
  static Status Run(E& e, const CallAttrs& attrs, const CallBuffers& io) {
    typename E::Matrix l;
    JAXMG_RETURN_IF_ERROR((Factor<E, T>(e, attrs, io, io.x, io.x_count, &l)));
    if (l.empty()) return Status();
    return Solve<E, T>(e, io, l);
  }
};

}  // namespace jaxmg::routines
