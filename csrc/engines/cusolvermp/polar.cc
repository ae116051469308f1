// QDWH polar decomposition (routines/polar.h): its buffers, the Gram and Cholesky steps, the QR
// steps, the Newton–Schulz end and H, and the singular values from H.
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

#include "common/chunk.h"
#include "common/deferred.h"
#include "common/scalar.h"
#include "common/symmetry.h"
#include "cuda/kernels.h"
#include "engines/cusolvermp/engine.h"
#include "engines/cusolvermp/engine_internal.h"
#include "engines/cusolvermp/engine_util.h"
#include "engines/cusolvermp/local_blas.h"

namespace jaxmg::cusolvermp {

Status Engine::PolarSum(double* out) {
  JAXMG_NCCL(ncclAllReduce(polar_sum_, polar_sum_, 1, ncclDouble, ncclSum, ctx_.comm, stream_));
  double sum = 0;
  JAXMG_CUDA(cudaMemcpyAsync(&sum, polar_sum_, sizeof(double), cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  *out = sum;
  return AgreeOnValue(out);
}

template <typename T>
Status Engine::Product(char op_a, char op_b, int64_t m, int64_t n, int64_t k, double alpha,
                       const Tiled& a, const Tiled& b, double beta, const Tiled& c) {
  const auto op = [](char o) { return o == 'N' ? CUBLAS_OP_N : AdjointOp<T>(); };
  const int64_t t = state_.plan.tile;
  BlasDescriptor da, db, dc;
  const cublasComputeType_t compute = ComputeOf<T>();
  const T ta(alpha), tb(beta);
  void* cp = const_cast<void*>(c.p);
  size_t dev = 0, host = 0;
  void* d_work = nullptr;
  // Descriptors and workspace, agreed before the collective product.
  Deferred local;
  local.Run([&]() -> Status {
    JAXMG_RETURN_IF_ERROR(
        da.Create(ctx_, DataTypeOf<T>(), a.rows, a.cols, t, t, std::max<int64_t>(a.ld, 1)));
    JAXMG_RETURN_IF_ERROR(
        db.Create(ctx_, DataTypeOf<T>(), b.rows, b.cols, t, t, std::max<int64_t>(b.ld, 1)));
    JAXMG_RETURN_IF_ERROR(
        dc.Create(ctx_, DataTypeOf<T>(), c.rows, c.cols, t, t, std::max<int64_t>(c.ld, 1)));
    JAXMG_BLASMP(cublasMpSetStream(ctx_.blas, stream_));
    JAXMG_BLASMP(cublasMpGemm_bufferSize(ctx_.blas, op(op_a), op(op_b), m, n, k, &ta, a.p, a.row, 1,
                                         da.get(), b.p, b.row, 1, db.get(), &tb, cp, c.row, 1,
                                         dc.get(), compute, &dev, &host));
    return Workspace(dev, host, &d_work);
  });
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(local.status()));
  JAXMG_BLASMP(cublasMpGemm(ctx_.blas, op(op_a), op(op_b), m, n, k, &ta, a.p, a.row, 1, da.get(),
                            b.p, b.row, 1, db.get(), &tb, cp, c.row, 1, dc.get(), compute, d_work,
                            workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size()));
  return Status();
}

template <typename T>
Status Engine::PolarBegin(bool keep_a, double* lower, int* info) {
  StepTimer timer("PolarBegin", stream_);
  const layout::Plan& plan = state_.plan;
  const int64_t m = plan.engine_rows(), n = plan.cols.extent, t = plan.tile;
  const int64_t count = local_rows_ * local_cols_;
  const size_t bytes = sizeof(T) * std::max<int64_t>(count, 1);
  *lower = 0;
  // Every buffer of the iteration first, agreed: no rank leaves alone before a collective.
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(PolarBuffers<T>(keep_a)));
  JAXMG_RETURN_IF_ERROR(Agree<T>(false, info, /*diag_limit=*/0));  // a non-finite input
  if (*info != 0) return Status();
  polar_iteration_ = 0;
  // Local errors from here on are kept (every rank enters each collective) and agreed at the
  // norms and at the end.
  Deferred failed;
  failed.Step("polar", ctx_.rank, 0);
  double* sums = polar_norms_;
  failed.Run([&]() -> Status {
    if (keep_a) {
      JAXMG_CUDA(cudaMemcpyAsync(polar_a_, work_, bytes, cudaMemcpyDeviceToDevice, stream_));
    }
    // α = (‖A‖₁ ‖A‖∞)^½ from the column sums (n) and row sums (m) of |A|, summed over the ranks.
    JAXMG_CUDA(cudaMemsetAsync(sums, 0, sizeof(double) * (n + m), stream_));
    JAXMG_CUDA(cuda::AbsSums(KernelType<T>(), work_, local_rows_, local_cols_, t, ctx_.nprow,
                             ctx_.npcol, ctx_.myrow, ctx_.mycol, sums, sums + n, stream_));
    return Status();
  });
  JAXMG_NCCL(ncclAllReduce(sums, sums, n + m, ncclDouble, ncclSum, ctx_.comm, stream_));
  std::vector<double> host(static_cast<size_t>(n + m));
  JAXMG_CUDA(cudaMemcpyAsync(host.data(), sums, sizeof(double) * (n + m), cudaMemcpyDeviceToHost,
                             stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("polar", failed));
  double norms = *std::max_element(host.begin(), host.begin() + n) *
                 *std::max_element(host.begin() + n, host.end());
  JAXMG_RETURN_IF_ERROR(AgreeOnValue(&norms));
  if (norms == 0) return Status();  // U = 0 stays 0
  failed.Keep(CudaCheck(cuda::Scale(KernelType<T>(), work_, count, 1 / std::sqrt(norms), stream_),
                        "Scale"));
  // The bound 1 / ‖L⁻¹‖_F, UᴴU = L Lᴴ: L in Z, L⁻¹ in W.
  JAXMG_RETURN_IF_ERROR(PolarGram<T>(1, 0));
  JAXMG_RETURN_IF_ERROR(PolarFactor<T>());
  int32_t factored = 0;
  JAXMG_CUDA(
      cudaMemcpyAsync(&factored, small_ + 2, sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  int64_t gave_up = factored != 0 ? 1 : 0;
  JAXMG_RETURN_IF_ERROR(BoundedAllreduceMax(ctx_, &gave_up, 1));
  if (gave_up != 0) return Status();
  failed.Run([&]() -> Status {
    JAXMG_CUDA(cudaMemsetAsync(polar_w_, 0, sizeof(T) * z_rows_ * local_cols_, stream_));
    JAXMG_CUDA(cuda::SetDiagonal(KernelType<T>(), polar_w_, z_rows_, local_cols_, t, ctx_.nprow,
                                 ctx_.npcol, ctx_.myrow, ctx_.mycol, stream_));
    return Status();
  });
  JAXMG_RETURN_IF_ERROR(
      TriangularInverse<T>(polar_z_, polar_w_, n, z_rows_, false, false, &failed));
  failed.Run([&]() -> Status {
    JAXMG_CUDA(cudaMemsetAsync(polar_sum_, 0, sizeof(double), stream_));
    JAXMG_CUDA(
        cuda::SumSquares(KernelType<T>(), polar_w_, z_rows_ * local_cols_, polar_sum_, stream_));
    return Status();
  });
  double squares = 0;
  JAXMG_RETURN_IF_ERROR(PolarSum(&squares));
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("polar", failed));
  if (std::isfinite(squares) && squares > 0) *lower = 1 / std::sqrt(squares);
  return Status();
}

template <typename T>
Status Engine::PolarBuffers(bool keep_a) {
  // A kept, W (a copy of U), Z (n x n), two sums, the stacked matrix Y of the QR steps with its
  // Householder scalars, and the workspace of Y's QR (the largest of the steps').
  const layout::Plan& plan = state_.plan;
  const int64_t m = plan.engine_rows(), n = plan.cols.extent, t = plan.tile;
  const int64_t lc = local_cols_;
  const size_t bytes = sizeof(T) * std::max<int64_t>(local_rows_ * lc, 1);
  if (keep_a) JAXMG_RETURN_IF_ERROR(Scratch(bytes, &polar_a_));
  JAXMG_RETURN_IF_ERROR(Scratch(bytes, &polar_w_));
  z_rows_ = CyclicLocalExtent(n, t, ctx_.myrow, ctx_.nprow);
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(T) * std::max<int64_t>(z_rows_ * lc, 1), &polar_z_));
  void* sums = nullptr;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(double) * (n + m + 1), &sums));
  polar_norms_ = static_cast<double*>(sums);
  polar_sum_ = polar_norms_ + n + m;
  const int64_t round = t * ctx_.nprow, mp = (m + round - 1) / round * round;
  const int64_t ly = mp / ctx_.nprow + z_rows_;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(T) * std::max<int64_t>(ly * lc, 1), &polar_y_));
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(T) * (lc + t), &polar_tau_));
  Descriptor desc_y;
  JAXMG_RETURN_IF_ERROR(
      desc_y.Create(ctx_, DataTypeOf<T>(), mp + n, n, t, t, std::max<int64_t>(ly, 1)));
  size_t dev = 0, host = 0, dev2 = 0, host2 = 0;
  JAXMG_SOLVER(cusolverMpGeqrf_bufferSize(ctx_.handle, mp + n, n, polar_y_, 1, 1, desc_y.get(),
                                          DataTypeOf<T>(), &dev, &host));
  JAXMG_SOLVER(cusolverMpOrgqr_bufferSize(ctx_.handle, mp + n, n, n, polar_y_, 1, 1, desc_y.get(),
                                          polar_tau_, DataTypeOf<T>(), &dev2, &host2));
  void* d_work = nullptr;
  return Workspace(std::max(dev, dev2), std::max(host, host2), &d_work);
}

