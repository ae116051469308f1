// The GPU engine's backend for the algorithms written once over a backend (csrc/algorithms/):
// local steps with cusolverDn, cuBLAS and the engine's kernels on the call's stream, buffers from
// XLA's scratch allocator, collectives over the context's NCCL communicator (grid columns are
// NCCL ranks on the 1 x P grids the 1-D algorithms run on), distributed products with cuBLASMp
// on the engine's grid, agreement through the engine's.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <utility>
#include <vector>

#include "algorithms/inverses.h"
#include "algorithms/qdwh.h"
#include "common/deferred.h"
#include "common/scalar.h"
#include "common/status.h"
#include "cuda/band.h"
#include "cuda/kernels.h"
#include "engines/cusolvermp/engine.h"
#include "engines/cusolvermp/engine_internal.h"
#include "engines/cusolvermp/engine_util.h"
#include "engines/cusolvermp/local_blas.h"

namespace jaxmg::cusolvermp {

class Backend {
 public:
  explicit Backend(Engine& e) : e_(e) {}
  // The lanes of the 1-D Cholesky's and the 1-D QR's look-ahead: the call's stream and handles,
  // or the look-ahead's side stream and its own.
  using Lane = Engine::Lane;
  Status MainLane(Lane* out) { return e_.MainLane(out); }
  Status SideLane(Lane* out) { return e_.SideLane(out); }
  Status Join(const Lane& from, const Lane& to, int event) {
    return e_.Join(from.stream, to.stream, event);
  }
  // (no tridiagonal solve of some pairs alone: a subset's come from Stedc's, band_eigh.h)
  static constexpr bool kTridiagonalPairs = false;

  template <typename U>
  Status Buffer(int64_t count, U** out) {
    void* p = nullptr;
    JAXMG_RETURN_IF_ERROR(e_.Scratch(sizeof(U) * static_cast<size_t>(count), &p));
    JAXMG_CUDA(cudaMemsetAsync(p, 0, sizeof(U) * static_cast<size_t>(count), e_.stream_));
    *out = static_cast<U*>(p);
    return Status();
  }

  template <typename T>
  Status PrepareGetrf(int64_t m, int64_t n, T* a, int64_t lda) {
    JAXMG_RETURN_IF_ERROR(Solver());
    size_t dev = 0, host = 0;
    JAXMG_RETURN_IF_ERROR(vendor::Size(
        vendor::DnGetrf<T>{{lb_, dn_, params_}, m, n, a, lda, nullptr, nullptr}, &dev, &host));
    JAXMG_RETURN_IF_ERROR(e_.Workspace(dev, host, &work_));
    void* info = nullptr;
    JAXMG_RETURN_IF_ERROR(e_.Scratch(sizeof(int), &info));
    info_ = static_cast<int*>(info);
    return Status();
  }

  template <typename T>
  Status Getrf(int64_t m, int64_t n, T* a, int64_t lda, int64_t* piv) {
    return vendor::Run(vendor::DnGetrf<T>{{lb_, dn_, params_}, m, n, a, lda, piv, info_}, work_);
  }

  template <typename T>
  Status Copy(T* dst, int64_t ldd, const T* src, int64_t lds, int64_t m, int64_t n) {
    JAXMG_CUDA(cudaMemcpy2DAsync(dst, sizeof(T) * ldd, src, sizeof(T) * lds, sizeof(T) * m, n,
                                 cudaMemcpyDeviceToDevice, e_.stream_));
    return Status();
  }

  // a (na scalars) and b (nb entries: scalars, or int64_t pivots) from grid column root, grouped.
  template <typename T, typename U>
  Status Broadcast(T* a, int64_t na, U* b, int64_t nb, int root) {
    PartTimer part("broadcast");
    JAXMG_NCCL(ncclGroupStart());
    JAXMG_NCCL(ncclBroadcast(a, a, static_cast<size_t>(na) * Scalar<T>::kParts, NcclRealOf<T>(),
                             root, e_.ctx_.comm, e_.stream_));
    if (nb > 0) {
      if constexpr (std::is_same_v<U, int64_t>) {
        JAXMG_NCCL(ncclBroadcast(b, b, nb, ncclInt64, root, e_.ctx_.comm, e_.stream_));
      } else {
        JAXMG_NCCL(ncclBroadcast(b, b, static_cast<size_t>(nb) * Scalar<U>::kParts, NcclRealOf<U>(),
                                 root, e_.ctx_.comm, e_.stream_));
      }
    }
    JAXMG_NCCL(ncclGroupEnd());
    return Status();
  }

  template <typename T>
  Status RowSwaps(T* a, int64_t lda, int64_t cols, int64_t skip_begin, int64_t skip_end,
                  int64_t row0, const int64_t* piv, int64_t count) {
    JAXMG_CUDA(cuda::RowSwaps(KernelType<T>(), a, lda, 0, cols, skip_begin, skip_end, row0, piv,
                              count, e_.stream_));
    return Status();
  }

  template <typename T>
  Status TrsmLowerUnit(int64_t m, int64_t n, const T* l, int64_t ldl, T* b, int64_t ldb) {
    int im = 0, in = 0, il = 0, ib = 0;
    JAXMG_RETURN_IF_ERROR(CheckedInt(m, "rows", &im));
    JAXMG_RETURN_IF_ERROR(CheckedInt(n, "columns", &in));
    JAXMG_RETURN_IF_ERROR(CheckedInt(ldl, "leading dimension", &il));
    JAXMG_RETURN_IF_ERROR(CheckedInt(ldb, "leading dimension", &ib));
    const T one(1);
    return CublasCheck(
        lb_->trsm[Scalar<T>::kIndex](blas_, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N,
                                     CUBLAS_DIAG_UNIT, im, in, &one, l, il, b, ib),
        "cublas trsm");
  }

