// solve_triangular: op(A) x = b for a triangular A (its lower or upper triangle; op none,
// transpose or conjugate transpose; its own or a unit diagonal), reading only that triangle.
//
// The engine redistributes (jaxmg/routines/solve_triangular.py asks for it: a relabeling permutes
// rows and columns apart, and the permuted matrix is no longer triangular), so it holds exactly
// M = Aᵀ, the shards read column-major: A's lower triangle is M's upper one, the diagonal the
// same. CallAttrs::lower: A's lower triangle; op: 0 N, 1 T, 2 C; unit_diagonal.
//
// b with its rows split like a's rows (RhsIn: the whole b, into the engine's layout of c = b):
//   op N: A x = b   <=>  Mᵀ x = b
//   op T: Aᵀ x = b  <=>  M x = b
//   op C: Aᴴ x = b  <=>  conj(M) x = b  <=>  M conj(x) = conj(b)  (c and x conjugated)
// b sharded like a (kMatrixRhs: N x K, both axes over the mesh): its shards read column-major are
// Bᵀ (K x N), its columns distributed like M's (RhsMatrixIn), and
//   op(A) X = B  <=>  Xᵀ op(A)ᵀ = Bᵀ, op(A)ᵀ = M, Mᵀ, Mᴴ for op N, T, C: the same letter from
// the right. Xᵀ written back into the shards (RhsMatrixOut) is X read row-major.
#pragma once

#include "routines/contract.h"

namespace jaxmg::routines {

template <bool kMatrixRhs>
struct SolveTriangularOf : RoutineTraits {
  static constexpr layout::Symmetry kSymmetry = layout::Symmetry::kGeneral;

  template <class E, class T>
  static Status Run(E& e, const CallAttrs& attrs, const CallBuffers<T>& io) {
    const int64_t op = attrs.op;  // (0, 1 or 2: checked where the attributes are decoded)
    if (e.plan().strategy != layout::Strategy::kRedistribute) {
      return JAXMG_ERROR("solve_triangular runs on a redistributed matrix");
    }
    const char uplo = attrs.lower ? 'U' : 'L';  // M = Aᵀ: A's lower triangle is M's upper
    const char diag = attrs.unit_diagonal ? 'U' : 'N';
    MatrixOf<E, T> m, c;
    JAXMG_RETURN_IF_ERROR(e.Prepare(io.a, &m));
    int info = 0;
    if (kMatrixRhs) {  // io.nrhs: this shard's columns of b, K / mesh_cols
      JAXMG_RETURN_IF_ERROR(e.RhsMatrixIn(io.b, io.nrhs * attrs.mesh_cols, &c));
      // c := c op(M)⁻¹
      JAXMG_RETURN_IF_ERROR(e.Trsm('R', uplo, "NTC"[op], diag, m, c, &info));
    } else {
      // Mᵀ z = c: c indexed by M's columns, z by its rows; M z = c the other way round.
      const Axis in = op == 0 ? Axis::kCols : Axis::kRows;
      JAXMG_RETURN_IF_ERROR(e.RhsIn(io.b, io.nrhs, in, /*conj=*/op == 2, &c));
      // c := op(M)⁻¹ c
      JAXMG_RETURN_IF_ERROR(e.Trsm('L', uplo, op == 0 ? 'T' : 'N', diag, m, c, &info));
    }
    JAXMG_RETURN_IF_ERROR(e.WriteStatus(info, io.status));
    if (info != 0) return e.FillNan(io.x, io.x_count);
    if (kMatrixRhs) return e.RhsMatrixOut(c, io.x);
    const Axis out = op == 0 ? Axis::kRows : Axis::kCols;
    return e.RhsOut(c, io.x, out, /*conj=*/op == 2);
  }
};
using SolveTriangular = SolveTriangularOf<false>;
using SolveTriangularMatrix = SolveTriangularOf<true>;

}  // namespace jaxmg::routines
