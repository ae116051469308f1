// polar: the polar decomposition A = Up H of a tall matrix (M x N, M >= N) by QDWH, the
// dynamically weighted Halley iteration (Nakatsukasa, Bai and Gygi, SIAM J. Matrix Anal. Appl.
// 31 (2010) 2700–2720), on both engines from distributed QR, Cholesky, triangular solves and
// products: the schedule below, the dense steps in each engine.
//
// U₀ = A / α with α = (‖A‖₁ ‖A‖∞)^½ ≥ ‖A‖₂, so every singular value is in (0, 1]. With ℓ a
// lower bound of U's smallest singular value, each step maps U = W diag(σ) Vᴴ to
// W diag(f(σ)) Vᴴ with f(x) = x (a + b x²) / (1 + c x²), the weights a, b, c chosen from ℓ so
// that [ℓ, 1] lands in [f(ℓ), 1], and ℓ := f(ℓ):
//   c > 100: U := e U + (a − e)/√c Q₁ Q₂ᴴ with [√c U; I] = [Q₁; Q₂] R  (PolarQr; stable for large
//            c, 2 to 3 times the flops of the other form),
//   else:    U := e U + (a − e) U Z⁻¹ with Z = I + c UᴴU  (PolarCholesky: one Cholesky
//            factorization and two triangular solves),
// e = b / c. The fewer QR steps the better, and their number depends on ℓ₀ only: ℓ₀ = ε takes
// two QR steps and four Cholesky steps in double precision (as jax.scipy.linalg.polar does),
// ℓ₀ ≥ 10⁻⁵ one QR step, ℓ₀ ≥ 0.1 none. So PolarBegin also bounds σ_min(U) from below, cheaply
// and rigorously: with UᴴU = L Lᴴ, σ_min(U) = 1 / ‖L⁻¹‖₂ ≥ 1 / ‖L⁻¹‖_F (N³/3 flops for L⁻¹ after
// a Gram matrix and its Cholesky factorization). The bound is used where rounding cannot
// invalidate it (λ_min(UᴴU) well above (M + N) ε; below: ℓ₀ = ε). From ε, which bounds nothing,
// Halley's steps (a, b, c = 3, 1, 3) follow while ‖U − U_prev‖_F > (5ε)^⅓, ten steps in all at
// most (as in jax.scipy.linalg.polar); from a bound the schedule suffices. Then one Newton–Schulz
// step U := (3U − U UᴴU)/2 and H = ½ (UᴴA + AᴴU) (PolarEnd). A rank-deficient A keeps its null
// space: H is positive semi-definite and Up H = A.
//
// As gesvd (routines/gesvd.h) the engine matrix is A itself, redistributed into tiles of its
// exact extents; Up comes back through the plan (ShardOut), H through x (SquareRowsOut).
#pragma once

#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "common/environment.h"
#include "routines/contract.h"