  // c −= a op(b), op_b 'N' (b) or 'C' (bᴴ): the 1-D LU's trailing updates (the 1-D Cholesky's
  // go through Gemm on a lane, for its look-ahead).
  template <typename T>
  Status GemmMinus(char op_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
                   int64_t ldb, T* c, int64_t ldc) {
    int im = 0, in = 0, ik = 0, ia = 0, ib = 0, ic = 0;
    JAXMG_RETURN_IF_ERROR(Ints({{m, &im}, {n, &in}, {k, &ik}, {lda, &ia}, {ldb, &ib}, {ldc, &ic}}));
    const T one(1), minus_one(-1);
    return CublasCheck(
        lb_->gemm[Scalar<T>::kIndex](blas_, CUBLAS_OP_N, op_b == 'N' ? CUBLAS_OP_N : AdjointOp<T>(),
                                     im, in, ik, &minus_one, a, ia, b, ib, &one, c, ic),
        "cublas gemm");
  }

  // The 1-D Cholesky's local steps (algorithms/cholesky_1d.h), on a lane (below). With
  // JAXMG_DEBUG=2 their times are summed by kind (PartTimer).
  //
  // The workspace of potrf of at most n x n (one for both lanes: the panels never run at the
  // same time), and where the panel solve goes by the inverse (TF32, below) its scratch: the
  // inverse (n x n) and the product (m x n).
  template <typename T>
  Status PreparePanel(int64_t n, int64_t m, T* a, int64_t lda) {
    JAXMG_RETURN_IF_ERROR(Solver());
    size_t dev = 0, host = 0;
    JAXMG_RETURN_IF_ERROR(vendor::Size(
        vendor::DnPotrf<T>{{lb_, dn_, params_}, CUBLAS_FILL_MODE_LOWER, n, a, lda, nullptr}, &dev,
        &host));
    JAXMG_RETURN_IF_ERROR(e_.Workspace(dev, host, &work_));
    if (!SolveByInverse<T>()) return Status();
    void* p = nullptr;
    JAXMG_RETURN_IF_ERROR(e_.Scratch(sizeof(T) * static_cast<size_t>(n * (n + m)), &p));
    inverse_ = p;
    return Status();
  }

  template <typename T>
  Status Potrf(const Lane& lane, int64_t n, T* a, int64_t lda, int* info) {
    PartTimer part("potrf");
    return vendor::Run(
        vendor::DnPotrf<T>{
            {lane.lb, lane.dn, lane.params}, CUBLAS_FILL_MODE_LOWER, n, a, lda, info},
        work_);
  }

  // b := b L⁻ᴴ (L n x n lower). In TF32 (config.gpu_math = tf32, float32 and complex64) by L's
  // inverse and a product, on tensor cores: cuBLAS's trsm runs at about 12 TFLOPs there, 5 % of
  // the product's rate (one H100, N = 32768, tiles of 1024 and 2048: the panel solves took 46
  // ms of the factorization's 105 ms; by the inverse the factorization took 86 ms; bench/results/
  // cholesky_blocks_probe_h100x1_9af010f.json). The inverse, L⁻¹ = trsm(L, I), is exactly lower
  // triangular; its rounding is of the order of the factor's own in TF32.
  template <typename T>
  Status TrsmRightLowerAdjoint(const Lane& lane, int64_t m, int64_t n, const T* l, int64_t ldl,
                               T* b, int64_t ldb) {
    int im = 0, in = 0, il = 0, ib = 0;
    JAXMG_RETURN_IF_ERROR(Ints({{m, &im}, {n, &in}, {ldl, &il}, {ldb, &ib}}));
    PartTimer part("panel solve");
    const T one(1), zero(0);
    if (!SolveByInverse<T>()) {
      return CublasCheck(lane.lb->trsm[Scalar<T>::kIndex](
                             lane.blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, AdjointOp<T>(),
                             CUBLAS_DIAG_NON_UNIT, im, in, &one, l, il, b, ib),
                         "cublas trsm");
    }
    T* inverse = static_cast<T*>(inverse_);
    T* product = inverse + n * n;
    JAXMG_CUDA(cuda::IdentityBlock(KernelType<T>(), inverse, n, n, n, 0, lane.stream));
    JAXMG_RETURN_IF_ERROR(CublasCheck(
        lane.lb->trsm[Scalar<T>::kIndex](lane.blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER,
                                         CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, in, in, &one, l, il,
                                         inverse, in),
        "cublas trsm"));
    JAXMG_RETURN_IF_ERROR(CublasCheck(
        lane.lb->gemm[Scalar<T>::kIndex](lane.blas, CUBLAS_OP_N, AdjointOp<T>(), im, in, in, &one,
                                         b, ib, inverse, in, &zero, product, im),
        "cublas gemm"));
    return Copy(lane, b, ldb, static_cast<const T*>(product), m, m, n);
  }

  template <typename T>
  Status Copy(const Lane& lane, T* dst, int64_t ldd, const T* src, int64_t lds, int64_t m,
              int64_t n) {
    JAXMG_CUDA(cudaMemcpy2DAsync(dst, sizeof(T) * ldd, src, sizeof(T) * lds, sizeof(T) * m, n,
                                 cudaMemcpyDeviceToDevice, lane.stream));
    return Status();
  }

