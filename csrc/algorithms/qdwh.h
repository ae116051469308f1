// QDWH's iteration, written once over a backend's distributed steps: the GPU engine's (cuBLASMp,
// cuSOLVERMp, its kernels and NCCL) and the CPU engine's (PBLAS, ScaLAPACK, host loops and MPI).
// routines/polar.h holds the mathematics and the schedule, which call these steps through the
// engines' PolarBegin, PolarQr, PolarCholesky and PolarEnd.
//
// Every operand is a matrix in t x t tiles over the backend's 2-D grid (a Tiled). U, the engine
// matrix, is the iterate. Each step enters every collective on every rank; a local error (an
// element step, a copy, the test hook's "polar:<rank>:<step>", with step 0 for the bounds and
// 1, 2, ... for the iterations) is kept and agreed at the step's end, so every rank returns the
// same error.
//
// The backend B, for the scalar T (collective steps marked c; the others touch this rank's part
// only; sums point into the backend's memory):
//   Copy<T>(T* dst, ldd, const T* src, lds, m, n)     dst := src, m x n local arrays
//   AbsSums<T>(u, double* sums)           sums[0, n) := U's column sums of |u_ij| over this rank's
//                                         entries, sums[n, n + m) := its row sums
//   SumOverGrid(double* sums, count, double* host)    c  host := sums, summed over the ranks
//   AgreeOnValue(double*)                 c  the largest of the ranks' readings, on every rank
//   MaxOverGrid(int64_t*)                 c  the largest of the ranks' values
//   Scale<T>(u, double s)                 U := s U
//   SetIdentity<T>(z)                     Z := I
//   SumSquares<T>(w, double* sum)         *sum := Σ |w_ij|² over this rank's entries
//   AxpbyChange<T>(u, w, e, coef, double* sum)
//                                         U := e U + coef W; *sum := Σ |Δu_ij|² (this rank's)
//   QdwhStack<T>(u, sqrt_c, y, top)       Y := [√c U; 0; I] (this rank's top rows of U, then I)
//   Gram<T>(c, u, beta, z)                c  Z := c UᴴU + beta Z (at least its lower triangle)
//   PPotrf<T>(z, int64_t* info)           c  Z := L, Z = L Lᴴ (lower); *info > 0 where this rank
//                                            saw the factorization fail
//   PQr<T>(y, T* tau)                     c  Y := the Q of Y's Householder QR
//   PProduct<T>(op_a, op_b, m, n, k, alpha, a, b, beta, c)
//                                         c  C := alpha op_a(A) op_b(B) + beta C ('N' or 'C')
//   PTrsmRight<T>(adjoint, l, w)          c  W := W op(L)⁻¹, L lower (op: ᴴ with adjoint)
//   PSymmRight<T>(alpha, g, w, beta, u)   c  U := alpha W G + beta U, G Hermitian as Gram left it
//   PHermitianPart<T>(z, h)               c  H := ½ (Z + Zᴴ)
//   Agree(const char* algorithm, const Status& local)   c
// and the distributed products of algorithms/inverses.h (for L⁻¹).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "algorithms/inverses.h"
#include "common/deferred.h"
#include "common/status.h"