template <typename T>
Status Engine::PolarGram(double c, double beta) {
  StepTimer timer("PolarGram", stream_);
  const layout::Plan& plan = state_.plan;
  const int64_t m = plan.engine_rows(), n = plan.cols.extent, t = plan.tile;
  PolarLayouts d;
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(d.Create<T>(ctx_, m, n, t, local_rows_, z_rows_)));
  const BlasDescriptor &du = d.u, &dz = d.z;
  JAXMG_BLASMP(cublasMpSetStream(ctx_.blas, stream_));
  const cublasComputeType_t compute = ComputeOf<T>();
  size_t dev = 0, host = 0;
  void* d_work = nullptr;
  if (Scalar<T>::kParts == 2) {  // Herk: real alpha and beta
    const RealOf<T> alpha(c), b(beta);
    JAXMG_BLASMP(cublasMpHerk_bufferSize(ctx_.blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_C, n, m,
                                         &alpha, work_, 1, 1, du.get(), &b, polar_z_, 1, 1,
                                         dz.get(), compute, &dev, &host));
    JAXMG_RETURN_IF_ERROR(AgreedWorkspace(dev, host, &d_work));
    JAXMG_BLASMP(cublasMpHerk(ctx_.blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_C, n, m, &alpha, work_,
                              1, 1, du.get(), &b, polar_z_, 1, 1, dz.get(), compute, d_work,
                              workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size()));
  } else {
    const T alpha(c), b(beta);
    JAXMG_BLASMP(cublasMpSyrk_bufferSize(ctx_.blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, n, m,
                                         &alpha, work_, 1, 1, du.get(), &b, polar_z_, 1, 1,
                                         dz.get(), compute, &dev, &host));
    JAXMG_RETURN_IF_ERROR(AgreedWorkspace(dev, host, &d_work));
    JAXMG_BLASMP(cublasMpSyrk(ctx_.blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, n, m, &alpha, work_,
                              1, 1, du.get(), &b, polar_z_, 1, 1, dz.get(), compute, d_work,
                              workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size()));
  }
  return Status();
}