namespace jaxmg::routines {

// One QDWH step: U := e U + coef · (Q₁ Q₂ᴴ for a QR step, U Z⁻¹ for a Cholesky step), where
// weight is √c for a QR step and c for a Cholesky step.
struct QdwhStep {
  bool qr;
  double weight, coef, e;
};

// The steps that take every singular value in [l0, 1] to within 5 eps of 1.
inline std::vector<QdwhStep> QdwhSchedule(double l0, double eps, int max_steps) {
  constexpr double kCholeskyFrom = 100;  // c at or below: the Cholesky form
  const double tol = 10 * eps / 2;
  std::vector<QdwhStep> steps;
  double l = l0;
  while (l + tol < 1 && static_cast<int>(steps.size()) < max_steps) {
    const double l2 = l * l;
    const double dd = std::cbrt(4 * (1 / l2 - 1) / l2);
    const double sqd = std::sqrt(1 + dd);
    const double a = sqd + std::sqrt(2 - dd + 2 * (2 - l2) / (l2 * sqd));
    const double b = (a - 1) * (a - 1) / 4, c = a + b - 1, e = b / c;
    l = l * (a + b * l2) / (1 + c * l2);
    if (c > kCholeskyFrom) {
      steps.push_back({true, std::sqrt(c), (a - e) / std::sqrt(c), e});
    } else {
      steps.push_back({false, c, a - e, e});
    }
  }
  return steps;
}

// QDWH on the engine matrix (Prepare'd): A = Up H, the engine matrix := Up (in place) and, with
// h, *hm := H; *q: the iteration's operands (PolarValues reads them after); info agreed (> 0: a
// non-finite entry of A or of Up).
template <class E, class T>
Status Qdwh(E& e, const MatrixOf<E, T>& u, bool h, typename E::QdwhOperands* q, MatrixOf<E, T>* hm,
            int* info) {
  constexpr int kMaxSteps = 10;
  double lower = 0;
  JAXMG_RETURN_IF_ERROR(e.PolarBegin(u, h, q, &lower, info));  // agreed
  if (*info != 0) return Status();
  const double eps = std::numeric_limits<RealOf<T>>::epsilon();
  // lower² = λ_min of the computed UᴴU, whose rounding moves it by (M + N) ε at most.
  const double mn = static_cast<double>(e.plan().engine_rows() + e.plan().cols.extent);
  const bool bounded = lower * lower > 10 * mn * eps;
  const double l0 = bounded ? 0.9 * lower : eps;
  const std::vector<QdwhStep> steps = QdwhSchedule(l0, eps, kMaxSteps);
  if (DebugLevel() > 0) {
    size_t qr = 0;
    for (const QdwhStep& s : steps) qr += s.qr ? 1 : 0;
    std::fprintf(stderr, "[jaxmg] polar: bound %.3g, l0 %.3g: %zu QR and %zu Cholesky steps\n",
                 lower, l0, qr, steps.size() - qr);
  }
  // ‖U − U_prev‖_F of the last Cholesky step, agreed (every rank takes the same branch).
  double change = std::numeric_limits<double>::infinity();
  for (const QdwhStep& s : steps) {
    if (s.qr) {
      JAXMG_RETURN_IF_ERROR(e.PolarQr(u, q, s.weight, s.coef, s.e));
      change = std::numeric_limits<double>::infinity();
    } else {
      JAXMG_RETURN_IF_ERROR(e.PolarCholesky(u, q, s.weight, s.coef, s.e, &change));
    }
  }
  // From a bound, the schedule has taken every singular value to within 5ε of 1; from ε,
  // which need not be one, Halley's steps go on until U stops moving.
  const double tol = std::cbrt(10 * eps / 2);
  for (size_t k = steps.size(); !bounded && change > tol && k < kMaxSteps; ++k) {
    JAXMG_RETURN_IF_ERROR(e.PolarCholesky(u, q, 3, 3 - 1.0 / 3, 1.0 / 3, &change));
  }
  return e.PolarEnd(u, q, h, hm, info);  // agreed
}

template <bool kH>
struct PolarOf : RoutineTraits {
  static constexpr layout::Symmetry kSymmetry = layout::Symmetry::kOrderedColumns;
  static constexpr bool kRectangular = true;
  static constexpr bool kWantsH = kH;  // x holds H's rows (else one unused element)

  template <class E, class T>
  static Status Run(E& e, const CallAttrs& attrs, const CallBuffers<T>& io) {
    if (e.plan().strategy != layout::Strategy::kRedistribute) {
      return JAXMG_ERROR("polar runs on a redistributed matrix");
    }
    MatrixOf<E, T> a, h;  // the engine matrix (A, then Up in place), H
    typename E::QdwhOperands q;
    JAXMG_RETURN_IF_ERROR(e.Prepare(io.a, &a));
    int info = 0;
    JAXMG_RETURN_IF_ERROR(Qdwh(e, a, kH, &q, &h, &info));
    JAXMG_RETURN_IF_ERROR(e.WriteStatus(info, io.status));
    if (info != 0) {
      JAXMG_RETURN_IF_ERROR(e.FillNan(io.x, io.x_count));
      return e.FillNan(io.a, io.a_count);
    }
    if (kH) {
      JAXMG_RETURN_IF_ERROR(e.SquareRowsOut(h, io.x, io.x_rows, io.x_count / io.x_rows));
    }
    return e.ShardOut(a, io.a);
  }
};
using Polar = PolarOf<true>;
using PolarUp = PolarOf<false>;

}  // namespace jaxmg::routines
