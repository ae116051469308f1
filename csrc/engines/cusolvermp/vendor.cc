// The thin vendor steps: cuSOLVERMp's Potrf, Getrf, Potrs, Getrs, Geqrf, Orgqr, Gels, Syevd,
// Gesvd and Sygvd, and cuBLASMp's Gemm, each with its status; the least-squares solve on grids
// of several process columns (QrSolve).
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

bool Engine::OneDevice() const {
  // config.gpu_one_device = cusolvermp keeps cuSOLVERMp on one device (for comparisons:
  // bench/one_device.py).
  return config_.gpu_one_device != Choice::kLibrary && ctx_.nranks == 1;
}

template <typename T>
Status Engine::LocalGetrs(const Matrix<T>& lu, const std::vector<int64_t>& own_pivots,
                          const Matrix<T>& c, bool transpose) {
  // The own LU's factors (as getrf leaves them) and its global 1-based pivots: cusolverDn's
  // getrs, op(B) z = c (op = T: the transpose, not the adjoint).
  const int64_t n = lu.rows;
  for (int64_t i = 0; i < n; ++i) {  // (kept pivots come back from the caller)
    if (own_pivots[i] - 1 < i || own_pivots[i] > n) return JAXMG_ERROR("a pivot is out of range");
  }
  if (c.cols == 0) return Status();
  const LocalBlas* lb = nullptr;
  cublasHandle_t blas = nullptr;
  cusolverDnHandle_t dn = nullptr;
  cusolverDnParams_t params = nullptr;
  JAXMG_RETURN_IF_ERROR(LocalSolver(&lb, &blas, &dn, &params));
  void* piv = nullptr;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(int64_t) * n, &piv));
  // Pageable: the copy has read own_pivots when cudaMemcpyAsync returns.
  JAXMG_CUDA(cudaMemcpyAsync(piv, own_pivots.data(), sizeof(int64_t) * n, cudaMemcpyHostToDevice,
                             stream_));
  JAXMG_SOLVER(lb->getrs(dn, params, transpose ? CUBLAS_OP_T : CUBLAS_OP_N, n, c.cols,
                         DataTypeOf<T>(), lu.data, lu.ld, static_cast<const int64_t*>(piv),
                         DataTypeOf<T>(), c.data, c.ld, Slot(Slots::kSolveInfo)));
  return Status();
}

template <typename T>
Status Engine::Potrf(Matrix<T>* a, int* info) {
  StepTimer timer("Potrf", stream_);
  const int64_t n = a->rows;
  a->factored = Factorization::kCholesky;
  if (UseOwnCholesky()) return Cholesky1D<T>(a, info);
  size_t dev = 0, host = 0;
  if (OneDevice()) {  // the local array is the matrix: cusolverDn's Cholesky, the same status
    const LocalBlas* lb = nullptr;
    cublasHandle_t blas = nullptr;
    cusolverDnHandle_t dn = nullptr;
    cusolverDnParams_t params = nullptr;
    JAXMG_RETURN_IF_ERROR(LocalSolver(&lb, &blas, &dn, &params));
    JAXMG_RETURN_IF_ERROR(Call(
        vendor::DnPotrf<T>{{lb, dn, params}, CUBLAS_FILL_MODE_LOWER, n, a->data, a->ld, small_}));
    return Agree<T>(*a, false, info);
  }
  const vendor::MpPotrf<T> potrf{
      ctx_.handle, CUBLAS_FILL_MODE_LOWER, n, {a->data, 1, 1, a->desc->get()}, small_};
  vendor::Work work;
  Status ready = vendor::Size(potrf, &dev, &host);
  if (ready.ok()) ready = Workspace(dev, host, &work);
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(ready));
  const cusolverStatus_t s = potrf.Raw(work);
  const bool failed = s == CUSOLVER_STATUS_INTERNAL_ERROR || s == CUSOLVER_STATUS_EXECUTION_FAILED;
  if (!failed) JAXMG_RETURN_IF_ERROR(SolverCheck(s, vendor::MpPotrf<T>::kCall));
  return Agree<T>(*a, failed, info);
}

template <typename T>
Status Engine::Getrf(Matrix<T>* a, Pivots* piv, int* info) {
  StepTimer timer("Getrf", stream_);
  // The input is scanned first: pivoting can keep a NaN off the diagonal, and the LU libraries
  // do not all carry it into the factor.
  JAXMG_RETURN_IF_ERROR(Small());
  JAXMG_RETURN_IF_ERROR(NonFinite<T>(*a, Slot(Slots::kInputNonFinite)));
  if (UseOwnLu()) return Lu1D<T>(a, piv, info);
  a->factored = Factorization::kLu;  // cuSOLVERMp's pivots, in piv->device
  const int64_t n = a->rows;
  void* p = nullptr;
  const size_t pivots = std::max(a->local_rows, a->local_cols) + a->tile;
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(Scratch(sizeof(int64_t) * pivots, &p)));
  piv->device = static_cast<int64_t*>(p);
  JAXMG_CUDA(cudaMemsetAsync(piv->device, 0, sizeof(int64_t) * pivots, stream_));
  JAXMG_RETURN_IF_ERROR(Call(
      vendor::MpGetrf<T>{ctx_.handle, n, n, {a->data, 1, 1, a->desc->get()}, piv->device, small_}));
  return Agree<T>(*a, false, info);
}