template <typename T>
Status Engine::PolarFactor() {
  StepTimer timer("PolarFactor", stream_);
  const layout::Plan& plan = state_.plan;
  const int64_t n = plan.cols.extent, t = plan.tile;
  Descriptor desc_z;
  size_t dev = 0, host = 0;
  void* d_work = nullptr;
  Deferred local;  // agreed before the collective factorization
  local.Run([&]() -> Status {
    JAXMG_RETURN_IF_ERROR(
        desc_z.Create(ctx_, DataTypeOf<T>(), n, n, t, t, std::max<int64_t>(z_rows_, 1)));
    JAXMG_SOLVER(cusolverMpPotrf_bufferSize(ctx_.handle, CUBLAS_FILL_MODE_LOWER, n, polar_z_, 1, 1,
                                            desc_z.get(), DataTypeOf<T>(), &dev, &host));
    JAXMG_RETURN_IF_ERROR(Workspace(dev, host, &d_work));
    JAXMG_CUDA(cudaMemsetAsync(small_ + 2, 0, sizeof(int32_t), stream_));
    return Status();
  });
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(local.status()));
  const cusolverStatus_t st = cusolverMpPotrf(
      ctx_.handle, CUBLAS_FILL_MODE_LOWER, n, polar_z_, 1, 1, desc_z.get(), DataTypeOf<T>(), d_work,
      workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size(), small_ + 2);
  if (st == CUSOLVER_STATUS_INTERNAL_ERROR || st == CUSOLVER_STATUS_EXECUTION_FAILED) {
    // (cuSOLVERMp gives up on some matrices that are not positive definite): a failure info.
    const int32_t one = 1;
    JAXMG_CUDA(cudaMemcpyAsync(small_ + 2, &one, sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
    return Status();
  }
  return SolverCheck(st, "cusolverMpPotrf");
}

template <typename T>
Status Engine::PolarQr(double sqrt_c, double coef, double e) {
  // Y = [sqrt_c U; 0; I] ((mp + n) x n, mp = m rounded up to whole rounds of tiles over the
  // process rows): each rank holds its rows of U, zeros to mp / nprow, then its rows of I. Zero
  // rows change neither R nor Q's other rows; Q₂ starts at Y's row mp + 1, on a tile boundary.
  StepTimer timer("PolarQr", stream_);
  const layout::Plan& plan = state_.plan;
  const int64_t m = plan.engine_rows(), n = plan.cols.extent, t = plan.tile;
  const int64_t round = t * ctx_.nprow, mp = (m + round - 1) / round * round;
  const int64_t top = mp / ctx_.nprow;
  const int64_t ly = top + CyclicLocalExtent(n, t, ctx_.myrow, ctx_.nprow), lc = local_cols_;
  // A local error is kept (every rank enters each collective) and agreed at the end.
  Deferred failed;
  failed.Step("polar", ctx_.rank, ++polar_iteration_);
  failed.Keep(
      CudaCheck(cuda::QdwhStack(KernelType<T>(), work_, local_rows_, lc, sqrt_c, polar_y_, ly, top,
                                t, ctx_.nprow, ctx_.npcol, ctx_.myrow, ctx_.mycol, stream_),
                "QdwhStack"));
  Descriptor desc_y;
  size_t dev = 0, host = 0;
  void* d_work = nullptr;
  Deferred local;  // (PolarBuffers sized the workspace: it does not grow here)
  local.Run([&]() -> Status {
    JAXMG_RETURN_IF_ERROR(
        desc_y.Create(ctx_, DataTypeOf<T>(), mp + n, n, t, t, std::max<int64_t>(ly, 1)));
    JAXMG_SOLVER(cusolverMpGeqrf_bufferSize(ctx_.handle, mp + n, n, polar_y_, 1, 1, desc_y.get(),
                                            DataTypeOf<T>(), &dev, &host));
    return Workspace(dev, host, &d_work);
  });
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(local.status()));
  JAXMG_SOLVER(cusolverMpGeqrf(ctx_.handle, mp + n, n, polar_y_, 1, 1, desc_y.get(), polar_tau_,
                               DataTypeOf<T>(), d_work, workspace_bytes_, ctx_.host_work.data(),
                               ctx_.host_work.size(), small_ + 2));
  JAXMG_SOLVER(cusolverMpOrgqr_bufferSize(ctx_.handle, mp + n, n, n, polar_y_, 1, 1, desc_y.get(),
                                          polar_tau_, DataTypeOf<T>(), &dev, &host));
  JAXMG_RETURN_IF_ERROR(Workspace(dev, host, &d_work));
  JAXMG_SOLVER(cusolverMpOrgqr(ctx_.handle, mp + n, n, n, polar_y_, 1, 1, desc_y.get(), polar_tau_,
                               DataTypeOf<T>(), d_work, workspace_bytes_, ctx_.host_work.data(),
                               ctx_.host_work.size(), small_ + 2));
  // U := e U + coef Q₁ Q₂ᴴ.
  const Tiled y{polar_y_, mp + n, n, ly}, q2{polar_y_, mp + n, n, ly, mp + 1};
  JAXMG_RETURN_IF_ERROR(Product<T>('N', 'C', m, n, n, coef, y, q2, e, {work_, m, n, local_rows_}));
  return AgreeOnFailure("polar", failed);
}