namespace jaxmg::algorithms {

// A matrix in t x t tiles over the backend's 2-D grid: this rank's local part p (column-major,
// leading dimension ld()) of the rows x cols matrix that d distributes, used from its global row
// `row` (1-based, at a tile boundary) on.
template <typename T>
struct Tiled {
  T* p = nullptr;
  Distribution d;
  int64_t row = 1;
  int64_t rows() const { return d.rows; }
  int64_t cols() const { return d.cols; }
  int64_t lr() const { return d.local_rows(); }  // possibly none
  int64_t lc() const { return d.local_cols(); }
  int64_t t() const { return d.tile(); }
  int64_t ld() const { return d.ld; }
  int64_t count() const { return lr() * lc(); }
};

// QDWH's operands, in the backend's memory: U (m x n, the iterate), A (distributed as U: the
// input, kept for H), W (distributed as U; n x n L⁻¹ in the bounds' step), Z (n x n), the stacked
// Y = [√c U; 0; I] of the QR steps ((mp + n) x n, mp = m rounded up to whole rounds of tiles over
// the process rows, so that every rank holds `top` = mp / nprow rows of U and zeros, then its rows
// of I, and Q₂ starts at Y's row mp + 1 on a tile boundary) with its Householder scalars, sums
// (n + m + 1 doubles), and the engine's count of the steps so far (the test hook's step).
template <typename T>
struct QdwhWork {
  Tiled<T> u, a, w, z, y;
  int64_t top = 0, mp = 0;
  T* tau = nullptr;
  double* sums = nullptr;
  int64_t* steps = nullptr;
  int rank = 0;
};

namespace detail {

// W's buffer as an n x n matrix distributed as Z.
template <typename T>
Tiled<T> SquareView(const QdwhWork<T>& q) {
  Tiled<T> s = q.z;
  s.p = q.w.p;
  return s;
}

// The sum over the ranks of the double at *sum (in the backend's memory), the same on every rank.
template <class B>
Status SumOf(B& b, double* sum, double* out) {
  JAXMG_RETURN_IF_ERROR(b.SumOverGrid(sum, 1, out));
  return b.AgreeOnValue(out);
}

}  // namespace detail

// U := A / α, α ≥ ‖A‖₂ (A kept first with keep_a), and *lower := 1 / ‖L⁻¹‖_F for UᴴU = L Lᴴ, a
// lower bound of σ_min(U) (0 where U = 0 or the factorization failed).
//
// α is (‖A‖₁ ‖A‖∞)^½ tightened by the Gram matrix G = UᴴU: ‖U‖₂² = λ_max(G) ≤ tr(G³)^⅓ and
// tr(G³) = ‖U G‖_F², one product (W := U G) that bounds ‖U‖₂ within N^⅙ where the first bound
// can be off by √N: a random matrix's is about 0.4 √N, its tightened one about 3 at N = 8192.
// Both are upper bounds, so every singular value of U stays in (0, 1], and the larger σ_min
// bound that follows takes fewer QR steps (routines/polar.h's schedule).
template <typename T, class B>
Status QdwhBounds(B& b, const QdwhWork<T>& q, bool keep_a, double* lower) {
  const int64_t m = q.u.rows(), n = q.u.cols();
  *lower = 0;
  *q.steps = 0;
  Deferred failed;
  failed.Step("polar", q.rank, 0);
  failed.Run([&]() -> Status {
    if (keep_a) JAXMG_RETURN_IF_ERROR(b.Copy(q.a.p, q.a.ld(), q.u.p, q.u.ld(), q.u.lr(), q.u.lc()));
    return b.AbsSums(q.u, q.sums);
  });
  std::vector<double> host(static_cast<size_t>(n + m));
  JAXMG_RETURN_IF_ERROR(b.SumOverGrid(q.sums, n + m, host.data()));
  JAXMG_RETURN_IF_ERROR(b.Agree("polar", failed.status()));
  double norms = *std::max_element(host.begin(), host.begin() + n) *
                 *std::max_element(host.begin() + n, host.end());
  JAXMG_RETURN_IF_ERROR(b.AgreeOnValue(&norms));
  if (norms == 0) return Status();  // U = 0 stays 0
  failed.Run([&] { return b.Scale(q.u, 1 / std::sqrt(norms)); });
  // G in Z; W := U G, ‖W‖_F² = tr(G³) ≥ ‖U‖₂⁶ (rounding: the 1 % margin).
  JAXMG_RETURN_IF_ERROR(b.Gram(1.0, q.u, 0.0, q.z));
  JAXMG_RETURN_IF_ERROR(b.PSymmRight(1.0, q.z, q.u, 0.0, q.w));
  double* sum = q.sums + n + m;
  failed.Run([&] { return b.SumSquares(q.w, sum); });
  double cubes = 0;
  JAXMG_RETURN_IF_ERROR(detail::SumOf(b, sum, &cubes));
  const double norm = 1.01 * std::pow(cubes, 1.0 / 6);  // ≥ ‖U‖₂, the same on every rank
  if (std::isfinite(norm) && norm > 0 && norm < 1) {
    failed.Run([&] { return b.Scale(q.u, 1 / norm); });
    failed.Run([&] { return b.Scale(q.z, 1 / (norm * norm)); });
  }
  // L in Z, L⁻¹ in W's buffer.
  int64_t gave_up = 0;
  JAXMG_RETURN_IF_ERROR(b.PPotrf(q.z, &gave_up));
  gave_up = gave_up != 0 ? 1 : 0;
  JAXMG_RETURN_IF_ERROR(b.MaxOverGrid(&gave_up));
  if (gave_up != 0) return b.Agree("polar", failed.status());  // no bound: ℓ₀ = ε
  const Tiled<T> inverse = detail::SquareView(q);
  failed.Run([&] { return b.SetIdentity(inverse); });
  JAXMG_RETURN_IF_ERROR(TriangularInverse<T>(b, q.z.d, q.z.p, inverse.p, false, false, &failed));
  failed.Run([&] { return b.SumSquares(inverse, sum); });
  double squares = 0;
  JAXMG_RETURN_IF_ERROR(detail::SumOf(b, sum, &squares));
  JAXMG_RETURN_IF_ERROR(b.Agree("polar", failed.status()));
  if (std::isfinite(squares) && squares > 0) *lower = 1 / std::sqrt(squares);
  return Status();
}

// A QR step: U := e U + coef Q₁ Q₂ᴴ, [√c U; I] = [Q₁; Q₂] R.
template <typename T, class B>
Status QdwhQrStep(B& b, const QdwhWork<T>& q, double sqrt_c, double coef, double e) {
  const int64_t m = q.u.rows(), n = q.u.cols();
  Deferred failed;
  failed.Step("polar", q.rank, ++*q.steps);
  failed.Run([&] { return b.QdwhStack(q.u, sqrt_c, q.y, q.top); });
  JAXMG_RETURN_IF_ERROR(b.PQr(q.y, q.tau));
  Tiled<T> q2 = q.y;
  q2.row = q.mp + 1;
  JAXMG_RETURN_IF_ERROR(b.PProduct('N', 'C', m, n, n, coef, q.y, q2, e, q.u));
  return b.Agree("polar", failed.status());
}

// A Cholesky step: U := e U + coef U Z⁻¹, Z = I + c UᴴU = L Lᴴ, and *change := ‖ΔU‖_F. A NaN in
// Z leaves NaN in U, which the engine's end reports.
template <typename T, class B>
Status QdwhCholeskyStep(B& b, const QdwhWork<T>& q, double c, double coef, double e,
                        double* change) {
  const int64_t m = q.u.rows(), n = q.u.cols();
  Deferred failed;
  failed.Step("polar", q.rank, ++*q.steps);
  // Z's start and W's copy are made even after a local failure, so that the collective steps'
  // inputs stay well formed.
  failed.Keep(b.SetIdentity(q.z));
  JAXMG_RETURN_IF_ERROR(b.Gram(c, q.u, 1.0, q.z));
  int64_t factored = 0;
  JAXMG_RETURN_IF_ERROR(b.PPotrf(q.z, &factored));
  // W := U Z⁻¹ = U L⁻ᴴ L⁻¹.
  failed.Keep(b.Copy(q.w.p, q.w.ld(), q.u.p, q.u.ld(), q.u.lr(), q.u.lc()));
  JAXMG_RETURN_IF_ERROR(b.PTrsmRight(true, q.z, q.w));
  JAXMG_RETURN_IF_ERROR(b.PTrsmRight(false, q.z, q.w));
  double* sum = q.sums + n + m;
  failed.Run([&] { return b.AxpbyChange(q.u, q.w, e, coef, sum); });
  double squares = 0;
  JAXMG_RETURN_IF_ERROR(detail::SumOf(b, sum, &squares));
  JAXMG_RETURN_IF_ERROR(b.Agree("polar", failed.status()));
  *change = std::sqrt(squares);
  return Status();
}

// The Newton–Schulz step: U := 1.5 U − 0.5 W G, G = UᴴU (in Z), W a copy of U.
template <typename T, class B>
Status QdwhNewtonSchulz(B& b, const QdwhWork<T>& q) {
  Deferred failed;
  failed.Step("polar", q.rank, ++*q.steps);
  JAXMG_RETURN_IF_ERROR(b.Gram(1.0, q.u, 0.0, q.z));
  failed.Keep(b.Copy(q.w.p, q.w.ld(), q.u.p, q.u.ld(), q.u.lr(), q.u.lc()));
  JAXMG_RETURN_IF_ERROR(b.PSymmRight(-0.5, q.z, q.w, 1.5, q.u));
  return b.Agree("polar", failed.status());
}

// H := ½ (G + Gᴴ), G = Uᴴ A (in Z), H n x n distributed as Z.
template <typename T, class B>
Status QdwhHermitianFactor(B& b, const QdwhWork<T>& q, const Tiled<T>& h) {
  const int64_t m = q.u.rows(), n = q.u.cols();
  JAXMG_RETURN_IF_ERROR(b.PProduct('C', 'N', n, n, m, 1.0, q.u, q.a, 0.0, q.z));
  return b.PHermitianPart(q.z, h);
}

}  // namespace jaxmg::algorithms