  Status InfosOut(const int* infos, int64_t count, int* host) {
    JAXMG_CUDA(
        cudaMemcpyAsync(host, infos, sizeof(int) * count, cudaMemcpyDeviceToHost, e_.stream_));
    JAXMG_CUDA(cudaStreamSynchronize(e_.stream_));
    return Status();
  }

  Status PivotsOut(const int64_t* piv, int64_t count, int64_t* host) {
    JAXMG_CUDA(
        cudaMemcpyAsync(host, piv, sizeof(int64_t) * count, cudaMemcpyDeviceToHost, e_.stream_));
    JAXMG_CUDA(cudaStreamSynchronize(e_.stream_));
    return Status();
  }

  Status Agree(const char* algorithm, const Status& local) {
    return e_.AgreeOnFailure(algorithm, local);
  }

  // The 1-D QR's local steps (algorithms/qr_1d.h), on a lane. With JAXMG_DEBUG=2 their times
  // are summed by kind (PartTimer; the device is synchronized around each).

  // geqrf's workspace for panels of at most m x n (one for both lanes: their panels never run
  // at the same time).
  template <typename T>
  Status PrepareGeqrf(int64_t m, int64_t n, T* a, int64_t lda, T* tau) {
    Lane main;
    JAXMG_RETURN_IF_ERROR(MainLane(&main));
    size_t dev = 0, host = 0;
    JAXMG_RETURN_IF_ERROR(vendor::Size(
        vendor::DnGeqrf<T>{{main.lb, main.dn, main.params}, m, n, a, lda, tau, nullptr}, &dev,
        &host));
    JAXMG_RETURN_IF_ERROR(e_.Workspace(dev, host, &work_));
    void* info = nullptr;
    JAXMG_RETURN_IF_ERROR(e_.Scratch(sizeof(int), &info));
    info_ = static_cast<int*>(info);
    return Status();
  }

  template <typename T>
  Status Geqrf(const Lane& lane, int64_t m, int64_t n, T* a, int64_t lda, T* tau) {
    PartTimer part("panel geqrf");
    return vendor::Run(
        vendor::DnGeqrf<T>{{lane.lb, lane.dn, lane.params}, m, n, a, lda, tau, info_}, work_);
  }

  template <typename T>
  Status Gemm(const Lane& lane, bool adjoint_a, bool adjoint_b, int64_t m, int64_t n, int64_t k,
              T alpha, const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c,
              int64_t ldc) {
    int im = 0, in = 0, ik = 0, ia = 0, ib = 0, ic = 0;
    JAXMG_RETURN_IF_ERROR(Ints({{m, &im}, {n, &in}, {k, &ik}, {lda, &ia}, {ldb, &ib}, {ldc, &ic}}));
    PartTimer part("gemm");
    return CublasCheck(
        lane.lb->gemm[Scalar<T>::kIndex](lane.blas, adjoint_a ? AdjointOp<T>() : CUBLAS_OP_N,
                                         adjoint_b ? AdjointOp<T>() : CUBLAS_OP_N, im, in, ik,
                                         &alpha, a, ia, b, ib, &beta, c, ic),
        "cublas gemm");
  }

  template <typename T>
  Status Trmm(const Lane& lane, bool adjoint, int64_t m, int64_t n, const T* f, int64_t ldf,
              const T* w, int64_t ldw, T* out, int64_t ldo) {
    int im = 0, in = 0, i_f = 0, iw = 0, io = 0;
    JAXMG_RETURN_IF_ERROR(Ints({{m, &im}, {n, &in}, {ldf, &i_f}, {ldw, &iw}, {ldo, &io}}));
    PartTimer part("trmm");
    const T one(1);
    return CublasCheck(lane.lb->trmm[Scalar<T>::kIndex](
                           lane.blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER,
                           adjoint ? AdjointOp<T>() : CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, im, in,
                           &one, f, i_f, w, iw, out, io),
                       "cublas trmm");
  }

  template <typename T>
  Status TrsmUpper(const Lane& lane, int64_t m, int64_t n, const T* s, int64_t lds, T* b,
                   int64_t ldb) {
    int im = 0, in = 0, is = 0, ib = 0;
    JAXMG_RETURN_IF_ERROR(Ints({{m, &im}, {n, &in}, {lds, &is}, {ldb, &ib}}));
    PartTimer part("trsm");
    const T one(1);
    return CublasCheck(lane.lb->trsm[Scalar<T>::kIndex](
                           lane.blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                           CUBLAS_DIAG_NON_UNIT, im, in, &one, s, is, b, ib),
                       "cublas trsm");
  }

  template <typename T>
  Status ReflectorBlock(const Lane& lane, const T* a, int64_t lda, int64_t rows, int64_t cols,
                        const T* tau, T* v, int64_t ldv) {
    JAXMG_CUDA(cuda::ReflectorBlock(KernelType<T>(), a, lda, rows, cols, tau, v, ldv, lane.stream));
    return Status();
  }

  template <typename T>
  Status ReflectorDiagonal(const Lane& lane, T* s, int64_t ld, int64_t k, const T* tau) {
    JAXMG_CUDA(cuda::ReflectorFactor(KernelType<T>(), s, ld, k, tau, lane.stream));
    return Status();
  }

  template <typename T>
  Status IdentityBlock(const Lane& lane, T* a, int64_t ld, int64_t rows, int64_t cols,
                       int64_t row0) {
    JAXMG_CUDA(cuda::IdentityBlock(KernelType<T>(), a, ld, rows, cols, row0, lane.stream));
    return Status();
  }