template <typename T>
Status Engine::PolarCholesky(double c, double coef, double e, double* change) {
  StepTimer timer("PolarCholesky", stream_);
  const layout::Plan& plan = state_.plan;
  const int64_t m = plan.engine_rows(), n = plan.cols.extent, t = plan.tile;
  const int64_t count = local_rows_ * local_cols_;
  // Z := I + c UᴴU (lower triangle), then Z = L Lᴴ (a NaN in Z leaves NaN in U, which PolarEnd
  // reports).
  // A local error is kept (every rank enters each collective) and agreed at the end.
  Deferred failed;
  failed.Step("polar", ctx_.rank, ++polar_iteration_);
  // Z's start is made even after a local failure: the collective factorization's input stays
  // well formed (I + c UᴴU).
  failed.Keep([&]() -> Status {
    JAXMG_CUDA(cudaMemsetAsync(polar_z_, 0, sizeof(T) * z_rows_ * local_cols_, stream_));
    JAXMG_CUDA(cuda::SetDiagonal(KernelType<T>(), polar_z_, z_rows_, local_cols_, t, ctx_.nprow,
                                 ctx_.npcol, ctx_.myrow, ctx_.mycol, stream_));
    return Status();
  }());
  JAXMG_RETURN_IF_ERROR(PolarGram<T>(c, 1));
  JAXMG_RETURN_IF_ERROR(PolarFactor<T>());
  PolarLayouts d;
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(d.Create<T>(ctx_, m, n, t, local_rows_, z_rows_)));
  const BlasDescriptor &du = d.u, &dz = d.z;
  JAXMG_BLASMP(cublasMpSetStream(ctx_.blas, stream_));
  const cublasComputeType_t compute = ComputeOf<T>();
  size_t dev = 0, host = 0;
  void* d_work = nullptr;
  // W := U Z⁻¹ = U L⁻ᴴ L⁻¹.
  const size_t bytes = sizeof(T) * std::max<int64_t>(count, 1);
  failed.Keep(CudaCheck(cudaMemcpyAsync(polar_w_, work_, bytes, cudaMemcpyDeviceToDevice, stream_),
                        "cudaMemcpyAsync"));
  const cublasOperation_t adjoint = AdjointOp<T>();
  const T one(1);
  StepTimer solves("PolarCholesky: two Trsm", stream_);
  for (const cublasOperation_t op : {adjoint, CUBLAS_OP_N}) {
    JAXMG_BLASMP(cublasMpTrsm_bufferSize(ctx_.blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, op,
                                         CUBLAS_DIAG_NON_UNIT, m, n, &one, polar_z_, 1, 1, dz.get(),
                                         polar_w_, 1, 1, du.get(), compute, &dev, &host));
    JAXMG_RETURN_IF_ERROR(AgreedWorkspace(dev, host, &d_work));
    JAXMG_BLASMP(cublasMpTrsm(ctx_.blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, op,
                              CUBLAS_DIAG_NON_UNIT, m, n, &one, polar_z_, 1, 1, dz.get(), polar_w_,
                              1, 1, du.get(), compute, d_work, workspace_bytes_,
                              ctx_.host_work.data(), ctx_.host_work.size()));
  }
  failed.Run([&]() -> Status {
    JAXMG_CUDA(cudaMemsetAsync(polar_sum_, 0, sizeof(double), stream_));
    JAXMG_CUDA(
        cuda::AxpbyChange(KernelType<T>(), work_, polar_w_, count, e, coef, polar_sum_, stream_));
    return Status();
  });
  double squares = 0;
  JAXMG_RETURN_IF_ERROR(PolarSum(&squares));
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("polar", failed));
  *change = std::sqrt(squares);
  return Status();
}

