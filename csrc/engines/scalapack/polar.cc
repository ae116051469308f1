// The CPU engine's SVD and polar steps: p?gesvd, QDWH's buffers and steps (routines/polar.h's
// schedule, algorithms/qdwh.h's steps over the backend's PBLAS and ScaLAPACK), and the singular
// values from H.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "algorithms/qdwh.h"
#include "common/scalar.h"
#include "engines/scalapack/backend.h"
#include "engines/scalapack/engine.h"
#include "engines/scalapack/engine_util.h"

namespace jaxmg::scalapack {

template <typename T>
Status Engine::Gesvd(Matrix<T>* a, bool vectors_u, bool vectors_vt, T* x, int64_t x_rows,
                     int64_t x_cols, Matrix<T>* vt, int* info) {
  using R = RealOf<T>;
  const layout::Plan& plan = *plan_;
  if (plan.strategy != layout::Strategy::kRedistribute) {
    return JAXMG_ERROR("the SVD runs on a redistributed matrix");
  }
  const int64_t m = plan.engine_rows(), n = plan.cols.extent;
  // A non-finite input is agreed on first: the solver is not run on it.
  int bad = static_cast<int>(std::min<int64_t>(FirstNonFiniteColumn<T>(*a), INT32_MAX));
  JAXMG_RETURN_IF_ERROR(AllreduceMax(*grid_, &bad));
  std::vector<R> s(static_cast<size_t>(n), std::numeric_limits<R>::quiet_NaN());
  // U (m x n) is distributed like the matrix; Vᴴ is n x n, its columns distributed like a's.
  Matrix<T> u, v;
  JAXMG_RETURN_IF_ERROR(NewLike<T>(*a, &u));
  JAXMG_RETURN_IF_ERROR(NewMatrix<T>(n, n, &v));
  *info = bad;
  if (bad == 0) {
    JAXMG_RETURN_IF_ERROR(scalapack::Gesvd<T>(vectors_u, vectors_vt, m, n, a->data, *a->desc,
                                              s.data(), u.data, *u.desc, v.data, *v.desc, info));
    for (int64_t i = 0; i < n && *info == 0; ++i) {
      if (!std::isfinite(s[i])) *info = static_cast<int>(std::min<int64_t>(i + 1, INT32_MAX));
    }
    JAXMG_RETURN_IF_ERROR(AllreduceMax(*grid_, info));
  }
  // The singular values into x's last column, for x's rows.
  const int64_t first = x_rows == n ? 0 : x_rows * (rhs_by_cols_ ? v_ : u_);
  T* out = x;
  for (int64_t i = 0; i < x_rows; ++i) out[i * x_cols + x_cols - 1] = T(s[first + i]);
  if (vectors_u) *a = u;
  *vt = vectors_vt ? v : Matrix<T>();
  return Status();
}

template <typename T>
Status Engine::PolarBuffers(const Matrix<T>& u, bool keep_a, QdwhOperands* q) {
  // A kept, W (distributed as U), Z (n x n), the stacked Y of the QR steps with its Householder
  // scalars, and the sums; in the backend's buffers, kept for the call.
  const int64_t m = plan_->engine_rows(), n = plan_->cols.extent, t = plan_->tile;
  const int64_t count = u.local_rows * u.local_cols, lc = u.local_cols;
  const int64_t round = t * grid_->nprow, mp = (m + round - 1) / round * round;
  q->z_rows = CyclicAxis{t, grid_->nprow, grid_->myrow}.Extent(n);
  q->backend = std::make_unique<Backend>(*grid_);
  Backend& b = *q->backend;
  T *a = nullptr, *w = nullptr, *z = nullptr, *y = nullptr, *tau = nullptr;
  if (keep_a) JAXMG_RETURN_IF_ERROR(b.Buffer(count, &a));
  JAXMG_RETURN_IF_ERROR(b.Buffer(count, &w));
  JAXMG_RETURN_IF_ERROR(b.Buffer(q->z_rows * lc, &z));
  JAXMG_RETURN_IF_ERROR(b.Buffer((mp / grid_->nprow + q->z_rows) * lc, &y));
  JAXMG_RETURN_IF_ERROR(b.Buffer(lc + t, &tau));
  JAXMG_RETURN_IF_ERROR(b.Buffer(n + m + 1, &q->sums));
  q->a = a, q->w = w, q->z = z, q->y = y, q->tau = tau;
  return MakeDescriptor(*grid_, n, n, t, t, std::max<int64_t>(q->z_rows, 1), &q->desc_z);
}

template <typename T>
algorithms::QdwhWork<T> Engine::PolarWork(const Matrix<T>& u, QdwhOperands* operands) {
  const int64_t m = plan_->engine_rows(), n = plan_->cols.extent, t = plan_->tile;
  const int64_t lr = u.local_rows;
  const int64_t round = t * grid_->nprow;
  algorithms::QdwhWork<T> q;
  q.mp = (m + round - 1) / round * round;
  q.top = q.mp / grid_->nprow;
  // A, W and U distributed as the engine matrix (m x n), Z as an n x n one, Y as an (mp + n) x n
  // one (every rank's top rows of U and zeros, then its rows of I).
  const algorithms::Distribution as_u = DistributionOf(m, n, lr);
  const int64_t zr = operands->z_rows;
  q.u = {u.data, as_u};
  q.a = {As<T>(operands->a), as_u};
  q.w = {As<T>(operands->w), as_u};
  q.z = {As<T>(operands->z), DistributionOf(n, n, zr)};
  q.y = {As<T>(operands->y), DistributionOf(q.mp + n, n, q.top + zr)};
  q.tau = As<T>(operands->tau);
  q.sums = operands->sums;
  q.steps = &operands->steps;
  q.rank = grid_->myrow * grid_->npcol + grid_->mycol;
  return q;
}

template <typename T>
Status Engine::PolarBegin(const Matrix<T>& u, bool keep_a, QdwhOperands* q, double* lower,
                          int* info) {
  *lower = 0;
  // Every buffer of the iteration first, agreed: no rank leaves alone before a collective.
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure(*grid_, "buffers", PolarBuffers<T>(u, keep_a, q)));
  int bad = static_cast<int>(std::min<int64_t>(FirstNonFiniteColumn<T>(u), INT32_MAX));
  JAXMG_RETURN_IF_ERROR(AllreduceMax(*grid_, &bad));
  *info = bad;
  if (bad != 0) return Status();
  return algorithms::QdwhBounds<T>(*q->backend, PolarWork<T>(u, q), keep_a, lower);
}