  template <typename T>
  Status Adjoint(const Lane& lane, const T* src, int64_t lds, int64_t rows, int64_t cols, T* dst,
                 int64_t ldd) {
    JAXMG_CUDA(cuda::Adjoint(KernelType<T>(), src, lds, rows, cols, dst, ldd, lane.stream));
    return Status();
  }

  // The band reduction's steps (algorithms/band_reduce.h), on a lane; the sums over NCCL.
  template <typename T>
  Status TrmmRight(const Lane& lane, int64_t m, int64_t n, const T* f, int64_t ldf, const T* x,
                   int64_t ldx, T* out, int64_t ldo) {
    int im = 0, in = 0, i_f = 0, ix = 0, io = 0;
    JAXMG_RETURN_IF_ERROR(Ints({{m, &im}, {n, &in}, {ldf, &i_f}, {ldx, &ix}, {ldo, &io}}));
    PartTimer part("trmm");
    const T one(1);
    return CublasCheck(lane.lb->trmm[Scalar<T>::kIndex](
                           lane.blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                           CUBLAS_DIAG_NON_UNIT, im, in, &one, f, i_f, x, ix, out, io),
                       "cublas trmm");
  }

  template <typename T>
  Status Zero(const Lane& lane, T* p, int64_t count) {
    JAXMG_CUDA(cudaMemsetAsync(p, 0, sizeof(T) * static_cast<size_t>(count), lane.stream));
    return Status();
  }

  template <typename T>
  Status CyclicRows(const Lane& lane, bool to_global, T* local, int64_t ldl, int64_t count,
                    int64_t cols, int64_t first, int64_t t, int procs, int me, int64_t offset,
                    T* global, int64_t ldg, int64_t shift) {
    JAXMG_CUDA(cuda::CyclicRows(KernelType<T>(), to_global, local, ldl, count, cols, first, t,
                                procs, me, offset, global, ldg, shift, lane.stream));
    return Status();
  }

  template <typename T>
  Status BandFromColumns(const Lane& lane, const T* a, int64_t lda, int64_t row0, int64_t c0,
                         int64_t cols, int64_t n, int64_t b, T* band) {
    JAXMG_CUDA(
        cuda::BandFromColumns(KernelType<T>(), a, lda, row0, c0, cols, n, b, band, lane.stream));
    return Status();
  }

  template <typename T>
  Status AllreduceSum(T* x, int64_t count) {
    PartTimer part("all-reduce");
    JAXMG_NCCL(ncclAllReduce(x, x, static_cast<size_t>(count) * Scalar<T>::kParts, NcclRealOf<T>(),
                             ncclSum, e_.ctx_.comm, e_.stream_));
    return Status();
  }

  template <typename T>
  Status ReduceToRoot(T* x, int64_t count) {
    JAXMG_NCCL(ncclReduce(x, x, static_cast<size_t>(count) * Scalar<T>::kParts, NcclRealOf<T>(),
                          ncclSum, 0, e_.ctx_.comm, e_.stream_));
    return Status();
  }

  // The chase, the tridiagonal solve and Q₂ (algorithms/band_chase.h, band_eigh.h): the band
  // kernels (cuda/band.h), cuBLAS's strided batched gemm, cuSOLVERMp's Stedc and cuBLASMp's
  // transpose on the grid. Stage: the step's timer (JAXMG_DEBUG).
  StepTimer Stage(const char* name) { return StepTimer(name, e_.stream_); }

  template <typename T>
  Status ChaseBand(const Lane& lane, T* band, int64_t n, int64_t b, int* sync, T* v2, T* tau2) {
    JAXMG_CUDA(cuda::BandToTridiagonal(KernelType<T>(), band, n, b, sync, v2, tau2, lane.stream));
    return Status();
  }

  template <typename T>
  Status TridiagonalOf(const Lane& lane, const T* band, int64_t n, int64_t b, RealOf<T>* d,
                       RealOf<T>* e, T* phase) {
    JAXMG_CUDA(cuda::TridiagonalOf(KernelType<T>(), band, n, b, d, e, phase, lane.stream));
    return Status();
  }

  template <typename T>
  Status TridiagonalValues(const Lane& lane, const T* band, int64_t n, int64_t b, double* scratch,
                           RealOf<T>* w) {
    JAXMG_CUDA(cuda::TridiagonalEigenvalues(KernelType<T>(), band, n, b, scratch, w, lane.stream));
    return Status();
  }

  template <typename T>
  Status PhaseRows(const Lane& lane, const RealOf<T>* q, int64_t ldq, const T* phase, int64_t rows,
                   int64_t cols, T* z, int64_t ldz) {
    JAXMG_CUDA(cuda::PhaseRows(KernelType<T>(), q, ldq, phase, rows, cols, z, ldz, lane.stream));
    return Status();
  }

  template <typename T>
  Status WaveBlocks(const Lane& lane, const T* v2, const T* tau2, int64_t n, int64_t b, int64_t ell,
                    int64_t g0, int64_t j0, int64_t count, int64_t ldv, T* vb, T* taub) {
    JAXMG_CUDA(cuda::WaveBlocks(KernelType<T>(), v2, tau2, n, b, ell, g0, j0, count, ldv, vb, taub,
                                lane.stream));
    return Status();
  }