template <typename T>
Status Engine::PolarEnd(bool h, int* info) {
  StepTimer timer("PolarEnd", stream_);
  const layout::Plan& plan = state_.plan;
  const int64_t m = plan.engine_rows(), n = plan.cols.extent, t = plan.tile;
  const int64_t count = local_rows_ * local_cols_;
  const Tiled u{work_, m, n, local_rows_};
  const Tiled z{polar_z_, n, n, z_rows_};
  // Newton–Schulz: U := 1.5 U − 0.5 W G, G = UᴴU (lower triangle), W a copy of U.
  Deferred failed;
  failed.Step("polar", ctx_.rank, ++polar_iteration_);
  JAXMG_RETURN_IF_ERROR(PolarGram<T>(1, 0));
  failed.Keep(CudaCheck(cudaMemcpyAsync(polar_w_, work_, sizeof(T) * std::max<int64_t>(count, 1),
                                        cudaMemcpyDeviceToDevice, stream_),
                        "cudaMemcpyAsync"));
  {
    StepTimer symm("PolarEnd: Symm", stream_);
    PolarLayouts d;
    JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(d.Create<T>(ctx_, m, n, t, local_rows_, z_rows_)));
    const BlasDescriptor &du = d.u, &dz = d.z;
    JAXMG_BLASMP(cublasMpSetStream(ctx_.blas, stream_));
    const cublasComputeType_t compute = ComputeOf<T>();
    const T alpha(-0.5), beta(1.5);
    size_t dev = 0, host = 0;
    JAXMG_BLASMP(cublasMpSymm_bufferSize(ctx_.blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, m, n,
                                         &alpha, polar_z_, 1, 1, dz.get(), polar_w_, 1, 1, du.get(),
                                         &beta, work_, 1, 1, du.get(), compute, &dev, &host));
    void* d_work = nullptr;
    JAXMG_RETURN_IF_ERROR(AgreedWorkspace(dev, host, &d_work));
    JAXMG_BLASMP(cublasMpSymm(ctx_.blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, m, n, &alpha,
                              polar_z_, 1, 1, dz.get(), polar_w_, 1, 1, du.get(), &beta, work_, 1,
                              1, du.get(), compute, d_work, workspace_bytes_, ctx_.host_work.data(),
                              ctx_.host_work.size()));
  }
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("polar", failed));
  JAXMG_RETURN_IF_ERROR(Agree<T>(false, info, /*diag_limit=*/0));  // a non-finite entry of U
  if (*info != 0 || !h) return Status();
  // H := ½ (G + Gᴴ), G = Uᴴ A.
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(SquareMatrix<T>()));
  JAXMG_RETURN_IF_ERROR(Product<T>('C', 'N', n, n, m, 1, u, {polar_a_, m, n, local_rows_}, 0, z));
  BlasDescriptor dz, dh;
  failed.Run([&]() -> Status {
    JAXMG_CUDA(cudaMemcpyAsync(square_, polar_z_, sizeof(T) * z_rows_ * local_cols_,
                               cudaMemcpyDeviceToDevice, stream_));
    JAXMG_RETURN_IF_ERROR(
        dz.Create(ctx_, DataTypeOf<T>(), n, n, t, t, std::max<int64_t>(z_rows_, 1)));
    return dh.Create(ctx_, DataTypeOf<T>(), n, n, t, t, std::max<int64_t>(square_rows_, 1));
  });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("polar", failed));
  const cublasOperation_t adjoint = AdjointOp<T>();
  const T half(0.5);
  size_t dev = 0, host = 0;
  JAXMG_BLASMP(cublasMpGeadd_bufferSize(ctx_.blas, adjoint, n, n, &half, polar_z_, 1, 1, dz.get(),
                                        &half, square_, 1, 1, dh.get(), &dev, &host));
  void* d_work = nullptr;
  JAXMG_RETURN_IF_ERROR(AgreedWorkspace(dev, host, &d_work));
  JAXMG_BLASMP(cublasMpGeadd(ctx_.blas, adjoint, n, n, &half, polar_z_, 1, 1, dz.get(), &half,
                             square_, 1, 1, dh.get(), d_work, workspace_bytes_,
                             ctx_.host_work.data(), ctx_.host_work.size()));
  return Status();
}

