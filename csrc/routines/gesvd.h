// gesvd: the thin singular value decomposition A = U diag(s) Vᴴ of a tall matrix (M x N,
// M >= N): the engine's SVD, or for the singular values alone QDWH's polar decomposition
// A = Up H and H's eigenvalues.
//
// As for qr (routines/qr.h), jaxmg/routines/gesvd.py hands aᵀ, so the engine matrix is A
// itself, here always redistributed into block-cyclic tiles of its exact extents: a relabeled
// plan's padded rows and columns would take part in the null space of a rank-deficient A.
//   U (M x N) overwrites the engine matrix and comes back through the plan (ShardOut) in the
//   layout of aᵀ, which the Python side transposes back.
//   s and vh hold N rows (split like b's, or whole): the singular values, and Vᴴ
//   (SquareRowsOut).
#pragma once

#include "routines/contract.h"
#include "routines/polar.h"

namespace jaxmg::routines {

template <bool kU, bool kVt>
struct GesvdOf : RoutineTraits {
  static constexpr layout::Symmetry kSymmetry = layout::Symmetry::kOrderedColumns;
  static constexpr bool kRectangular = true;
  static constexpr bool kWantsVh = kVt;  // vh holds Vᴴ (else one unused element)

  template <class E, class T>
  static Status Run(E& e, const CallAttrs& attrs, const CallBuffers<T>& io) {
    if (e.plan().strategy != layout::Strategy::kRedistribute) {
      return JAXMG_ERROR("gesvd runs on a redistributed matrix");
    }
    MatrixOf<E, T> a, vt;  // the engine matrix (then U), Vᴴ
    JAXMG_RETURN_IF_ERROR(e.Prepare(io.a, &a));
    if (!kU && !kVt) {
      // s alone: A = Up H (QDWH, routines/polar.h), then H's eigenvalues without vectors (H =
      // V diag(s) Vᴴ): a fraction of what an SVD's values-only path costs where, as
      // cuSOLVERMp's, it goes through the polar decomposition and an eigensolver with vectors.
      int info = 0;
      MatrixOf<E, T> h;
      typename E::QdwhOperands q;
      JAXMG_RETURN_IF_ERROR(Qdwh(e, a, /*h=*/true, &q, &h, &info));
      if (info == 0) {
        JAXMG_RETURN_IF_ERROR(e.PolarValues(h, &q, io.s, io.x_rows, 1, &info));
      }
      JAXMG_RETURN_IF_ERROR(e.WriteStatus(info, io.status));
      return info != 0 ? e.FillNan(io.s, io.x_rows) : Status();
    }
    int info = 0;
    JAXMG_RETURN_IF_ERROR(e.Gesvd(&a, kU, kVt, io.s, io.x_rows, 1, &vt, &info));  // agreed
    JAXMG_RETURN_IF_ERROR(e.WriteStatus(info, io.status));
    if (info != 0) {
      JAXMG_RETURN_IF_ERROR(e.FillNan(io.s, io.x_rows));
      if (kVt) JAXMG_RETURN_IF_ERROR(e.FillNan(io.vh, io.vh_count));
      return kU ? e.FillNan(io.a, io.a_count) : Status();
    }
    if (kVt) {
      JAXMG_RETURN_IF_ERROR(e.SquareRowsOut(vt, io.vh, io.x_rows, io.vh_count / io.x_rows));
    }
    return kU ? e.ShardOut(a, io.a) : Status();
  }
};
using Gesvd = GesvdOf<true, true>;
using GesvdU = GesvdOf<true, false>;
using GesvdVh = GesvdOf<false, true>;
using GesvdValues = GesvdOf<false, false>;

}  // namespace jaxmg::routines