  // Q₂'s fused wave (cuda/band.h WaveApply: float64 on the tensor cores); the W scratch is the
  // CPU backend's.
  template <typename T>
  bool WaveApplies(int64_t b, int64_t ell) const {
    return cuda::WaveApplies(KernelType<T>(), b, ell);
  }
  template <typename T>
  Status WaveApply(const Lane& lane, const T* vb, int64_t ldv, const T* t, int64_t b, int64_t ell,
                   int64_t count, T* z, int64_t ldz, int64_t stride, int64_t cols, T* /*w*/,
                   int64_t /*w_count*/) {
    JAXMG_CUDA(cuda::WaveApply(KernelType<T>(), vb, ldv, t, b, ell, count, z, ldz, stride, cols,
                               lane.stream));
    return Status();
  }

  template <typename T>
  Status WaveFactors(const Lane& lane, const T* s, const T* taub, int64_t ell, int64_t count,
                     T* t) {
    JAXMG_CUDA(cuda::WaveFactors(KernelType<T>(), s, taub, ell, count, t, lane.stream));
    return Status();
  }

  template <typename T>
  Status GemmStrided(const Lane& lane, bool adjoint_a, bool adjoint_b, int64_t m, int64_t n,
                     int64_t k, T alpha, const T* a, int64_t lda, int64_t stride_a, const T* b,
                     int64_t ldb, int64_t stride_b, T beta, T* c, int64_t ldc, int64_t stride_c,
                     int64_t count) {
    int im = 0, in = 0, ik = 0, ia = 0, ib = 0, ic = 0, icount = 0;
    JAXMG_RETURN_IF_ERROR(
        Ints({{m, &im}, {n, &in}, {k, &ik}, {lda, &ia}, {ldb, &ib}, {ldc, &ic}, {count, &icount}}));
    return CublasCheck(lane.lb->gemm_batched[Scalar<T>::kIndex](
                           lane.blas, adjoint_a ? AdjointOp<T>() : CUBLAS_OP_N,
                           adjoint_b ? AdjointOp<T>() : CUBLAS_OP_N, im, in, ik, &alpha, a, ia,
                           stride_a, b, ib, stride_b, &beta, c, ic, stride_c, icount),
                       "cublas gemm (strided batched)");
  }

  // Q := the real symmetric tridiagonal matrix's eigenvectors (distributed as the engine's
  // matrix), d := its eigenvalues; its status in the engine's (small_). Descriptor and
  // workspace agreed before the collective call.
  template <typename R>
  Status Stedc(int64_t n, int64_t t, R* d, R* e, R* q, int64_t ldq) {
    Descriptor desc;
    std::vector<int> iwork(std::max<int64_t>(n, 2 * e_.ctx_.nprow * e_.ctx_.npcol + 1));
    const auto stedc = [&] {
      return vendor::MpStedc<R>{e_.ctx_.handle, n,        d, e, {q, 1, 1, desc.get()},
                                iwork.data(),   e_.small_};
    };
    return Collective(
        [&](size_t* dev, size_t* host) -> Status {
          JAXMG_RETURN_IF_ERROR(desc.Create(e_.ctx_, DataTypeOf<R>(), n, n, t, t, ldq));
          return vendor::Size(stedc(), dev, host);
        },
        [&](const vendor::Work& work) { return vendor::Run(stedc(), work); });
  }

  // y := qᵀ, both distributed as the engine's matrix (n x n, tiles of t, leading dimension ld).
  template <typename U>
  Status GridAdjoint(int64_t, int64_t, int64_t, const U* q, U* y) {
    return e_.GridAdjoint<U>(q, y);
  }

  // The distributed products (algorithms/inverses.h): every operand distributed as g, on the
  // engine's cuBLASMp grid, with the engine's workspace.
  template <typename T>
  Status PrepareSquare(const algorithms::Distribution& g) {
    if (square_.get() == nullptr) {
      JAXMG_RETURN_IF_ERROR(
          square_.Create(e_.ctx_, DataTypeOf<T>(), g.rows, g.cols, g.tile(), g.tile(), g.ld));
    }
    return BlasMpCheck(cublasMpSetStream(e_.ctx_.blas, e_.stream_), "cublasMpSetStream");
  }

  template <typename T>
  Status PTrsm(algorithms::Pass pass, bool upper, bool unit, int64_t m, int64_t n, const T* a,
               int64_t ia, int64_t ja, T* b, int64_t ib, int64_t jb) {
    const cublasFillMode_t fill = upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
    const cublasDiagType_t diag = unit ? CUBLAS_DIAG_UNIT : CUBLAS_DIAG_NON_UNIT;
    cublasMpMatrixDescriptor_t d = square_.get();
    const vendor::BlasMpTrsm<T> trsm{
        e_.ctx_.blas, CUBLAS_SIDE_LEFT, fill,          CUBLAS_OP_N, diag, m, n,
        T(1),         {a, ia, ja, d},   {b, ib, jb, d}};
    return PassCall(pass, trsm);
  }

  template <typename T>
  Status PGemm(algorithms::Pass pass, bool adjoint_a, int64_t m, int64_t n, int64_t k, const T* a,
               int64_t ia, int64_t ja, const T* b, int64_t ib, int64_t jb, T* c, int64_t ic,
               int64_t jc) {
    const cublasOperation_t op = adjoint_a ? AdjointOp<T>() : CUBLAS_OP_N;
    cublasMpMatrixDescriptor_t d = square_.get();
    const vendor::BlasMpGemm<T> gemm{
        e_.ctx_.blas,   op,   CUBLAS_OP_N,   m, n, k, T(1), {a, ia, ja, d},
        {b, ib, jb, d}, T(1), {c, ic, jc, d}};
    return PassCall(pass, gemm);
  }

  Status PWorkspace() { return e_.Workspace(pdev_, phost_, &pwork_); }

