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
  static Status RejectAsymmetric(E& e, const CallAttrs& attrs, const CallBuffers<T>& io, T* nan_out,
                                 int64_t nan_count, bool* rejected) {
    *rejected = false;
    if (!attrs.check_symmetry) return Status();
    JAXMG_RETURN_IF_ERROR(e.Asymmetric(io.a, rejected));  // agreed
    if (!*rejected) return Status();
    JAXMG_RETURN_IF_ERROR(e.WriteStatus(kNotSymmetric, io.status));
    return e.FillNan(nan_out, nan_count);
  }

  template <class E, class T>
  static Status Factor(E& e, const CallAttrs& attrs, const CallBuffers<T>& io, T* nan_out,
                       int64_t nan_count, MatrixOf<E, T>* l) {
    *l = MatrixOf<E, T>();
    // The symmetry check's verdict comes with the factorization's status agreement (a matrix
    // that is not Hermitian costs a wasted factorization, the Hermitian one no extra wait).
    if (attrs.check_symmetry) JAXMG_RETURN_IF_ERROR(e.CheckSymmetry(io.a));
    MatrixOf<E, T> a;
    JAXMG_RETURN_IF_ERROR(e.Prepare(io.a, &a));
    int info = 0;
    JAXMG_RETURN_IF_ERROR(e.Potrf(&a, &info));  // agreed by every rank
    if (attrs.check_symmetry && e.asymmetric()) info = kNotSymmetric;
    JAXMG_RETURN_IF_ERROR(e.WriteStatus(info, io.status));
    JAXMG_RETURN_IF_ERROR(e.LogAbsDiag(a, 2.0, info == 0, io.logdet));
    if (info != 0) return e.FillNan(nan_out, nan_count);
    *l = a;
    return Status();
  }

  // x := B⁻¹ c for the factor l, c = conj(b) through Π (the solution conjugated back). Shared by
  // cho_solve.
  template <class E, class T>
  static Status Solve(E& e, const CallBuffers<T>& io, const MatrixOf<E, T>& l) {
    MatrixOf<E, T> c;
    JAXMG_RETURN_IF_ERROR(e.RhsIn(io.b, io.nrhs, Axis::kRows, /*conj=*/true, &c));
    JAXMG_RETURN_IF_ERROR(e.Potrs(l, c));  // c := B⁻¹ c
    return e.RhsOut(c, io.x, Axis::kCols, /*conj=*/true);
  }

  template <class E, class T>
  static Status Run(E& e, const CallAttrs& attrs, const CallBuffers<T>& io) {
    MatrixOf<E, T> l;
    JAXMG_RETURN_IF_ERROR(Factor(e, attrs, io, io.x, io.x_count, &l));
    if (l.empty()) return Status();
    return Solve(e, io, l);
  }
};

}  // namespace jaxmg::routines
