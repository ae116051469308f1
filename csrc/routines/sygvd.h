// sygvd: the generalized Hermitian eigenproblem A v = λ B v (A Hermitian, B Hermitian positive
// definite), eigenvalues ascending and eigenvectors.
//
// As for syevd (routines/syevd.h), the engine redistributes A into block-cyclic tiles and holds
// M = conj(A) (the shards read column-major); B comes as the call's b, a second matrix sharded
// like a, read the same way: K = conj(B) (MatrixIn). The engine's eigenvectors z of
// M z = λ K z are conj(v), written back as for syevd (VectorsOut); the eigenvalues (real) in x.
#pragma once

#include "ffi/solve.h"
#include "routines/potrs.h"

namespace jaxmg::routines {

template <bool kVectors>
struct SygvdOf {
  static constexpr layout::Symmetry kSymmetry = layout::Symmetry::kSymmetric;
  static constexpr bool kOwnSolution = true;
  static constexpr bool kSecondMatrix = true;

  template <class E, class T>
  static Status Run(E& e, const SolveAttrs& attrs, const SolveIo& io) {
    if (e.plan().strategy != layout::Strategy::kRedistribute) {
      return JAXMG_ERROR("sygvd runs on a redistributed matrix");
    }
    bool rejected = false;
    JAXMG_RETURN_IF_ERROR(
        (Potrs::RejectAsymmetric<E, T>(e, attrs, io, io.x, io.x_count, &rejected)));
    if (rejected) return kVectors ? e.template FillNan<T>(io.a, io.a_count) : Status();
    JAXMG_RETURN_IF_ERROR(e.template Prepare<T>(io.a));
    JAXMG_RETURN_IF_ERROR(e.template MatrixIn<T>(io.b));
    int info = 0;
    JAXMG_RETURN_IF_ERROR(e.template Sygvd<T>(kVectors, io.x, &info));  // agreed
    JAXMG_RETURN_IF_ERROR(e.WriteStatus(info, io.status));
    if (info != 0) {
      JAXMG_RETURN_IF_ERROR(e.template FillNan<T>(io.x, io.x_count));
      return kVectors ? e.template FillNan<T>(io.a, io.a_count) : Status();
    }
    return kVectors ? e.template VectorsOut<T>(io.a) : Status();
  }
};
using Sygvd = SygvdOf<true>;
using SygvdValues = SygvdOf<false>;

}  // namespace jaxmg::routines