  // Column i of x to column order[i] of out (the engine's columns; Engine::PermuteColumns).
  template <typename T>
  Status PMoveColumns(const T* x, T* out, const std::vector<int64_t>& order) {
    Deferred moved;
    JAXMG_RETURN_IF_ERROR(e_.PermuteColumns<T>(x, out, order, &moved));
    return moved.status();
  }

  // QDWH's steps (algorithms/qdwh.h): kernels on the call's stream, NCCL sums, and cuBLASMp and
  // cuSOLVERMp on the engine's grid, each collective call's descriptors and workspace agreed
  // before it.
  template <typename T>
  using Tiled = algorithms::Tiled<T>;

  template <typename T>
  Status AbsSums(const Tiled<T>& u, double* sums) {
    const Context& c = e_.ctx_;
    JAXMG_CUDA(cudaMemsetAsync(sums, 0, sizeof(double) * (u.rows() + u.cols()), e_.stream_));
    JAXMG_CUDA(cuda::AbsSums(KernelType<T>(), u.p, u.lr(), u.lc(), u.t(), c.nprow, c.npcol, c.myrow,
                             c.mycol, sums, sums + u.cols(), e_.stream_));
    return Status();
  }

  Status SumOverGrid(double* sums, int64_t count, double* host) {
    JAXMG_NCCL(ncclAllReduce(sums, sums, count, ncclDouble, ncclSum, e_.ctx_.comm, e_.stream_));
    JAXMG_CUDA(
        cudaMemcpyAsync(host, sums, sizeof(double) * count, cudaMemcpyDeviceToHost, e_.stream_));
    JAXMG_CUDA(cudaStreamSynchronize(e_.stream_));
    return Status();
  }

  Status AgreeOnValue(double* value) { return e_.AgreeOnValue(value); }
  Status MaxOverGrid(int64_t* value) { return BoundedAllreduceMax(e_.ctx_, value, 1); }

  template <typename T>
  Status Scale(const Tiled<T>& u, double s) {
    JAXMG_CUDA(cuda::Scale(KernelType<T>(), u.p, u.count(), s, e_.stream_));
    return Status();
  }

  template <typename T>
  Status SetIdentity(const Tiled<T>& z) {
    const Context& c = e_.ctx_;
    JAXMG_CUDA(cudaMemsetAsync(z.p, 0, sizeof(T) * z.count(), e_.stream_));
    JAXMG_CUDA(cuda::SetDiagonal(KernelType<T>(), z.p, z.lr(), z.lc(), z.t(), c.nprow, c.npcol,
                                 c.myrow, c.mycol, e_.stream_));
    return Status();
  }

  template <typename T>
  Status SumSquares(const Tiled<T>& w, double* sum) {
    JAXMG_CUDA(cudaMemsetAsync(sum, 0, sizeof(double), e_.stream_));
    JAXMG_CUDA(cuda::SumSquares(KernelType<T>(), w.p, w.count(), sum, e_.stream_));
    return Status();
  }

  template <typename T>
  Status AxpbyChange(const Tiled<T>& u, const Tiled<T>& w, double e, double coef, double* sum) {
    JAXMG_CUDA(cudaMemsetAsync(sum, 0, sizeof(double), e_.stream_));
    JAXMG_CUDA(cuda::AxpbyChange(KernelType<T>(), u.p, w.p, u.count(), e, coef, sum, e_.stream_));
    return Status();
  }

  template <typename T>
  Status QdwhStack(const Tiled<T>& u, double sqrt_c, const Tiled<T>& y, int64_t top) {
    const Context& c = e_.ctx_;
    JAXMG_CUDA(cuda::QdwhStack(KernelType<T>(), u.p, u.lr(), u.lc(), sqrt_c, y.p, y.lr(), top,
                               u.t(), c.nprow, c.npcol, c.myrow, c.mycol, e_.stream_));
    return Status();
  }

  template <typename T>
  Status Gram(double c, const Tiled<T>& u, double beta, const Tiled<T>& z) {
    StepTimer timer("PolarGram", e_.stream_);
    BlasDescriptor du, dz;
    // Z := c UᴴU + beta Z (lower triangle): Herk (complex) or Syrk (real).
    const auto gram = [&] {
      return vendor::BlasMpRankK<T>{e_.ctx_.blas,
                                    CUBLAS_FILL_MODE_LOWER,
                                    /*adjoint=*/true,
                                    u.cols(),
                                    u.rows(),
                                    RealOf<T>(c),
                                    {u.p, u.row, 1, du.get()},
                                    RealOf<T>(beta),
                                    {z.p, z.row, 1, dz.get()}};
    };
    const auto size = [&](size_t* dev, size_t* host) -> Status {
      JAXMG_RETURN_IF_ERROR(Describe(u, &du));
      JAXMG_RETURN_IF_ERROR(Describe(z, &dz));
      JAXMG_BLASMP(cublasMpSetStream(e_.ctx_.blas, e_.stream_));
      return vendor::Size(gram(), dev, host);
    };
    return Collective(size, [&](const vendor::Work& work) { return vendor::Run(gram(), work); });
  }