// Fewer right-hand sides than this are solved one column at a time on one device (Potrs).
constexpr int64_t kColumnByColumn = 4;

template <typename T>
Status Engine::Potrs(const Matrix<T>& l, const Matrix<T>& c) {
  StepTimer timer("Potrs", stream_);
  if (l.factored != Factorization::kCholesky) {
    return JAXMG_ERROR("Potrs: the matrix handed holds no Cholesky factor");
  }
  const int64_t n = l.rows, nrhs = c.cols;
  if (OneDevice()) {
    if (nrhs == 0) return Status();
    const LocalBlas* lb = nullptr;
    cublasHandle_t blas = nullptr;
    cusolverDnHandle_t dn = nullptr;
    cusolverDnParams_t params = nullptr;
    JAXMG_RETURN_IF_ERROR(LocalSolver(&lb, &blas, &dn, &params));
    // Two or three right-hand sides one column at a time: cusolverDn's potrs took 4.2 ms with
    // one column, 16 to 21 ms with two (float32, N = 32768, one H100; cuBLAS's triangular solve
    // with one column is its fast one: cholesky_solves_probe_h100x1_9af010f.json in
    // bench/results).
    const int64_t calls = nrhs < kColumnByColumn ? nrhs : 1;
    for (int64_t j = 0; j < calls; ++j) {
      JAXMG_SOLVER(lb->potrs(dn, params, CUBLAS_FILL_MODE_LOWER, n, calls == 1 ? nrhs : 1,
                             DataTypeOf<T>(), l.data, l.ld, DataTypeOf<T>(), c.data + j * c.ld,
                             c.ld, Slot(Slots::kSolveInfo)));
    }
    return Status();
  }
  return Call(vendor::MpPotrs<T>{ctx_.handle,
                                 CUBLAS_FILL_MODE_LOWER,
                                 n,
                                 nrhs,
                                 {l.data, 1, 1, l.desc->get()},
                                 {c.data, 1, 1, c.desc->get()},
                                 Slot(Slots::kSolveInfo)});
}

template <typename T>
Status Engine::Getrs(const Matrix<T>& lu, const Pivots& piv, const Matrix<T>& c, bool transpose) {
  StepTimer timer("Getrs", stream_);
  JAXMG_RETURN_IF_ERROR(CheckLu(lu.factored, "Getrs"));
  if (lu.factored == Factorization::kLuHostPivots) {
    if (OneDevice()) return LocalGetrs<T>(lu, piv.global, c, transpose);
    return LuSolveWithPivots<T>(lu, c, transpose, piv.global);
  }
  if (transpose) {
    std::vector<int64_t> pivots;
    JAXMG_RETURN_IF_ERROR(EnginePivots(piv, &pivots));
    return LuSolveWithPivots<T>(lu, c, true, pivots);
  }
  const int64_t n = lu.rows, nrhs = c.cols;
  return Call(vendor::MpGetrs<T>{ctx_.handle,
                                 CUBLAS_OP_N,
                                 n,
                                 nrhs,
                                 {lu.data, 1, 1, lu.desc->get()},
                                 piv.device,
                                 {c.data, 1, 1, c.desc->get()},
                                 Slot(Slots::kSolveInfo)});
}

