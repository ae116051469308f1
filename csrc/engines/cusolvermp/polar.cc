// QDWH polar decomposition (routines/polar.h) on the GPU engine: its buffers, its steps (written
// once over the backend in algorithms/qdwh.h) and the singular values from H.
#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/qdwh.h"
#include "common/deferred.h"
#include "common/scalar.h"
#include "cuda/kernels.h"
#include "engines/cusolvermp/backend.h"
#include "engines/cusolvermp/engine.h"
#include "engines/cusolvermp/engine_internal.h"
#include "engines/cusolvermp/engine_util.h"
#include "engines/cusolvermp/local_blas.h"

namespace jaxmg::cusolvermp {

template <typename T>
algorithms::QdwhWork<T> Engine::PolarWork(const Matrix<T>& u, QdwhOperands* operands) {
  const layout::Plan& plan = state_.plan;
  const int64_t m = plan.engine_rows(), n = plan.cols.extent, t = plan.tile;
  const int64_t lc = u.local_cols, lu = u.local_rows;
  const int64_t round = t * ctx_.nprow;
  algorithms::QdwhWork<T> q;
  q.mp = (m + round - 1) / round * round;
  q.top = q.mp / ctx_.nprow;
  // A, W and U distributed as the engine matrix (m x n), Z as an n x n one, Y as an (mp + n) x n
  // one (every rank's top rows of U and zeros, then its rows of I).
  const algorithms::Distribution as_u = DistributionOf(m, n, lu);
  const int64_t zr = operands->z_rows;
  q.u = {u.data, as_u};
  q.a = {static_cast<T*>(operands->a), as_u};
  q.w = {static_cast<T*>(operands->w), as_u};
  q.z = {static_cast<T*>(operands->z), DistributionOf(n, n, zr)};
  q.y = {static_cast<T*>(operands->y), DistributionOf(q.mp + n, n, q.top + zr)};
  q.tau = static_cast<T*>(operands->tau);
  q.sums = operands->norms;
  q.steps = &operands->steps;
  q.rank = ctx_.rank;
  return q;
}

template <typename T>
Status Engine::PolarBegin(const Matrix<T>& u, bool keep_a, QdwhOperands* q, double* lower,
                          int* info) {
  StepTimer timer("PolarBegin", stream_);
  *lower = 0;
  // Every buffer of the iteration first, agreed: no rank leaves alone before a collective.
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(PolarBuffers<T>(u, keep_a, q)));
  JAXMG_RETURN_IF_ERROR(Agree<T>(u, false, info, /*diag_limit=*/0));  // a non-finite input
  if (*info != 0) return Status();
  Backend backend(*this);
  return algorithms::QdwhBounds<T>(backend, PolarWork<T>(u, q), keep_a, lower);
}