  template <typename T>
  Status PPotrf(const Tiled<T>& z, int64_t* info) {
    StepTimer timer("PolarFactor", e_.stream_);
    Descriptor dz;
    int32_t* out = e_.Slot(Engine::Slots::kSolveInfo);
    const auto potrf = [&] {
      return vendor::MpPotrf<T>{
          e_.ctx_.handle, CUBLAS_FILL_MODE_LOWER, z.cols(), {z.p, z.row, 1, dz.get()}, out};
    };
    const auto size = [&](size_t* dev, size_t* host) -> Status {
      JAXMG_RETURN_IF_ERROR(
          dz.Create(e_.ctx_, DataTypeOf<T>(), z.rows(), z.cols(), z.t(), z.t(), z.ld()));
      JAXMG_RETURN_IF_ERROR(vendor::Size(potrf(), dev, host));
      JAXMG_CUDA(cudaMemsetAsync(out, 0, sizeof(int32_t), e_.stream_));
      return Status();
    };
    int32_t factored = 0;
    JAXMG_RETURN_IF_ERROR(Collective(size, [&](const vendor::Work& work) -> Status {
      const cusolverStatus_t st = potrf().Raw(work);
      // (cuSOLVERMp gives up on some matrices that are not positive definite): a failure info.
      if (st == CUSOLVER_STATUS_INTERNAL_ERROR || st == CUSOLVER_STATUS_EXECUTION_FAILED) {
        factored = 1;
        return Status();
      }
      return SolverCheck(st, vendor::MpPotrf<T>::kCall);
    }));
    if (factored == 0) {
      JAXMG_CUDA(
          cudaMemcpyAsync(&factored, out, sizeof(int32_t), cudaMemcpyDeviceToHost, e_.stream_));
      JAXMG_CUDA(cudaStreamSynchronize(e_.stream_));
    }
    *info = factored;
    return Status();
  }

  template <typename T>
  Status PQr(const Tiled<T>& y, T* tau) {
    StepTimer timer("PolarQr: Qr", e_.stream_);  // a part of the step PolarQr
    Descriptor dy;
    const auto geqrf = [&] {
      return vendor::MpGeqrf<T>{e_.ctx_.handle,
                                y.rows(),
                                y.cols(),
                                {y.p, y.row, 1, dy.get()},
                                tau,
                                e_.Slot(Engine::Slots::kSolveInfo)};
    };
    const auto orgqr = [&] {
      return vendor::MpOrgqr<T>{e_.ctx_.handle,
                                y.rows(),
                                y.cols(),
                                y.cols(),
                                {y.p, y.row, 1, dy.get()},
                                tau,
                                e_.Slot(Engine::Slots::kSolveInfo)};
    };
    const auto geqrf_size = [&](size_t* dev, size_t* host) -> Status {
      JAXMG_RETURN_IF_ERROR(
          dy.Create(e_.ctx_, DataTypeOf<T>(), y.rows(), y.cols(), y.t(), y.t(), y.ld()));
      return vendor::Size(geqrf(), dev, host);
    };
    JAXMG_RETURN_IF_ERROR(Collective(
        geqrf_size, [&](const vendor::Work& work) { return vendor::Run(geqrf(), work); }));
    return Collective([&](size_t* dev, size_t* host) { return vendor::Size(orgqr(), dev, host); },
                      [&](const vendor::Work& work) { return vendor::Run(orgqr(), work); });
  }

  template <typename T>
  Status PProduct(char op_a, char op_b, int64_t m, int64_t n, int64_t k, double alpha,
                  const Tiled<T>& a, const Tiled<T>& b, double beta, const Tiled<T>& c) {
    const auto op = [](char o) { return o == 'N' ? CUBLAS_OP_N : AdjointOp<T>(); };
    BlasDescriptor da, db, dc;
    const auto gemm = [&] {
      return vendor::BlasMpGemm<T>{e_.ctx_.blas,
                                   op(op_a),
                                   op(op_b),
                                   m,
                                   n,
                                   k,
                                   T(alpha),
                                   {a.p, a.row, 1, da.get()},
                                   {b.p, b.row, 1, db.get()},
                                   T(beta),
                                   {c.p, c.row, 1, dc.get()}};
    };
    const auto size = [&](size_t* dev, size_t* host) -> Status {
      JAXMG_RETURN_IF_ERROR(Describe(a, &da));
      JAXMG_RETURN_IF_ERROR(Describe(b, &db));
      JAXMG_RETURN_IF_ERROR(Describe(c, &dc));
      JAXMG_BLASMP(cublasMpSetStream(e_.ctx_.blas, e_.stream_));
      return vendor::Size(gemm(), dev, host);
    };
    return Collective(size, [&](const vendor::Work& work) { return vendor::Run(gemm(), work); });
  }

  template <typename T>
  Status PTrsmRight(bool adjoint, const Tiled<T>& l, const Tiled<T>& w) {
    StepTimer timer("PolarCholesky: Trsm", e_.stream_);
    BlasDescriptor dl, dw;
    const auto trsm = [&] {
      return vendor::BlasMpTrsm<T>{e_.ctx_.blas,
                                   CUBLAS_SIDE_RIGHT,
                                   CUBLAS_FILL_MODE_LOWER,
                                   adjoint ? AdjointOp<T>() : CUBLAS_OP_N,
                                   CUBLAS_DIAG_NON_UNIT,
                                   w.rows(),
                                   w.cols(),
                                   T(1),
                                   {l.p, l.row, 1, dl.get()},
                                   {w.p, w.row, 1, dw.get()}};
    };
    const auto size = [&](size_t* dev, size_t* host) -> Status {
      JAXMG_RETURN_IF_ERROR(Describe(l, &dl));
      JAXMG_RETURN_IF_ERROR(Describe(w, &dw));
      JAXMG_BLASMP(cublasMpSetStream(e_.ctx_.blas, e_.stream_));
      return vendor::Size(trsm(), dev, host);
    };
    return Collective(size, [&](const vendor::Work& work) { return vendor::Run(trsm(), work); });
  }

