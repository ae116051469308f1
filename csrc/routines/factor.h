// Factor once, solve many: cho_factor / cho_solve and lu_factor / lu_solve with a kept factor.
//
// A factor routine leaves the factored engine matrix in its result a_work (FactorOut): in the
// shard itself where the engine worked there (a_work aliases a), the padded engine-local matrix
// where the engine padded (a_work is then larger than the shard: padded rows of an LU factor
// are pivoted like any other, so they cannot be dropped), or back in the JAX layout where it
// redistributed; LU's pivots in `pivots_out`, and log |det| and the status as the solves do. A
// solve routine reads that factor (never writes it: `a` is not aliased) through Adopt, and
// solves as potrs and lu_solve do.
#pragma once

#include "routines/contract.h"
#include "routines/lu_solve.h"
#include "routines/potrs.h"

namespace jaxmg::routines {

struct ChoFactor : RoutineTraits {
  static constexpr layout::Symmetry kSymmetry = layout::Symmetry::kSymmetric;

  template <class E, class T>
  static Status Run(E& e, const CallAttrs& attrs, const CallBuffers<T>& io) {
    MatrixOf<E, T> l;
    JAXMG_RETURN_IF_ERROR(Posv::Factor(e, attrs, io, io.a_out, io.a_out_count, &l));
    if (l.empty()) return Status();
    return e.FactorOut(l, io.a_out, io.a_out_count);
  }
};

struct ChoSolve : RoutineTraits {
  static constexpr layout::Symmetry kSymmetry = layout::Symmetry::kSymmetric;
  static constexpr bool kReadsFactor = true;

  template <class E, class T>
  static Status Run(E& e, const CallAttrs& attrs, const CallBuffers<T>& io) {
    MatrixOf<E, T> l;
    JAXMG_RETURN_IF_ERROR(e.Adopt(io.a_in, io.a_count, Factorization::kCholesky, &l));
    return Posv::Solve(e, io, l);
  }
};

struct LuFactor : RoutineTraits {
  static constexpr layout::Symmetry kSymmetry = layout::Symmetry::kGeneral;

  template <class E, class T>
  static Status Run(E& e, const CallAttrs& attrs, const CallBuffers<T>& io) {
    if (io.pivots_out_count != e.plan().engine_rows()) {
      return JAXMG_ERROR("lu_factor: the pivots buffer has " + std::to_string(io.pivots_out_count) +
                         " entries, the engine matrix " + std::to_string(e.plan().engine_rows()));
    }
    MatrixOf<E, T> lu;
    typename E::Pivots piv;
    int info = 0;
    JAXMG_RETURN_IF_ERROR(LuSolve::Factor(e, io, &lu, &piv, &info));
    JAXMG_RETURN_IF_ERROR(e.SignLogDet(lu, piv, io.sign, io.logdet));
    JAXMG_RETURN_IF_ERROR(e.PivotsOut(lu, piv, io.pivots_out));
    if (info != 0) return e.FillNan(io.a_out, io.a_out_count);
    return e.FactorOut(lu, io.a_out, io.a_out_count);
  }
};

// The solve with a kept LU factor: A x = b, or Aᵀ x = b (kTranspose: the transposed solve a
// derivative rule needs).
template <bool kTranspose>
struct LuSolveKept : RoutineTraits {
  static constexpr layout::Symmetry kSymmetry = layout::Symmetry::kGeneral;
  static constexpr bool kReadsFactor = true;

  template <class E, class T>
  static Status Run(E& e, const CallAttrs& attrs, const CallBuffers<T>& io) {
    if (io.pivots_in_count != e.plan().engine_rows()) {
      return JAXMG_ERROR("lu_solve: the factor's pivots have " +
                         std::to_string(io.pivots_in_count) + " entries, the engine matrix " +
                         std::to_string(e.plan().engine_rows()));
    }
    MatrixOf<E, T> lu;
    typename E::Pivots piv;
    JAXMG_RETURN_IF_ERROR(e.Adopt(io.a_in, io.a_count, Factorization::kLu, &lu));
    JAXMG_RETURN_IF_ERROR(e.PivotsIn(io.pivots_in, &lu, &piv));
    return LuSolve::Solve(e, attrs, io, lu, piv, kTranspose);
  }
};
using LuSolveFactored = LuSolveKept<false>;
using LuSolveFactoredTransposed = LuSolveKept<true>;

}  // namespace jaxmg::routines