// The global 1-based pivot list of cuSOLVERMp's Getrf. cuSOLVERMp distributes it with A's
// columns (seen on 2 H200s: local entry c is the pivot of global row CyclicAxis::Global(c) on the
// column axis, replicated over process rows); each rank writes its entries, max over every rank.
Status Engine::EnginePivots(const Pivots& pivots, std::vector<int64_t>* out) {
  const int64_t n = state_.plan.engine_rows(), t = state_.plan.tile, lc = local_cols_;
  std::vector<int64_t>& piv = *out;
  piv.assign(static_cast<size_t>(n), 0);
  std::vector<int64_t> local(static_cast<size_t>(lc));
  JAXMG_CUDA(cudaMemcpyAsync(local.data(), pivots.device, sizeof(int64_t) * lc,
                             cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  for (int64_t c = 0; c < lc; ++c) {
    piv[layout::CyclicAxis{t, ctx_.npcol, ctx_.mycol}.Global(layout::LocalIndex{c}).value] =
        local[c];
  }
  void* d_piv = nullptr;
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(Scratch(sizeof(int64_t) * n, &d_piv)));
  JAXMG_CUDA(
      cudaMemcpyAsync(d_piv, piv.data(), sizeof(int64_t) * n, cudaMemcpyHostToDevice, stream_));
  JAXMG_NCCL(ncclAllReduce(d_piv, d_piv, n, ncclInt64, ncclMax, ctx_.comm, stream_));
  JAXMG_CUDA(
      cudaMemcpyAsync(piv.data(), d_piv, sizeof(int64_t) * n, cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  // 1-based (row i swaps with row piv[i] - 1 >= i): the last row can only swap with itself.
  if (piv[n - 1] == n - 1) {
    for (int64_t& p : piv) ++p;
  }
  return Status();
}

template <typename T>
Status Engine::Geqrf(Matrix<T>* a, Reflectors* tau, int* info) {
  StepTimer timer("Geqrf", stream_);
  JAXMG_RETURN_IF_ERROR(QrFactor<T>(*a, tau));
  a->factored = Factorization::kQr;
  return Agree<T>(*a, false, info, /*diag_limit=*/0);  // a zero on R's diagonal is a valid QR
}

// Least squares on grids of several process columns, where cuSOLVERMp 0.9.1's Gels and Ormqr
// answer NOT_SUPPORTED (its Geqrf and Orgqr run): QR; R's n rows on every rank (LeadingRows);
// Q formed (Orgqr); c = Qᴴ b from each rank's local columns of Q and its rows of b (one local
// gemm; the n x nrhs sum over the grid); then R x = c on every rank (one local trsm, O(n² nrhs)).
// The solution, whole on every rank (*solution), is what LeadingRowsOut then hands out.
template <typename T>
Status Engine::QrSolve(const Matrix<T>& a, const Matrix<T>& rhs, int* info, T** solution) {
  StepTimer timer("QrSolve", stream_);
  const layout::Plan& plan = state_.plan;
  const size_t es = sizeof(T);
  const int64_t n = plan.cols.extent, t = plan.tile, lr = a.local_rows, lc = a.local_cols;
  const int64_t k = rhs.cols;
  Reflectors tau;
  JAXMG_RETURN_IF_ERROR(QrFactor<T>(a, &tau));
  JAXMG_RETURN_IF_ERROR(Agree<T>(a, false, info, /*diag_limit=*/n));  // zero on R's diagonal
  if (*info != 0) return Status();
  void* r = nullptr;
  JAXMG_RETURN_IF_ERROR(LeadingRows<T>(a, &r));  // R: n x n, row-major
  Matrix<T> q = a;                               // Q, formed in a's place
  q.factored = Factorization::kQr;
  JAXMG_RETURN_IF_ERROR(Orgqr<T>(&q, tau));
  // This rank's part of c = Qᴴ b, with its buffers: a local failure is kept and agreed on
  // before the sum over the ranks.
  std::vector<int64_t> col_global(static_cast<size_t>(std::max<int64_t>(lc, 1)), -1);
  for (int64_t i = 0; i < lc; ++i) {
    const int64_t g =
        layout::CyclicAxis{t, ctx_.npcol, ctx_.mycol}.Global(layout::LocalIndex{i}).value;
    col_global[i] = g < n ? g : -1;
  }
  void *rows = nullptr, *part = nullptr, *c = nullptr, *d_cols = nullptr;
  Deferred local;
  local.Run([&] { return Scratch(es * std::max<int64_t>(lr * k, 1), &rows); });
  local.Run([&] { return Scratch(es * std::max<int64_t>(lc * k, 1), &part); });
  local.Run([&] { return Scratch(sizeof(int64_t) * col_global.size(), &d_cols); });
  local.Run([&] { return Scratch(es * n * k, &c); });  // c (n x k) row-major: cᵀ column-major
  const LocalBlas* lb = nullptr;
  cublasHandle_t blas = nullptr;
  local.Run([&] { return LocalHandle(&lb, &blas); });
  int ilr = 0, ilc = 0, ik = 0, in = 0;
  local.Run([&] { return CheckedInt(lr, "local rows", &ilr); });
  local.Run([&] { return CheckedInt(lc, "local columns", &ilc); });
  local.Run([&] { return CheckedInt(k, "right-hand sides", &ik); });
  local.Run([&] { return CheckedInt(n, "columns", &in); });
  // This rank's rows of b, all k columns: (lr x k) column-major.
  local.Run([&] {
    return CudaCheck(cuda::GatherRhs(KernelType<T>(), full_, k, state_.d_rhs_map[0], lr, k, t, 1, 0,
                                     /*conj=*/false, rows, stream_),
                     "GatherRhs (b's rows)");
  });
  // part (lc x k) = Q_localᴴ rows; row i of part is the engine column of local column i.
  const T one(1), zero(0);
  const cublasOperation_t adjoint = AdjointOp<T>();
  if (lc > 0 && k > 0) {
    local.Run([&] {
      return CublasCheck(
          lb->gemm[Scalar<T>::kIndex](blas, adjoint, CUBLAS_OP_N, ilc, ik, ilr, &one, q.data,
                                      std::max(ilr, 1), rows, std::max(ilr, 1), &zero, part, ilc),
          "cublas gemm (Qᴴ b)");
    });
  }
  local.Run([&] {
    return CudaCheck(cudaMemcpyAsync(d_cols, col_global.data(), sizeof(int64_t) * col_global.size(),
                                     cudaMemcpyHostToDevice, stream_),
                     "cudaMemcpyAsync (columns)");
  });
  local.Run(
      [&] { return CudaCheck(cudaMemsetAsync(c, 0, es * n * k, stream_), "cudaMemsetAsync"); });
  local.Run([&] {
    return CudaCheck(cuda::ScatterRhs(KernelType<T>(), part, k, static_cast<const int64_t*>(d_cols),
                                      lc, k, t, 1, 0, /*conj=*/false, c, stream_),
                     "ScatterRhs (Qᴴ b)");
  });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("qr_solve", local));
  const size_t reals = static_cast<size_t>(n * k * Scalar<T>::kParts);
  JAXMG_NCCL(ncclAllReduce(c, c, reals, NcclRealOf<T>(), ncclSum, ctx_.comm, stream_));
  // R x = c  <=>  xᵀ = cᵀ R⁻ᵀ: with r read column-major (Rᵀ, lower), cᵀ := cᵀ (Rᵀ)⁻¹ in place.
  JAXMG_RETURN_IF_ERROR(CublasCheck(
      lb->trsm[Scalar<T>::kIndex](blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N,
                                  CUBLAS_DIAG_NON_UNIT, ik, in, &one, r, in, c, std::max(ik, 1)),
      "cublas trsm (R x = Qᴴ b)"));
  *solution = static_cast<T*>(
      c);  // col_global is pageable: the copy has read it when cudaMemcpyAsync returned
  return Status();
}

template <typename T>
Status Engine::QrFactor(const Matrix<T>& a, Reflectors* tau) {
  if (UseOwnQr()) return Qr1D<T>(a, tau);
  const layout::Plan& plan = state_.plan;
  const int64_t m = plan.engine_rows(), n = plan.cols.extent;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(T) * (local_cols_ + plan.tile), &tau->tau));
  return Call(vendor::MpGeqrf<T>{
      ctx_.handle, m, n, {a.data, 1, 1, a.desc->get()}, static_cast<T*>(tau->tau), small_});
}

