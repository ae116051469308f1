// syevd and eigvalsh: the eigenvalues (ascending) and eigenvectors of a Hermitian matrix.
//
// The engine redistributes (jaxmg/routines/syevd.py asks for it): relabeling would be harmless
// to the eigenvalues, but its padding would add eigenvalues of its own and the eigenvectors'
// rows and columns would need different maps. The engine matrix M is what the shards hold read
// column-major, Aᵀ = conj(A): its eigenvectors are conj(V). The shard is written back as the
// eigenvectors' conjugate transpose Zᴴ, read row-major: conj(Z) = V, eigenvectors in columns
// (VectorsOut). The eigenvalues come in x (n x 1, whole on every device, real parts).
#pragma once

#include "routines/contract.h"
#include "routines/potrs.h"

namespace jaxmg::routines {

// kGeneralized: the problem M z = λ K z with the second matrix K (b, sharded like a; see
// routines/sygvd.h).
template <bool kVectors, bool kGeneralized = false>
struct SyevdOf : RoutineTraits {
  static constexpr layout::Symmetry kSymmetry = layout::Symmetry::kSymmetric;
  static constexpr bool kOwnSolution = true;
  static constexpr bool kSecondMatrix = kGeneralized;

  template <class E, class T>
  static Status Run(E& e, const CallAttrs& attrs, const CallBuffers<T>& io) {
    if (e.plan().strategy != layout::Strategy::kRedistribute) {
      return JAXMG_ERROR("syevd and sygvd run on a redistributed matrix");
    }
    bool rejected = false;
    JAXMG_RETURN_IF_ERROR(Posv::RejectAsymmetric(e, attrs, io, io.x, io.x_count, &rejected));
    if (rejected) return kVectors ? e.FillNan(io.a, io.a_count) : Status();
    MatrixOf<E, T> m, z;  // the engine matrix, its eigenvectors
    JAXMG_RETURN_IF_ERROR(e.Prepare(io.a, &m));
    int info = 0;
    if constexpr (kGeneralized) {
      MatrixOf<E, T> k;
      JAXMG_RETURN_IF_ERROR(e.MatrixIn(io.b, &k));
      JAXMG_RETURN_IF_ERROR(e.Sygvd(m, k, kVectors, attrs.subset, io.x, &z, &info));  // agreed
    } else {
      JAXMG_RETURN_IF_ERROR(e.Eigh(m, kVectors, attrs.subset, io.x, &z, &info));  // agreed
    }
    JAXMG_RETURN_IF_ERROR(e.WriteStatus(info, io.status));
    if (info != 0) {
      JAXMG_RETURN_IF_ERROR(e.FillNan(io.x, io.x_count));
      return kVectors ? e.FillNan(io.a, io.a_count) : Status();
    }
    // m, spent, is VectorsOut's workspace.
    return kVectors ? e.VectorsOut(z, m, io.a) : Status();
  }
};
using Syevd = SyevdOf<true>;
using Eigvalsh = SyevdOf<false>;

}  // namespace jaxmg::routines
