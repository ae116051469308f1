// potri: the inverse of a symmetric (Hermitian) positive-definite matrix, in the matrix's own
// sharding (the result aliases `a`), with log det A.
//
// After the Cholesky factorization B = L Lᴴ the engine forms Y = B⁻¹ distributed like B (never
// gathered; CholeskyInverse: on GPUs W = L⁻¹ and Y = Wᴴ W by blocks that skip W's zero
// triangle, on CPUs the solve B Y = I), then writes Y back into the shards in the JAX layout. B = Π
// conj(A) Πᵀ (potrs.h), so Y = Π conj(A)⁻¹ Πᵀ, and conj(A⁻¹) read column-major is A⁻¹ (Hermitian)
// read row-major: ShardOut undoes the relabeling (or redistribution) and nothing else.
#pragma once

#include "routines/contract.h"
#include "routines/potrs.h"

namespace jaxmg::routines {

struct Potri : RoutineTraits {
  static constexpr layout::Symmetry kSymmetry = layout::Symmetry::kSymmetric;

  template <class E, class T>
  static Status Run(E& e, const CallAttrs& attrs, const CallBuffers<T>& io) {
    MatrixOf<E, T> l, y;
    JAXMG_RETURN_IF_ERROR(Posv::Factor(e, attrs, io, io.a, io.a_count, &l));
    if (l.empty()) return Status();
    JAXMG_RETURN_IF_ERROR(e.CholeskyInverse(l, &y));  // y := B⁻¹
    return e.ShardOut(y, io.a);
  }
};

}  // namespace jaxmg::routines