template <typename T>
Status Engine::Orgqr(Matrix<T>* a, const Reflectors& tau) {
  StepTimer timer("Orgqr", stream_);
  if (a->factored != Factorization::kQr) {
    return JAXMG_ERROR("Orgqr: the matrix handed holds no QR factorization");
  }
  a->factored = Factorization::kNone;
  if (!tau.own.empty()) return Orgqr1D<T>(*a, tau);  // the 1-D QR's τ and T_k
  const int64_t m = a->rows, n = state_.plan.cols.extent;
  return Call(vendor::MpOrgqr<T>{ctx_.handle,
                                 m,
                                 n,
                                 n,
                                 {a->data, 1, 1, a->desc->get()},
                                 static_cast<const T*>(tau.tau),
                                 Slot(Slots::kSolveInfo)});
}

template <typename T>
Status Engine::Gels(Matrix<T>* a, const Matrix<T>& c, Matrix<T>* z, int* info) {
  StepTimer timer("Gels", stream_);
  const size_t es = sizeof(T);
  const int64_t m = a->rows, n = state_.plan.cols.extent, t = a->tile, lr = c.local_rows;
  a->factored = Factorization::kQr;
  if (ctx_.npcol > 1) {  // (of the engine matrix, a) the solution whole on every rank
    *z = Matrix<T>();
    z->rows = n;
    z->cols = c.cols;
    z->replicated = true;
    return QrSolve<T>(*a, c, info, &z->data);
  }
  *z = c;  // solved in place (in a wider copy where c is narrow)
  // Every process column holds at least one tile of the right-hand side: zero columns are
  // appended where there are fewer (their solutions, zero, are never read).
  const int64_t held = std::max<int64_t>(c.cols, t * ctx_.npcol);
  if (held != c.cols) {
    const int64_t lc = CyclicAxis{t, ctx_.npcol, ctx_.mycol}.Extent(held);
    void* wide = nullptr;
    Descriptor& desc = descriptors_.emplace_back();
    Status buffers = Scratch(es * std::max<int64_t>(lr * lc, 1), &wide);
    if (buffers.ok()) buffers = desc.Create(ctx_, DataTypeOf<T>(), m, held, t, t, c.ld);
    JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(buffers));
    JAXMG_CUDA(cudaMemsetAsync(wide, 0, es * lr * lc, stream_));
    // Global column j keeps its local index: the cyclic map does not depend on the width.
    if (lr * c.local_cols > 0) {
      JAXMG_CUDA(
          cudaMemcpyAsync(wide, c.data, es * lr * c.local_cols, cudaMemcpyDeviceToDevice, stream_));
    }
    z->data = static_cast<T*>(wide);
    z->local_cols = lc;
    z->desc = &desc;
  }
  JAXMG_RETURN_IF_ERROR(Call(vendor::MpGels<T>{ctx_.handle,
                                               CUBLAS_OP_N,
                                               m,
                                               n,
                                               held,
                                               {a->data, 1, 1, a->desc->get()},
                                               {z->data, 1, 1, z->desc->get()},
                                               small_}));
  return Agree<T>(*a, false, info, /*diag_limit=*/n);  // a zero on R's diagonal: rank deficient
}