template <typename T>
Status Engine::PolarBuffers(const Matrix<T>& u, bool keep_a, QdwhOperands* q) {
  // A kept, W (a copy of U), Z (n x n), two sums, the stacked matrix Y of the QR steps with its
  // Householder scalars, and the workspace of Y's QR (the largest of the steps').
  const layout::Plan& plan = state_.plan;
  const int64_t m = plan.engine_rows(), n = plan.cols.extent, t = plan.tile;
  const int64_t lc = u.local_cols;
  const size_t bytes = sizeof(T) * std::max<int64_t>(u.local_rows * lc, 1);
  if (keep_a) JAXMG_RETURN_IF_ERROR(Scratch(bytes, &q->a));
  JAXMG_RETURN_IF_ERROR(Scratch(bytes, &q->w));
  q->z_rows = CyclicAxis{t, ctx_.nprow, ctx_.myrow}.Extent(n);
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(T) * std::max<int64_t>(q->z_rows * lc, 1), &q->z));
  void* sums = nullptr;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(double) * (n + m + 1), &sums));
  q->norms = static_cast<double*>(sums);
  const int64_t round = t * ctx_.nprow, mp = (m + round - 1) / round * round;
  const int64_t ly = mp / ctx_.nprow + q->z_rows;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(T) * std::max<int64_t>(ly * lc, 1), &q->y));
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(T) * (lc + t), &q->tau));
  Descriptor desc_y;
  JAXMG_RETURN_IF_ERROR(
      desc_y.Create(ctx_, DataTypeOf<T>(), mp + n, n, t, t, std::max<int64_t>(ly, 1)));
  // The workspace of the stacked QR's two calls (backend.h PQr), asked for here.
  const vendor::SolverAt<T> y{static_cast<T*>(q->y), 1, 1, desc_y.get()};
  T* tau = static_cast<T*>(q->tau);
  size_t dev = 0, host = 0, dev2 = 0, host2 = 0;
  JAXMG_RETURN_IF_ERROR(
      vendor::Size(vendor::MpGeqrf<T>{ctx_.handle, mp + n, n, y, tau, small_}, &dev, &host));
  JAXMG_RETURN_IF_ERROR(
      vendor::Size(vendor::MpOrgqr<T>{ctx_.handle, mp + n, n, n, y, tau, small_}, &dev2, &host2));

  void* d_work = nullptr;
  return Workspace(std::max(dev, dev2), std::max(host, host2), &d_work);
}

template <typename T>
Status Engine::PolarQr(const Matrix<T>& u, QdwhOperands* q, double sqrt_c, double coef, double e) {
  StepTimer timer("PolarQr", stream_);
  Backend backend(*this);
  return algorithms::QdwhQrStep<T>(backend, PolarWork<T>(u, q), sqrt_c, coef, e);
}

template <typename T>
Status Engine::PolarCholesky(const Matrix<T>& u, QdwhOperands* q, double c, double coef, double e,
                             double* change) {
  StepTimer timer("PolarCholesky", stream_);
  Backend backend(*this);
  return algorithms::QdwhCholeskyStep<T>(backend, PolarWork<T>(u, q), c, coef, e, change);
}

template <typename T>
Status Engine::PolarEnd(const Matrix<T>& u, QdwhOperands* operands, bool h, Matrix<T>* h_out,
                        int* info) {
  StepTimer timer("PolarEnd", stream_);
  *h_out = Matrix<T>();
  Backend backend(*this);
  const algorithms::QdwhWork<T> q = PolarWork<T>(u, operands);
  JAXMG_RETURN_IF_ERROR(algorithms::QdwhNewtonSchulz<T>(backend, q));
  JAXMG_RETURN_IF_ERROR(Agree<T>(u, false, info, /*diag_limit=*/0));  // a non-finite entry of U
  if (*info != 0 || !h) return Status();
  // H into a new n x n matrix, distributed as Z.
  Matrix<T> hm;
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(NewMatrix<T>(q.z.rows(), q.z.cols(), &hm)));
  algorithms::Tiled<T> h_tiles = q.z;
  h_tiles.p = hm.data;
  JAXMG_RETURN_IF_ERROR(algorithms::QdwhHermitianFactor<T>(backend, q, h_tiles));
  *h_out = hm;
  return Status();
}

