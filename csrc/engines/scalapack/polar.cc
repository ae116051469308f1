// The CPU engine's SVD and polar steps: p?gesvd, and QDWH's steps (the schedule is
// routines/qdwh.py's) over ScaLAPACK and PBLAS.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "algorithms/inverses.h"
#include "common/scalar.h"
#include "engines/scalapack/backend.h"
#include "engines/scalapack/engine.h"
#include "engines/scalapack/engine_util.h"

namespace jaxmg::scalapack {

template <typename T>
Status Engine::Gesvd(bool vectors_u, bool vectors_vt, void* x, int64_t x_rows, int64_t x_cols,
                     int* info) {
  using R = RealOf<T>;
  const layout::Plan& plan = *plan_;
  if (plan.strategy != layout::Strategy::kRedistribute) {
    return JAXMG_ERROR("the SVD runs on a redistributed matrix");
  }
  const int64_t m = plan.engine_rows(), n = plan.cols.extent;
  // A non-finite input is agreed on first: the solver is not run on it.
  int bad = static_cast<int>(std::min<int64_t>(FirstNonFiniteColumn<T>(), INT32_MAX));
  JAXMG_RETURN_IF_ERROR(AllreduceMax(*grid_, &bad));
  std::vector<R> s(static_cast<size_t>(n), std::numeric_limits<R>::quiet_NaN());
  // U (m x n) is distributed like the matrix; Vᴴ is n x n.
  local_b_.assign(sizeof(T) * static_cast<size_t>(std::max<int64_t>(local_rows_ * local_cols_, 1)),
                  0);
  desc_b_ = desc_a_;
  JAXMG_RETURN_IF_ERROR(SquareMatrix<T>(&square_, &desc_square_, &square_rows_));
  *info = bad;
  if (bad == 0) {
    JAXMG_RETURN_IF_ERROR(scalapack::Gesvd<T>(vectors_u, vectors_vt, m, n, As<T>(work_), desc_a_,
                                              s.data(), As<T>(local_b_.data()), desc_b_,
                                              As<T>(square_.data()), desc_square_, info));
    for (int64_t i = 0; i < n && *info == 0; ++i) {
      if (!std::isfinite(s[i])) *info = static_cast<int>(std::min<int64_t>(i + 1, INT32_MAX));
    }
    JAXMG_RETURN_IF_ERROR(AllreduceMax(*grid_, info));
  }
  // The singular values into x's last column, for x's rows.
  const int64_t first = x_rows == n ? 0 : x_rows * (rhs_by_cols_ ? v_ : u_);
  T* out = As<T>(x);
  for (int64_t i = 0; i < x_rows; ++i) out[i * x_cols + x_cols - 1] = T(s[first + i]);
  if (vectors_u) {  // the engine matrix := U
    owned_.swap(local_b_);
    work_ = owned_.data();
  }
  return Status();
}

template <typename T>
Status Engine::PolarBegin(bool keep_a, double* lower, int* info) {
  int bad = static_cast<int>(std::min<int64_t>(FirstNonFiniteColumn<T>(), INT32_MAX));
  JAXMG_RETURN_IF_ERROR(AllreduceMax(*grid_, &bad));
  *info = bad;
  *lower = 0;
  if (bad != 0) return Status();
  const int64_t m = plan_->engine_rows(), n = plan_->cols.extent, t = plan_->tile;
  const int64_t count = local_rows_ * local_cols_;
  T* u = As<T>(work_);
  if (keep_a) {
    const char* a = static_cast<const char*>(work_);
    polar_a_.assign(a, a + sizeof(T) * std::max<int64_t>(count, 1));
  }
  // α = (‖A‖₁ ‖A‖∞)^½ from the column sums (n) and row sums (m) of |A|.
  std::vector<double> sums(static_cast<size_t>(n + m), 0.0);
  for (int64_t c = 0; c < local_cols_; ++c) {
    const int64_t gc = CyclicGlobal(c, t, grid_->npcol, grid_->mycol);
    for (int64_t r = 0; r < local_rows_; ++r) {
      const double v = std::abs(std::complex<double>(u[r + c * local_rows_]));
      sums[gc] += v;
      sums[n + CyclicGlobal(r, t, grid_->nprow, grid_->myrow)] += v;
    }
  }
  JAXMG_RETURN_IF_ERROR(AllreduceSum<double>(*grid_, sums.data(), n + m));
  const double one_norm = *std::max_element(sums.begin(), sums.begin() + n);
  const double inf_norm = *std::max_element(sums.begin() + n, sums.end());
  if (one_norm == 0) return SquareMatrix<T>(&polar_z_, &desc_z_, &z_rows_);  // U = 0 stays 0
  const auto scale = static_cast<RealOf<T>>(1 / std::sqrt(one_norm * inf_norm));
  for (int64_t i = 0; i < count; ++i) u[i] = u[i] * scale;
  // The bound 1 / ‖L⁻¹‖_F, UᴴU = L Lᴴ.
  JAXMG_RETURN_IF_ERROR(SquareMatrix<T>(&polar_z_, &desc_z_, &z_rows_));
  const char adjoint = Scalar<T>::kParts == 2 ? 'C' : 'T';
  T* z = As<T>(polar_z_.data());
  JAXMG_RETURN_IF_ERROR(
      scalapack::Gemm<T>(adjoint, 'N', n, n, m, T(1), u, desc_a_, u, desc_a_, T(0), z, desc_z_));
  int potrf = 0;
  JAXMG_RETURN_IF_ERROR(scalapack::Potrf<T>(n, z, desc_z_, &potrf));
  JAXMG_RETURN_IF_ERROR(AllreduceMax(*grid_, &potrf));
  if (potrf != 0) return Status();
  std::vector<T> w(static_cast<size_t>(std::max<int64_t>(z_rows_ * local_cols_, 1)), T(0));
  for (int64_t c = 0; c < local_cols_; ++c) {
    const int64_t gc = CyclicGlobal(c, t, grid_->npcol, grid_->mycol);
    for (int64_t r = 0; r < z_rows_; ++r) {
      if (CyclicGlobal(r, t, grid_->nprow, grid_->myrow) == gc) w[r + c * z_rows_] = T(1);
    }
  }
  // W := L⁻¹ by the blocked triangular inverse (algorithms/inverses.h: N³/3 flops, against N³
  // for the solve with the identity), as on the GPU engine.
  Backend backend(*grid_);
  Deferred failed;
  JAXMG_RETURN_IF_ERROR(algorithms::TriangularInverse<T>(backend, SquareOf(n, z_rows_), z, w.data(),
                                                         false, false, &failed));
  JAXMG_RETURN_IF_ERROR(backend.Agree("polar", failed.status()));
  double sum = 0;
  for (int64_t i = 0; i < z_rows_ * local_cols_; ++i) sum += std::norm(std::complex<double>(w[i]));
  JAXMG_RETURN_IF_ERROR(AllreduceSum<double>(*grid_, &sum, 1));
  if (std::isfinite(sum) && sum > 0) *lower = 1 / std::sqrt(sum);
  return Status();
}

template <typename T>
Status Engine::PolarQr(double sqrt_c, double coef, double e) {
  // Y = [sqrt_c U; 0; I] ((mp + n) x n, mp = m rounded up to whole rounds of tiles over the
  // process rows): each process holds its rows of U (local_rows_), zeros to mp / nprow, then its
  // rows of I. Zero rows change neither R nor the other rows of Q; Q₁ (the first m rows) and Q₂
  // (from row mp) are views of Y with its leading dimension.
  const int64_t m = plan_->engine_rows(), n = plan_->cols.extent, t = plan_->tile;
  const int64_t round = t * grid_->nprow, mp = (m + round - 1) / round * round;
  const int64_t top = mp / grid_->nprow;
  const int64_t bottom = CyclicLocalExtent(n, t, grid_->myrow, grid_->nprow);
  const int64_t ly = std::max<int64_t>(top + bottom, 1), lc = local_cols_;
  std::vector<T> y(static_cast<size_t>(ly * std::max<int64_t>(lc, 1)), T(0));
  const T* u = As<T>(work_);
  for (int64_t c = 0; c < lc; ++c) {
    const int64_t gc = CyclicGlobal(c, t, grid_->npcol, grid_->mycol);
    for (int64_t r = 0; r < local_rows_; ++r) {
      y[r + c * ly] = static_cast<RealOf<T>>(sqrt_c) * u[r + c * local_rows_];
    }
    for (int64_t r = 0; r < bottom; ++r) {
      if (CyclicGlobal(r, t, grid_->nprow, grid_->myrow) == gc) y[top + r + c * ly] = T(1);
    }
  }
  Descriptor desc_y, desc_q1, desc_q2;
  JAXMG_RETURN_IF_ERROR(MakeDescriptor(*grid_, mp + n, n, t, t, ly, &desc_y));
  JAXMG_RETURN_IF_ERROR(MakeDescriptor(*grid_, m, n, t, t, ly, &desc_q1));
  JAXMG_RETURN_IF_ERROR(MakeDescriptor(*grid_, n, n, t, t, ly, &desc_q2));
  std::vector<T> tau(static_cast<size_t>(std::max<int64_t>(lc, 1)));
  int info = 0;
  JAXMG_RETURN_IF_ERROR(scalapack::Geqrf<T>(mp + n, n, y.data(), desc_y, tau.data(), &info));
  JAXMG_RETURN_IF_ERROR(scalapack::Orgqr<T>(mp + n, n, y.data(), desc_y, tau.data(), &info));
  const char adjoint = Scalar<T>::kParts == 2 ? 'C' : 'T';
  return scalapack::Gemm<T>('N', adjoint, m, n, n, T(coef), y.data(), desc_q1, y.data() + top,
                            desc_q2, T(e), As<T>(work_), desc_a_);
}

template <typename T>
Status Engine::PolarCholesky(double c, double coef, double e, double* change) {
  const int64_t m = plan_->engine_rows(), n = plan_->cols.extent, t = plan_->tile;
  const int64_t count = local_rows_ * local_cols_;
  const char adjoint = Scalar<T>::kParts == 2 ? 'C' : 'T';
  // Z := I + c UᴴU, then its Cholesky factor L (lower).
  T* z = As<T>(polar_z_.data());
  std::fill(z, z + z_rows_ * local_cols_, T(0));
  for (int64_t col = 0; col < local_cols_; ++col) {
    const int64_t gc = CyclicGlobal(col, t, grid_->npcol, grid_->mycol);
    for (int64_t r = 0; r < z_rows_; ++r) {
      if (CyclicGlobal(r, t, grid_->nprow, grid_->myrow) == gc) z[r + col * z_rows_] = T(1);
    }
  }
  T* u = As<T>(work_);
  JAXMG_RETURN_IF_ERROR(
      scalapack::Gemm<T>(adjoint, 'N', n, n, m, T(c), u, desc_a_, u, desc_a_, T(1), z, desc_z_));
  int info = 0;
  JAXMG_RETURN_IF_ERROR(scalapack::Potrf<T>(n, z, desc_z_, &info));
  // W := U Z⁻¹ = U L⁻ᴴ L⁻¹ (a NaN factor, info > 0, gives a NaN U that PolarEnd reports).
  std::vector<T> w(u, u + std::max<int64_t>(count, 1));
  JAXMG_RETURN_IF_ERROR(
      scalapack::Trsm<T>('R', 'L', adjoint, 'N', m, n, T(1), z, desc_z_, w.data(), desc_a_));
  JAXMG_RETURN_IF_ERROR(
      scalapack::Trsm<T>('R', 'L', 'N', 'N', m, n, T(1), z, desc_z_, w.data(), desc_a_));
  double sum = 0;
  const auto re = static_cast<RealOf<T>>(e), rc = static_cast<RealOf<T>>(coef);
  for (int64_t i = 0; i < count; ++i) {
    const T next = re * u[i] + rc * w[i];
    sum += std::norm(std::complex<double>(next - u[i]));
    u[i] = next;
  }
  JAXMG_RETURN_IF_ERROR(AllreduceSum<double>(*grid_, &sum, 1));
  *change = std::sqrt(sum);
  return Status();
}

template <typename T>
Status Engine::PolarEnd(bool h, int* info) {
  const int64_t m = plan_->engine_rows(), n = plan_->cols.extent;
  const int64_t count = local_rows_ * local_cols_;
  const char adjoint = Scalar<T>::kParts == 2 ? 'C' : 'T';
  T* u = As<T>(work_);
  T* g = As<T>(polar_z_.data());
  // Newton–Schulz: U := 1.5 U − 0.5 U (UᴴU).
  JAXMG_RETURN_IF_ERROR(
      scalapack::Gemm<T>(adjoint, 'N', n, n, m, T(1), u, desc_a_, u, desc_a_, T(0), g, desc_z_));
  std::vector<T> w(u, u + std::max<int64_t>(count, 1));
  JAXMG_RETURN_IF_ERROR(scalapack::Gemm<T>('N', 'N', m, n, n, T(-0.5), w.data(), desc_a_, g,
                                           desc_z_, T(1.5), u, desc_a_));
  int bad = static_cast<int>(std::min<int64_t>(FirstNonFiniteColumn<T>(), INT32_MAX));
  JAXMG_RETURN_IF_ERROR(AllreduceMax(*grid_, &bad));
  *info = bad;
  if (bad != 0 || !h) return Status();
  // H := ½ (UᴴA + (UᴴA)ᴴ) into the square matrix kept.
  JAXMG_RETURN_IF_ERROR(SquareMatrix<T>(&square_, &desc_square_, &square_rows_));
  JAXMG_RETURN_IF_ERROR(scalapack::Gemm<T>(adjoint, 'N', n, n, m, T(1), u, desc_a_,
                                           As<T>(polar_a_.data()), desc_a_, T(0), g, desc_z_));
  T* hm = As<T>(square_.data());
  JAXMG_RETURN_IF_ERROR(scalapack::Adjoint<T>(n, g, desc_z_, hm, desc_square_));
  for (int64_t i = 0; i < square_rows_ * local_cols_; ++i) {
    hm[i] = (hm[i] + g[i]) / RealOf<T>(2);
  }
  return Status();
}

template <typename T>
Status Engine::PolarValues(void* x, int64_t x_rows, int64_t x_cols, int* info) {
  using R = RealOf<T>;
  const int64_t n = plan_->cols.extent;
  std::vector<R> w(static_cast<size_t>(n), std::numeric_limits<R>::quiet_NaN());
  JAXMG_RETURN_IF_ERROR(scalapack::Eigh<T>(false, n, square_rows_, local_cols_,
                                           As<T>(square_.data()), desc_square_, w.data(),
                                           As<T>(polar_z_.data()), desc_z_, info));
  for (int64_t i = 0; i < n && *info == 0; ++i) {
    if (!std::isfinite(w[i])) *info = static_cast<int>(std::min<int64_t>(i + 1, INT32_MAX));
  }
  JAXMG_RETURN_IF_ERROR(AllreduceMax(*grid_, info));
  // Descending, at least 0 (H is positive semi-definite), into x's last column for x's rows.
  const int64_t first = x_rows == n ? 0 : x_rows * (rhs_by_cols_ ? v_ : u_);
  T* out = As<T>(x);
  for (int64_t i = 0; i < x_rows; ++i) {
    out[i * x_cols + x_cols - 1] = T(std::max<R>(w[n - 1 - (first + i)], 0));
  }
  return Status();
}

#define JAXMG_INSTANTIATE_POLAR(T) JAXMG_INSTANTIATE_POLAR_STEPS(Engine, T)
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_POLAR)
#undef JAXMG_INSTANTIATE_POLAR

}  // namespace jaxmg::scalapack