template <typename T>
Status Engine::Eigh(const Matrix<T>& a, bool vectors, EigenRange subset, T* x, Matrix<T>* z,
                    int* info) {
  StepTimer timer("Eigh", stream_);
  using R = RealOf<T>;
  const layout::Plan& plan = state_.plan;
  if (plan.strategy != layout::Strategy::kRedistribute) {
    return JAXMG_ERROR("the eigensolver runs on a redistributed matrix");
  }
  // A subset's pairs go first; where they are not computed alone, they are moved there on each
  // device, which holds every column of its rows only on a grid of one process column.
  if (!subset.all() && ctx_.npcol != 1) {
    return JAXMG_ERROR("the GPU engine keeps a subset's eigenpairs on grids of one column only");
  }
  const size_t es = sizeof(T);
  const int64_t n = a.rows;
  *z = Matrix<T>();
  JAXMG_CUDA(cudaMemsetAsync(x, 0, es * n, stream_));
  // A non-finite input is agreed on first (the agreement's scan of the matrix, no diagonal
  // check): the solver is not run on it.
  JAXMG_RETURN_IF_ERROR(Agree<T>(a, false, info, /*diag_limit=*/0));
  if (*info != 0) return Status();
  void* w = nullptr;
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(Scratch(sizeof(R) * std::max<int64_t>(n, 1), &w)));
  const int64_t kept = subset.all() ? n : subset.hi - subset.lo;
  if (!vectors && UseBandEigenvalues(a.tile)) {
    JAXMG_RETURN_IF_ERROR(BandEigenvalues<T>(BandSource{a.data, a.cols, a.tile, a.local_rows}, w));
    JAXMG_RETURN_IF_ERROR(MoveColumnsFirst(w, sizeof(R), subset.lo, kept));
  } else if (vectors && UseBandEigh()) {
    JAXMG_RETURN_IF_ERROR(BandEigh<T>(a, subset, w, z));  // a subset's pairs alone, first
  } else {
    JAXMG_RETURN_IF_ERROR(LibraryEigh<T>(a, vectors, w, z));
    JAXMG_RETURN_IF_ERROR(MoveColumnsFirst(w, sizeof(R), subset.lo, kept));
    if (vectors) JAXMG_RETURN_IF_ERROR(MoveColumnsFirst(z->data, es * z->ld, subset.lo, kept));
  }
  if (!vectors) *z = Matrix<T>();
  JAXMG_RETURN_IF_ERROR(AgreeValues<T>(w, kept, /*failed=*/false, info));
  // x := the eigenvalues, in the real parts (the imaginary parts stay 0).
  JAXMG_CUDA(
      cudaMemcpy2DAsync(x, es, w, sizeof(R), sizeof(R), kept, cudaMemcpyDeviceToDevice, stream_));
  return Status();
}

Status Engine::MoveColumnsFirst(void* base, int64_t stride, int64_t from, int64_t count) {
  // Piece by piece, each at most `from` columns: a piece writes only columns already read.
  char* p = static_cast<char*>(base);
  for (int64_t done = 0; from > 0 && done < count;) {
    const int64_t piece = std::min(count - done, from);
    JAXMG_CUDA(cudaMemcpyAsync(p + done * stride, p + (from + done) * stride, piece * stride,
                               cudaMemcpyDeviceToDevice, stream_));
    done += piece;
  }
  return Status();
}

// cuSOLVERMp's Syevd (one-stage tridiagonal reduction): w := the eigenvalues and, with vectors,
// *z := the eigenvectors.
template <typename T>
Status Engine::LibraryEigh(const Matrix<T>& a, bool vectors, void* w, Matrix<T>* z) {
  const int64_t n = a.rows;
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(NewLike<T>(a, z)));
  return Call(vendor::MpSyevd<T>{ctx_.handle,
                                 vectors,
                                 CUBLAS_FILL_MODE_LOWER,
                                 n,
                                 {a.data, 1, 1, a.desc->get()},
                                 static_cast<RealOf<T>*>(w),
                                 {z->data, 1, 1, z->desc->get()},
                                 small_});
}

