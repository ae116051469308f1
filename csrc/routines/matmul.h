// matmul: C = op_a(A) op_b(B) for two N x N matrices sharded alike (op: none, transpose or
// conjugate transpose), with the engine's distributed product (p?gemm, cublasMpGemm): the
// products the derivative rules of the inverses and eigensolvers need, without XLA collectives
// of matrix size.
//
// The engine holds Mx = Xᵀ for each matrix (the shards read column-major), both redistributed
// (MatrixIn for B); Cᵀ = op_b(B)ᵀ op_a(A)ᵀ = op_b(Mb) op_a(Ma) with the same letter for each
// operand (Nᵀ ~ N, Xᵀ ~ Mx under T, (Xᴴ)ᵀ = conj(X) = Mxᴴ under C). The product Cᵀ is
// written back into the shard (ShardOut): read row-major, C.
#pragma once

#include "routines/contract.h"

namespace jaxmg::routines {

template <char kOpA, char kOpB>
struct MatmulOf : RoutineTraits {
  static constexpr layout::Symmetry kSymmetry = layout::Symmetry::kGeneral;
  static constexpr bool kOwnSolution = true;
  static constexpr bool kSecondMatrix = true;

  template <class E, class T>
  static Status Run(E& e, const CallAttrs& attrs, const CallBuffers<T>& io) {
    if (e.plan().strategy != layout::Strategy::kRedistribute) {
      return JAXMG_ERROR("matmul runs on redistributed matrices");
    }
    MatrixOf<E, T> ma, mb, c;
    JAXMG_RETURN_IF_ERROR(e.Prepare(io.a, &ma));
    JAXMG_RETURN_IF_ERROR(e.MatrixIn(io.b, &mb));
    JAXMG_RETURN_IF_ERROR(e.Gemm(kOpB, mb, kOpA, ma, &c));  // c := op_b(Mb) op_a(Ma)
    return e.ShardOut(c, io.a);
  }
};
using MatmulNN = MatmulOf<'N', 'N'>;
using MatmulCN = MatmulOf<'C', 'N'>;  // Aᴴ B
using MatmulNC = MatmulOf<'N', 'C'>;  // A Bᴴ

}  // namespace jaxmg::routines