  template <typename T>
  Status PSymmRight(double alpha, const Tiled<T>& g, const Tiled<T>& w, double beta,
                    const Tiled<T>& u) {
    StepTimer timer("PolarEnd: Symm", e_.stream_);
    BlasDescriptor dg, dw;
    // (U has W's layout: W's descriptor serves both.)
    const auto symm = [&] {
      return vendor::BlasMpSymm<T>{e_.ctx_.blas,
                                   CUBLAS_SIDE_RIGHT,
                                   CUBLAS_FILL_MODE_LOWER,
                                   u.rows(),
                                   u.cols(),
                                   T(alpha),
                                   {g.p, g.row, 1, dg.get()},
                                   {w.p, w.row, 1, dw.get()},
                                   T(beta),
                                   {u.p, u.row, 1, dw.get()}};
    };
    const auto size = [&](size_t* dev, size_t* host) -> Status {
      JAXMG_RETURN_IF_ERROR(Describe(g, &dg));
      JAXMG_RETURN_IF_ERROR(Describe(w, &dw));
      JAXMG_BLASMP(cublasMpSetStream(e_.ctx_.blas, e_.stream_));
      return vendor::Size(symm(), dev, host);
    };
    return Collective(size, [&](const vendor::Work& work) { return vendor::Run(symm(), work); });
  }

  template <typename T>
  Status PHermitianPart(const Tiled<T>& z, const Tiled<T>& h) {
    BlasDescriptor dz, dh;
    // H := ½ Zᴴ + ½ H, with H a copy of Z.
    const auto geadd = [&] {
      return vendor::BlasMpGeadd<T>{e_.ctx_.blas, AdjointOp<T>(),
                                    h.rows(),     h.cols(),
                                    T(0.5),       {z.p, z.row, 1, dz.get()},
                                    T(0.5),       {h.p, h.row, 1, dh.get()}};
    };
    const auto size = [&](size_t* dev, size_t* host) -> Status {
      JAXMG_CUDA(
          cudaMemcpyAsync(h.p, z.p, sizeof(T) * z.count(), cudaMemcpyDeviceToDevice, e_.stream_));
      JAXMG_RETURN_IF_ERROR(Describe(z, &dz));
      JAXMG_RETURN_IF_ERROR(Describe(h, &dh));
      JAXMG_BLASMP(cublasMpSetStream(e_.ctx_.blas, e_.stream_));
      return vendor::Size(geadd(), dev, host);
    };
    return Collective(size, [&](const vendor::Work& work) { return vendor::Run(geadd(), work); });
  }

 private:
  // A cuBLASMp descriptor of m (its tiles, at least one local row).
  template <typename T>
  Status Describe(const Tiled<T>& m, BlasDescriptor* out) {
    return out->Create(e_.ctx_, DataTypeOf<T>(), m.rows(), m.cols(), m.t(), m.t(), m.ld());
  }

  // A collective library call: size(&dev, &host) makes its descriptors and asks for its
  // workspace (local steps), the workspace is taken, the ranks agree, then call(workspace).
  template <class Size, class Call>
  Status Collective(Size&& size, Call&& call) {
    size_t dev = 0, host = 0;
    vendor::Work work;
    Deferred local;
    local.Run([&] { return size(&dev, &host); });
    local.Run([&] { return e_.Workspace(dev, host, &work); });
    JAXMG_RETURN_IF_ERROR(e_.AgreeOnBuffers(local.status()));
    return call(work);
  }

  // The 1-D Cholesky's panel solve by the inverse: in TF32, for the types it applies to.
  template <typename T>
  bool SolveByInverse() const {
    return e_.config_.gpu_math == Choice::kTf32 && !std::is_same_v<RealOf<T>, double>;
  }

  Status Solver() {
    if (lb_ != nullptr) return Status();
    return e_.LocalSolver(&lb_, &blas_, &dn_, &params_);
  }

  Status Ask(size_t dev, size_t host) {
    pdev_ = std::max(pdev_, dev), phost_ = std::max(phost_, host);
    return Status();
  }

  // A vendor call of the algorithms' two passes (algorithms::Pass): the size pass asks for its
  // workspace, the run pass calls it in the workspace taken for every call of the pass
  // (PWorkspace).
  template <class Op>
  Status PassCall(algorithms::Pass pass, const Op& op) {
    if (pass == algorithms::Pass::kSize) {
      size_t dev = 0, host = 0;
      JAXMG_RETURN_IF_ERROR(vendor::Size(op, &dev, &host));
      return Ask(dev, host);
    }
    return vendor::Run(op, vendor::Work{pwork_, e_.workspace_bytes_, e_.ctx_.host_work.data(),
                                        e_.ctx_.host_work.size()});
  }

  static Status Ints(std::initializer_list<std::pair<int64_t, int*>> values) {
    for (const auto& [v, out] : values) JAXMG_RETURN_IF_ERROR(CheckedInt(v, "a dimension", out));
    return Status();
  }

  Engine& e_;
  BlasDescriptor square_;
  void* pwork_ = nullptr;
  void* inverse_ = nullptr;  // the 1-D Cholesky's inverse and product (PreparePanel)
  size_t pdev_ = 0, phost_ = 0;
  const LocalBlas* lb_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cusolverDnHandle_t dn_ = nullptr;
  cusolverDnParams_t params_ = nullptr;
  vendor::Work work_;  // the panels' cusolverDn workspace (PrepareGetrf, PrepareGeqrf)
  int* info_ = nullptr;
};

}  // namespace jaxmg::cusolvermp