template <typename T>
Status Engine::Gesvd(Matrix<T>* a, bool vectors_u, bool vectors_vt, T* x, int64_t x_rows,
                     int64_t x_cols, Matrix<T>* vt_out, int* info) {
  StepTimer timer("Gesvd", stream_);
  *vt_out = Matrix<T>();
  using R = RealOf<T>;
  const layout::Plan& plan = state_.plan;
  if (plan.strategy != layout::Strategy::kRedistribute) {
    return JAXMG_ERROR("the SVD runs on a redistributed matrix");
  }
  const size_t es = sizeof(T);
  const int64_t m = plan.engine_rows(), n = plan.cols.extent;
  JAXMG_CUDA(cudaMemsetAsync(x, 0, es * x_rows * x_cols, stream_));
  // A non-finite input is agreed on first (the agreement's scan of the matrix, no diagonal
  // check): the solver is not run on it.
  JAXMG_RETURN_IF_ERROR(Agree<T>(*a, false, info, /*diag_limit=*/0));
  if (*info != 0) return Status();
  // The values, U (m x n, distributed like the matrix) and Vᴴ (n x n, its columns like a's):
  // a local allocation failure is agreed before the solver's collectives.
  void* s = nullptr;
  Matrix<T> u, vt;
  Status allocated = Scratch(sizeof(R) * std::max<int64_t>(n, 1), &s);
  if (allocated.ok() && vectors_u) allocated = NewLike<T>(*a, &u);
  if (allocated.ok() && vectors_vt) allocated = NewMatrix<T>(n, n, &vt);
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(allocated));
  GesvdOptions options;
  JAXMG_SOLVER(cusolverMpGesvdDescriptorCreate(&options.d));
  const cusolverEigMode_t ju = vectors_u ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  const cusolverEigMode_t jvt = vectors_vt ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  cusolverMpMatrixDescriptor_t du = vectors_u ? u.desc->get() : nullptr;
  cusolverMpMatrixDescriptor_t dvt = vectors_vt ? vt.desc->get() : nullptr;
  JAXMG_RETURN_IF_ERROR(Call(vendor::MpGesvd<T>{ctx_.handle,
                                                options.d,
                                                ju,
                                                jvt,
                                                m,
                                                n,
                                                {a->data, 1, 1, a->desc->get()},
                                                static_cast<R*>(s),
                                                {u.data, 1, 1, du},
                                                {vt.data, 1, 1, dvt},
                                                small_}));
  JAXMG_RETURN_IF_ERROR(AgreeValues<T>(s, n, /*failed=*/false, info));
  // The singular values of x's rows into its last column (real parts).
  JAXMG_CUDA(cudaMemcpy2DAsync(reinterpret_cast<char*>(x) + es * (x_cols - 1), es * x_cols,
                               static_cast<const char*>(s) + sizeof(R) * FirstRow(x_rows),
                               sizeof(R), sizeof(R), x_rows, cudaMemcpyDeviceToDevice, stream_));
  if (vectors_u) *a = u;
  *vt_out = vt;
  return Status();
}