template <typename T>
Status Engine::PolarValues(const Matrix<T>& hm, QdwhOperands* q, T* x, int64_t x_rows,
                           int64_t x_cols, int* info) {
  StepTimer timer("PolarValues", stream_);
  using R = RealOf<T>;
  const layout::Plan& plan = state_.plan;
  const int64_t n = plan.cols.extent, t = plan.tile;
  const size_t es = sizeof(T);
  JAXMG_CUDA(cudaMemsetAsync(x, 0, es * x_rows * x_cols, stream_));
  if (UseBandEigenvalues(t)) {
    // H's eigenvalues in two stages (band_eigh.cc, algorithms/band_eigh.h), on H in place.
    void* w = nullptr;
    JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(Scratch(sizeof(R) * std::max<int64_t>(n, 1), &w)));
    JAXMG_RETURN_IF_ERROR(BandEigenvalues<T>(BandSource{hm.data, n, t, hm.local_rows}, w));
    JAXMG_RETURN_IF_ERROR(AgreeValues<T>(w, n, /*failed=*/false, info));
    return SingularValuesOut<T>(w, n, x, x_rows, x_cols);
  }
  // cuSOLVERMp's Syevd is fastest at tile 256
  // (bench/results/syevd_tiles_16384_h200x2_50138e9.json), QDWH at 1024 or more: H goes into
  // tiles of 256 (Remap) for the eigensolver, with a Z (not computed) of the same layout.
  // Buffers and workspaces first, agreed.
  const int64_t te = std::min<int64_t>(t, 256);
  const bool retile = te != t;
  const int64_t lh = retile ? CyclicAxis{te, ctx_.nprow, ctx_.myrow}.Extent(n) : hm.local_rows;
  void *h = hm.data, *z = q->z, *w = nullptr;
  RemapBuffers move;
  Descriptor dh, dz;
  // H's eigenvalues alone (Z is not computed), once H is in its tiles.
  const auto syevd = [&] {
    return vendor::MpSyevd<T>{ctx_.handle,
                              /*vectors=*/false,
                              CUBLAS_FILL_MODE_LOWER,
                              n,
                              {static_cast<T*>(h), 1, 1, dh.get()},
                              static_cast<R*>(w),
                              {static_cast<T*>(z), 1, 1, dz.get()},
                              small_};
  };
  vendor::Work work;
  size_t dev = 0, host = 0;
  const Status buffers = [&]() -> Status {
    JAXMG_RETURN_IF_ERROR(Scratch(sizeof(R) * std::max<int64_t>(n, 1), &w));
    if (retile) {
      const size_t bytes =
          es * std::max<int64_t>(lh * CyclicAxis{te, ctx_.npcol, ctx_.mycol}.Extent(n), 1);
      JAXMG_RETURN_IF_ERROR(Scratch(bytes, &h));
      JAXMG_RETURN_IF_ERROR(Scratch(bytes, &z));
      JAXMG_RETURN_IF_ERROR(RemapPrepare<T>(
          Blocked{t, t, hm.ld}, Blocked{te, te, std::max<int64_t>(lh, 1)}, n, n, &move));
    }
    JAXMG_RETURN_IF_ERROR(dh.Create(ctx_, DataTypeOf<T>(), n, n, te, te, std::max<int64_t>(lh, 1)));
    JAXMG_RETURN_IF_ERROR(dz.Create(ctx_, DataTypeOf<T>(), n, n, te, te, std::max<int64_t>(lh, 1)));
    JAXMG_RETURN_IF_ERROR(vendor::Size(syevd(), &dev, &host));
    return Workspace(dev, host, &work);
  }();
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(buffers));
  if (retile) JAXMG_RETURN_IF_ERROR(RemapRun<T>(hm.data, h, move));
  JAXMG_RETURN_IF_ERROR(vendor::Run(syevd(), work));
  JAXMG_RETURN_IF_ERROR(AgreeValues<T>(w, n, /*failed=*/false, info));
  return SingularValuesOut<T>(w, n, x, x_rows, x_cols);
}

#define JAXMG_INSTANTIATE_POLAR(T)                                                                \
  template algorithms::QdwhWork<T> Engine::PolarWork<T>(const Matrix<T>& u, QdwhOperands* q);     \
  template Status Engine::PolarBegin<T>(const Matrix<T>& u, bool keep_a, QdwhOperands* q,         \
                                        double* lower, int* info);                                \
  template Status Engine::PolarBuffers<T>(const Matrix<T>& u, bool keep_a, QdwhOperands* q);      \
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

}  // namespace jaxmg::cusolvermp