template <typename T>
Status Engine::PolarValues(void* x, int64_t x_rows, int64_t x_cols, int* info) {
  StepTimer timer("PolarValues", stream_);
  using R = RealOf<T>;
  const layout::Plan& plan = state_.plan;
  const int64_t n = plan.cols.extent, t = plan.tile;
  const size_t es = sizeof(T);
  JAXMG_CUDA(cudaMemsetAsync(x, 0, es * x_rows * x_cols, stream_));
  if (UseBandEigenvalues(t)) {
    // H's eigenvalues in two stages (band_eigenvalues.cc, band_reduce.cc), on H in place.
    void* w = nullptr;
    JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(Scratch(sizeof(R) * std::max<int64_t>(n, 1), &w)));
    JAXMG_RETURN_IF_ERROR(BandEigenvalues<T>(BandSource{square_, n, t, square_rows_}, w));
    JAXMG_RETURN_IF_ERROR(AgreeValues<T>(w, n, /*failed=*/false, info));
    return SingularValuesOut<T>(w, n, x, x_rows, x_cols);
  }
  // cuSOLVERMp's Syevd is fastest at tile 256 (syevd_tiles_16384_*: 3.25 s against 3.87 s at
  // 1024), QDWH at 1024 or more: H goes into tiles of 256 (Remap) for the eigensolver, with a
  // Z (not computed) of the same layout. Buffers and workspaces first, agreed.
  const int64_t te = std::min<int64_t>(t, 256);
  const bool retile = te != t;
  const int64_t lh = retile ? CyclicLocalExtent(n, te, ctx_.myrow, ctx_.nprow) : square_rows_;
  void *h = square_, *z = polar_z_, *w = nullptr, *d_work = nullptr;
  RemapBuffers move;
  Descriptor dh, dz;
  char jobz[2] = {'N', 0};
  size_t dev = 0, host = 0;
  const Status buffers = [&]() -> Status {
    JAXMG_RETURN_IF_ERROR(Scratch(sizeof(R) * std::max<int64_t>(n, 1), &w));
    if (retile) {
      const size_t bytes =
          es * std::max<int64_t>(lh * CyclicLocalExtent(n, te, ctx_.mycol, ctx_.npcol), 1);
      JAXMG_RETURN_IF_ERROR(Scratch(bytes, &h));
      JAXMG_RETURN_IF_ERROR(Scratch(bytes, &z));
      JAXMG_RETURN_IF_ERROR(RemapPrepare<T>(Blocked{t, t, std::max<int64_t>(square_rows_, 1)},
                                            Blocked{te, te, std::max<int64_t>(lh, 1)}, n, n,
                                            &move));
    }
    JAXMG_RETURN_IF_ERROR(dh.Create(ctx_, DataTypeOf<T>(), n, n, te, te, std::max<int64_t>(lh, 1)));
    JAXMG_RETURN_IF_ERROR(dz.Create(ctx_, DataTypeOf<T>(), n, n, te, te, std::max<int64_t>(lh, 1)));
    JAXMG_SOLVER(cusolverMpSyevd_bufferSize(ctx_.handle, jobz, CUBLAS_FILL_MODE_LOWER, n, h, 1, 1,
                                            dh.get(), w, z, 1, 1, dz.get(), DataTypeOf<T>(), &dev,
                                            &host));
    return Workspace(dev, host, &d_work);
  }();
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(buffers));
  if (retile) JAXMG_RETURN_IF_ERROR(RemapRun<T>(square_, h, move));
  JAXMG_SOLVER(cusolverMpSyevd(ctx_.handle, jobz, CUBLAS_FILL_MODE_LOWER, n, h, 1, 1, dh.get(), w,
                               z, 1, 1, dz.get(), DataTypeOf<T>(), d_work, workspace_bytes_,
                               ctx_.host_work.data(), ctx_.host_work.size(), small_));
  JAXMG_RETURN_IF_ERROR(AgreeValues<T>(w, n, /*failed=*/false, info));
  return SingularValuesOut<T>(w, n, x, x_rows, x_cols);
}

#define JAXMG_INSTANTIATE_POLAR(T)                                                              \
  template Status Engine::Product<T>(char op_a, char op_b, int64_t m, int64_t n, int64_t k,     \
                                     double alpha, const Tiled& a, const Tiled& b, double beta, \
                                     const Tiled& c);                                           \
  template Status Engine::PolarBegin<T>(bool keep_a, double* lower, int* info);                 \
  template Status Engine::PolarBuffers<T>(bool keep_a);                                         \
  template Status Engine::PolarGram<T>(double c, double beta);                                  \
  template Status Engine::PolarFactor<T>();                                                     \
  template Status Engine::PolarQr<T>(double sqrt_c, double coef, double e);                     \
  template Status Engine::PolarCholesky<T>(double c, double coef, double e, double* change);    \
  template Status Engine::PolarEnd<T>(bool h, int* info);                                       \
  template Status Engine::PolarValues<T>(void* x, int64_t x_rows, int64_t x_cols, int* info);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_POLAR)
#undef JAXMG_INSTANTIATE_POLAR

}  // namespace jaxmg::cusolvermp