template <typename T>
Status Engine::Sygvd(const Matrix<T>& m, const Matrix<T>& k, bool vectors, EigenRange subset, T* x,
                     Matrix<T>* z_out, int* info) {
  StepTimer timer("Sygvd", stream_);
  if (!subset.all()) return JAXMG_ERROR("the GPU engine computes every eigenpair (no subset)");
  using R = RealOf<T>;
  const size_t es = sizeof(T);
  const int64_t n = m.rows, t = m.tile, lr = m.local_rows, lc = m.local_cols;
  *z_out = Matrix<T>();
  JAXMG_CUDA(cudaMemsetAsync(x, 0, es * n, stream_));
  // A non-finite A is agreed on first (the agreement's scan, no diagonal check); a non-finite
  // B ends as a failed factorization or non-finite eigenvalues.
  JAXMG_RETURN_IF_ERROR(Agree<T>(m, false, info, /*diag_limit=*/0));
  if (*info != 0) return Status();
  // The values, the vectors, their descriptor and the workspace, agreed before the solver.
  void *w = nullptr, *z = nullptr;
  Deferred buffers;
  buffers.Run([&] { return Scratch(sizeof(R) * std::max<int64_t>(n, 1), &w); });
  buffers.Run([&] { return Scratch(es * std::max<int64_t>(lr * lc, 1), &z); });
  Descriptor desc_z;
  buffers.Run(
      [&] { return desc_z.Create(ctx_, DataTypeOf<T>(), n, n, t, t, std::max<int64_t>(lr, 1)); });
  const cusolverEigMode_t jobz = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  const vendor::MpSygvd<T> sygvd{ctx_.handle,
                                 jobz,
                                 CUBLAS_FILL_MODE_LOWER,
                                 n,
                                 {m.data, 1, 1, m.desc->get()},
                                 {k.data, 1, 1, k.desc->get()},
                                 static_cast<R*>(w),
                                 {static_cast<T*>(z), 1, 1, desc_z.get()},
                                 small_};
  size_t dev = 0, host = 0;
  vendor::Work work;
  buffers.Run([&] { return vendor::Size(sygvd, &dev, &host); });
  buffers.Run([&] { return Workspace(dev, host, &work); });
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(buffers.status()));
  // cuSOLVERMp 0.9.1 answers a B that is not positive definite (or holds NaN) with
  // INTERNAL_ERROR rather than an info (found on 2 H200s): status n + 1, agreed below.
  const cusolverStatus_t st = sygvd.Raw(work);
  const bool failed =
      st == CUSOLVER_STATUS_INTERNAL_ERROR || st == CUSOLVER_STATUS_EXECUTION_FAILED;
  if (!failed) JAXMG_RETURN_IF_ERROR(SolverCheck(st, vendor::MpSygvd<T>::kCall));
  // (The solver's info n + i: B's minor of order i is not positive definite.)
  JAXMG_RETURN_IF_ERROR(AgreeValues<T>(w, n, failed, info));
  JAXMG_CUDA(
      cudaMemcpy2DAsync(x, es, w, sizeof(R), sizeof(R), n, cudaMemcpyDeviceToDevice, stream_));
  if (vectors) {  // the eigenvectors (k's descriptor describes z: the same layout)
    *z_out = k;
    z_out->data = static_cast<T*>(z);
  }
  return Status();
}

template <typename T>
Status Engine::Gemm(char op_b, const Matrix<T>& k, char op_a, const Matrix<T>& m, Matrix<T>* c) {
  StepTimer timer("Gemm", stream_);
  const int64_t n = m.rows, t = m.tile;
  const auto op = [](char o) {
    if (o == 'N') return CUBLAS_OP_N;
    return o == 'C' && Scalar<T>::kParts == 2 ? CUBLAS_OP_C : CUBLAS_OP_T;
  };
  // c: new scratch distributed like m (m's descriptor describes it).
  *c = m;
  c->factored = Factorization::kNone;
  Deferred buffers;  // c and the descriptors, agreed before the product
  buffers.Run([&] {
    return Scratch(sizeof(T) * std::max<int64_t>(m.local_rows * m.local_cols, 1), &c->data);
  });
  BlasDescriptor da, db, dc;
  buffers.Run([&] { return da.Create(ctx_, DataTypeOf<T>(), n, n, t, t, m.ld); });
  buffers.Run([&] { return db.Create(ctx_, DataTypeOf<T>(), n, n, t, t, k.ld); });
  buffers.Run([&] { return dc.Create(ctx_, DataTypeOf<T>(), n, n, t, t, c->ld); });
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(buffers.status()));
  JAXMG_BLASMP(cublasMpSetStream(ctx_.blas, stream_));
  JAXMG_RETURN_IF_ERROR(Call(vendor::BlasMpGemm<T>{ctx_.blas,
                                                   op(op_b),
                                                   op(op_a),
                                                   n,
                                                   n,
                                                   n,
                                                   T(1),
                                                   {k.data, 1, 1, db.get()},
                                                   {m.data, 1, 1, da.get()},
                                                   T(0),
                                                   {c->data, 1, 1, dc.get()}}));
  return Status();
}