template <typename T>
Status Engine::PolarQr(const Matrix<T>& u, QdwhOperands* q, double sqrt_c, double coef, double e) {
  return algorithms::QdwhQrStep<T>(*q->backend, PolarWork<T>(u, q), sqrt_c, coef, e);
}

template <typename T>
Status Engine::PolarCholesky(const Matrix<T>& u, QdwhOperands* q, double c, double coef, double e,
                             double* change) {
  return algorithms::QdwhCholeskyStep<T>(*q->backend, PolarWork<T>(u, q), c, coef, e, change);
}

template <typename T>
Status Engine::PolarEnd(const Matrix<T>& u, QdwhOperands* operands, bool h, Matrix<T>* hm,
                        int* info) {
  *hm = Matrix<T>();
  const algorithms::QdwhWork<T> q = PolarWork<T>(u, operands);
  Backend& backend = *operands->backend;
  JAXMG_RETURN_IF_ERROR(algorithms::QdwhNewtonSchulz<T>(backend, q));
  int bad = static_cast<int>(std::min<int64_t>(FirstNonFiniteColumn<T>(u), INT32_MAX));
  JAXMG_RETURN_IF_ERROR(AllreduceMax(*grid_, &bad));
  *info = bad;
  if (bad != 0 || !h) return Status();
  // H into the square matrix kept, distributed as Z.
  JAXMG_RETURN_IF_ERROR(NewMatrix<T>(q.z.rows(), q.z.cols(), hm));
  algorithms::Tiled<T> h_tiles = q.z;
  h_tiles.p = hm->data;
  JAXMG_RETURN_IF_ERROR(algorithms::QdwhHermitianFactor<T>(backend, q, h_tiles));
  return Status();
}

template <typename T>
Status Engine::PolarValues(const Matrix<T>& hm, QdwhOperands* q, T* x, int64_t x_rows,
                           int64_t x_cols, int* info) {
  using R = RealOf<T>;
  const int64_t n = plan_->cols.extent;
  std::vector<R> w(static_cast<size_t>(n), std::numeric_limits<R>::quiet_NaN());
  JAXMG_RETURN_IF_ERROR(scalapack::Eigh<T>(false, n, hm.local_rows, hm.local_cols, hm.data,
                                           *hm.desc, w.data(), As<T>(q->z), q->desc_z, info));
  for (int64_t i = 0; i < n && *info == 0; ++i) {
    if (!std::isfinite(w[i])) *info = static_cast<int>(std::min<int64_t>(i + 1, INT32_MAX));
  }
  JAXMG_RETURN_IF_ERROR(AllreduceMax(*grid_, info));
  // Descending, at least 0 (H is positive semi-definite), into x's last column for x's rows.
  const int64_t first = x_rows == n ? 0 : x_rows * (rhs_by_cols_ ? v_ : u_);
  T* out = x;
  for (int64_t i = 0; i < x_rows; ++i) {
    out[i * x_cols + x_cols - 1] = T(std::max<R>(w[n - 1 - (first + i)], 0));
  }
  return Status();
}

#define JAXMG_INSTANTIATE_POLAR(T)                                                                \
  template Status Engine::Gesvd<T>(Matrix<T> * a, bool vectors_u, bool vectors_vt, T* x,          \
                                   int64_t x_rows, int64_t x_cols, Matrix<T>* vt, int* info);     \
  template Status Engine::PolarBegin<T>(const Matrix<T>& u, bool keep_a, QdwhOperands* q,         \
                                        double* lower, int* info);                                \
  template Status Engine::PolarQr<T>(const Matrix<T>& u, QdwhOperands* q, double sqrt_c,          \
                                     double coef, double e);                                      \
  template Status Engine::PolarCholesky<T>(const Matrix<T>& u, QdwhOperands* q, double c,         \
                                           double coef, double e, double* change);                \
  template Status Engine::PolarEnd<T>(const Matrix<T>& u, QdwhOperands* q, bool h, Matrix<T>* hm, \
                                      int* info);                                                 \
  template Status Engine::PolarValues<T>(const Matrix<T>& hm, QdwhOperands* q, T* x,              \
                                         int64_t x_rows, int64_t x_cols, int* info);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_POLAR)
#undef JAXMG_INSTANTIATE_POLAR

}  // namespace jaxmg::scalapack