// The status (Agree on the diagonal alone: the other triangle is not read), then cuBLASMp's Trsm
// (on one device, cuBLAS's).
template <typename T>
Status Engine::Trsm(char side, char uplo, char op, char diag, const Matrix<T>& a,
                    const Matrix<T>& c, int* info) {
  StepTimer timer("Trsm", stream_);
  const bool unit = diag == 'U';
  // The status from the diagonal alone (the other triangle may hold anything), agreed with the
  // position check; nothing solved on a zero or non-finite diagonal entry.
  JAXMG_RETURN_IF_ERROR(Agree<T>(a, false, info, unit ? 0 : -1, /*scan=*/false));
  if (*info != 0 || c.rows == 0 || c.cols == 0) return Status();
  const int64_t n = a.rows, t = a.tile, m = c.rows, k = c.cols;
  const int64_t lda = a.ld, ldb = c.ld;
  const cublasSideMode_t s = side == 'L' ? CUBLAS_SIDE_LEFT : CUBLAS_SIDE_RIGHT;
  const cublasFillMode_t fill = uplo == 'L' ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;
  const cublasOperation_t o = op == 'N' ? CUBLAS_OP_N : op == 'T' ? CUBLAS_OP_T : AdjointOp<T>();
  const cublasDiagType_t d = unit ? CUBLAS_DIAG_UNIT : CUBLAS_DIAG_NON_UNIT;
  const T one(1);
  if (OneDevice()) {  // the local arrays are the matrices: cuBLAS's trsm
    const LocalBlas* lb = nullptr;
    cublasHandle_t blas = nullptr;
    JAXMG_RETURN_IF_ERROR(LocalHandle(&lb, &blas));
    int im = 0, ik = 0, ilda = 0, ildb = 0;
    JAXMG_RETURN_IF_ERROR(CheckedInt(m, "right-hand side rows", &im));
    JAXMG_RETURN_IF_ERROR(CheckedInt(k, "right-hand side columns", &ik));
    JAXMG_RETURN_IF_ERROR(CheckedInt(lda, "leading dimension", &ilda));
    JAXMG_RETURN_IF_ERROR(CheckedInt(ldb, "leading dimension", &ildb));
    return CublasCheck(
        lb->trsm[Scalar<T>::kIndex](blas, s, fill, o, d, im, ik, &one, a.data, ilda, c.data, ildb),
        "cublas trsm");
  }
  // Descriptors and the workspace first, agreed: the solve is collective.
  BlasDescriptor da, db;
  Deferred local;
  local.Run([&] { return da.Create(ctx_, DataTypeOf<T>(), n, n, t, t, lda); });
  local.Run([&] { return db.Create(ctx_, DataTypeOf<T>(), m, k, t, t, ldb); });
  local.Run(
      [&] { return BlasMpCheck(cublasMpSetStream(ctx_.blas, stream_), "cublasMpSetStream"); });
  const vendor::BlasMpTrsm<T> trsm{
      ctx_.blas, s, fill, o, d, m, k, one, {a.data, 1, 1, da.get()}, {c.data, 1, 1, db.get()}};
  size_t dev = 0, host = 0;
  local.Run([&] { return vendor::Size(trsm, &dev, &host); });
  vendor::Work work;
  local.Run([&] { return Workspace(dev, host, &work); });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("solve_triangular", local));
  return vendor::Run(trsm, work);
}

#define JAXMG_INSTANTIATE_VENDOR(T)                                                                \
  template Status Engine::LocalGetrs<T>(const Matrix<T>& lu, const std::vector<int64_t>& piv,      \
                                        const Matrix<T>& c, bool transpose);                       \
  template Status Engine::Potrf<T>(Matrix<T> * a, int* info);                                      \
  template Status Engine::Getrf<T>(Matrix<T> * a, Pivots * piv, int* info);                        \
  template Status Engine::Potrs<T>(const Matrix<T>& l, const Matrix<T>& c);                        \
  template Status Engine::Getrs<T>(const Matrix<T>& lu, const Pivots& piv, const Matrix<T>& c,     \
                                   bool transpose);                                                \
  template Status Engine::Geqrf<T>(Matrix<T> * a, Reflectors * tau, int* info);                    \
  template Status Engine::QrSolve<T>(const Matrix<T>& a, const Matrix<T>& rhs, int* info,          \
                                     T** solution);                                                \
  template Status Engine::QrFactor<T>(const Matrix<T>& a, Reflectors* tau);                        \
  template Status Engine::Orgqr<T>(Matrix<T> * a, const Reflectors& tau);                          \
  template Status Engine::Gels<T>(Matrix<T> * a, const Matrix<T>& c, Matrix<T>* z, int* info);     \
  template Status Engine::Eigh<T>(const Matrix<T>& a, bool vectors, EigenRange subset, T* x,       \
                                  Matrix<T>* z, int* info);                                        \
  template Status Engine::LibraryEigh<T>(const Matrix<T>& a, bool vectors, void* w, Matrix<T>* z); \
  template Status Engine::Gesvd<T>(Matrix<T> * a, bool vectors_u, bool vectors_vt, T* x,           \
                                   int64_t x_rows, int64_t x_cols, Matrix<T>* vt, int* info);      \
  template Status Engine::Sygvd<T>(const Matrix<T>& m, const Matrix<T>& k, bool vectors,           \
                                   EigenRange subset, T* x, Matrix<T>* z, int* info);              \
  template Status Engine::Gemm<T>(char op_b, const Matrix<T>& k, char op_a, const Matrix<T>& m,    \
                                  Matrix<T>* c);                                                   \
  template Status Engine::Trsm<T>(char side, char uplo, char op, char diag, const Matrix<T>& m,    \
                                  const Matrix<T>& c, int* info);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_VENDOR)
#undef JAXMG_INSTANTIATE_VENDOR

}  // namespace jaxmg::cusolvermp
