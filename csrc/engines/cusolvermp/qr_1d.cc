// The own 1-D QR (1 x P grids) with look-ahead, and its Q formed in place.
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

int64_t Engine::QrPanelBlock(int64_t t) {
  // JAXMG_QR_PANEL: the width of the blocks a panel is factored in (at most 512: cusolverDn's
  // geqrf answered INVALID_VALUE for a 32768 x 2048 panel on H200s).
  const char* value = std::getenv("JAXMG_QR_PANEL");
  const int64_t ib = value != nullptr ? std::atoll(value) : 256;
  return std::min<int64_t>({ib > 0 ? ib : 256, 512, t});
}

bool Engine::UseOwnQr() const {
  // The 1-D QR needs every engine row on every process: a 1 x P grid.
  const char* choice = std::getenv("JAXMG_GPU_QR");
  const bool library = choice != nullptr && std::string(choice) == "cusolvermp";
  return !library && ctx_.nprow == 1;
}

Engine::QrShape Engine::QrShapeOf() const {
  const layout::Plan& plan = state_.plan;
  QrShape q;
  q.m = plan.engine_rows(), q.n = plan.cols.extent, q.t = plan.tile, q.lr = local_rows_;
  q.procs = ctx_.npcol, q.me = ctx_.mycol;
  q.tiles = (q.n + q.t - 1) / q.t;
  q.held = layout::CyclicLocalExtent(q.n, q.t, q.me, q.procs);
  return q;
}

// Blocked Householder QR on a 1 x P grid (columns block-cyclic in tiles of t, every row local),
// in the compact WY form Q_k = I − V T Vᴴ of each tile column k of the n factored: its owner
// factors the panel (rows k t .. m; QrPanel), builds V (unit lower trapezoidal) and T = S⁻¹ for
// S = striu(VᴴV) + diag(1/τ) (Joffrain et al.'s UT transform; one small trsm); one NCCL
// broadcast of V and T; every rank applies Q_kᴴ to its columns right of the panel (W = Vᴴ C,
// W' = Tᴴ W by trmm, C −= V W'). About 2 m n² − 2n³/3 flops, all but the panels' in gemm and
// trmm spread over the P devices (a trsm with S in each update instead: slower on H200s, see
// bench/results/qr_own_h200x2_*.json).
// Look-ahead: the owner of panel k + 1 updates that tile first, then factors it on the side
// stream while it updates the rest of its columns, so that the panels (latency-bound: cusolverDn
// geqrf's cost grows with their columns, not with their width) may overlap the updates.
// The matrix is left as geqrf leaves it (R on and above the diagonal, the vectors below, τ in
// tau_), and every T_k is kept in qr_t_ for Orgqr1D. A local library error (invalid arguments:
// not expected) stops this rank's computing but not its part of the broadcasts, and is agreed
// at the end, so that no rank waits for another.
template <typename T>
Status Engine::Qr1D() {
  const QrShape q = QrShapeOf();
  const int64_t m = q.m, n = q.n, t = q.t, lr = q.lr, tiles = q.tiles, held = q.held;
  const int procs = q.procs, me = q.me;
  const int64_t ib = QrPanelBlock(t);
  const size_t es = sizeof(T);
  Lane main, side;
  QrWork& work = qr_work_;
  QrWork side_work{};
  void *panels = nullptr, *info = nullptr;
  Status local = MainLane(&main);
  if (local.ok()) local = SideLane(&side);
  if (local.ok()) local = Scratch(es * n, &tau_);
  if (local.ok()) local = Scratch(2 * es * m * t, &panels);  // V_k and V_k+1
  if (local.ok()) local = Scratch(es * tiles * t * t, &qr_t_);
  for (void** p : {&work.w, &work.w2}) {
    if (local.ok()) local = Scratch(es * t * std::max<int64_t>(held, t), p);
  }
  for (void** p : {&side_work.w, &side_work.w2}) {
    if (local.ok()) local = Scratch(es * ib * t, p);
  }
  for (void** p : {&work.s, &side_work.s}) {
    if (local.ok()) local = Scratch(es * t * t, p);
  }
  if (local.ok()) local = Scratch(sizeof(int), &info);
  size_t dev = 0, host = 0;
  if (local.ok()) {
    local = SolverCheck(main.lb->geqrf_buffer_size(main.dn, main.params, m, ib, DataTypeOf<T>(),
                                                   work_, std::max<int64_t>(lr, 1), DataTypeOf<T>(),
                                                   tau_, DataTypeOf<T>(), &dev, &host),
                        "cusolverDnXgeqrf_bufferSize");
  }
  void* d_work = nullptr;
  if (local.ok()) local = Workspace(dev, host, &d_work);
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(local));
  qr_panel_ = panels;
  char* a = static_cast<char*>(work_);
  char* tau = static_cast<char*>(tau_);
  auto v_of = [&](int64_t k) { return static_cast<char*>(panels) + es * (k % 2) * m * t; };
  auto s_of = [&](int64_t k) { return static_cast<char*>(qr_t_) + es * k * t * t; };
  auto column_of = [&](int64_t k) { return a + es * (k * t + (k / procs) * t * lr); };
  auto panel = [&](const Lane& lane, int64_t k) {
    PartTimer part("panel (all)");
    const int64_t row0 = k * t;
    const QrPanelWork pw{ib, d_work, dev, static_cast<int*>(info),
                         lane.stream == stream_ ? work : side_work};
    return QrPanel<T>(lane, pw, column_of(k), m - row0, std::min(t, n - row0), tau + es * row0,
                      v_of(k), s_of(k));
  };
  Status failed;  // this rank's first local error
  if (me == 0) failed = panel(main, 0);
  for (int64_t k = 0; k < tiles; ++k) {
    const int owner = static_cast<int>(k % procs);
    const int64_t row0 = k * t, rows = m - row0, kb = std::min(t, n - row0);
    if (failed.ok()) failed = TestFailure("qr", ctx_.rank, k);
    if (procs > 1) {
      PartTimer part("broadcast");
      const size_t reals = static_cast<size_t>(Scalar<T>::kParts);
      JAXMG_NCCL(ncclGroupStart());
      JAXMG_NCCL(ncclBroadcast(v_of(k), v_of(k), rows * kb * reals, NcclRealOf<T>(), owner,
                               ctx_.comm, stream_));
      JAXMG_NCCL(ncclBroadcast(s_of(k), s_of(k), t * kb * reals, NcclRealOf<T>(), owner, ctx_.comm,
                               stream_));
      JAXMG_NCCL(ncclGroupEnd());
    }
    if (!failed.ok()) continue;
    // This rank's factored columns right of tile k: local tiles j with j * procs + me > k; the
    // first of them is tile k + 1 where this rank owns it.
    const int64_t first = k >= me ? (k - me) / procs + 1 : 0, cols = held - first * t;
    char* c = a + es * (row0 + first * t * lr);
    auto update = [&](char* at, int64_t width) {
      return ApplyReflectors<T>(main, v_of(k), rows, kb, s_of(k), t, /*adjoint=*/true, at, width,
                                lr, work);
    };
    if (k + 1 < tiles && (k + 1) % procs == me) {
      const int64_t next = std::min(t, n - (k + 1) * t);
      failed = update(c, next);
      if (failed.ok()) failed = Join(stream_, side.stream, 0);
      // The rest of the update is queued before the panel (cusolverDn may block the host until
      // its stream is done).
      if (failed.ok()) failed = update(c + es * next * lr, cols - next);
      if (failed.ok()) failed = panel(side, k + 1);
      if (failed.ok()) failed = Join(side.stream, stream_, 1);
    } else {
      failed = update(c, cols);
    }
  }
  if (DebugParts()) PrintParts("Qr1D");
  return AgreeOnFailure("qr", failed);
}

// The owner's part of panel k (rows x cols from `column`, leading dimension local_rows_): geqrf
// in blocks of ib columns, the panel's columns right of each block updated as the trailing
// matrix is (so that the BLAS2 part is ib wide); then v := the panel's V and f := its T.
template <typename T>
Status Engine::QrPanel(const Lane& lane, const QrPanelWork& pw, char* column, int64_t rows,
                       int64_t cols, char* tau, void* v, void* f) {
  const size_t es = sizeof(T);
  const int64_t lr = local_rows_, t = state_.plan.tile;
  for (int64_t j = 0; j < cols; j += pw.ib) {
    const int64_t jb = std::min(pw.ib, cols - j);
    char* block = column + es * (j + j * lr);
    {
      PartTimer part("panel geqrf");
      JAXMG_SOLVER(lane.lb->geqrf(lane.dn, lane.params, rows - j, jb, DataTypeOf<T>(), block, lr,
                                  DataTypeOf<T>(), tau + es * j, DataTypeOf<T>(), pw.d_work, pw.dev,
                                  ctx_.host_work.data(), ctx_.host_work.size(), pw.info));
    }
    if (j + jb == cols) break;
    JAXMG_CUDA(cuda::ReflectorBlock(KernelType<T>(), block, lr, rows - j, jb, tau + es * j, v,
                                    rows - j, lane.stream));
    JAXMG_RETURN_IF_ERROR(ReflectorFactorOf<T>(lane, v, rows - j, jb, tau + es * j, f, pw.work.s));
    JAXMG_RETURN_IF_ERROR(ApplyReflectors<T>(lane, v, rows - j, jb, f, t, /*adjoint=*/true,
                                             block + es * jb * lr, cols - j - jb, lr, pw.work));
  }
  JAXMG_CUDA(
      cuda::ReflectorBlock(KernelType<T>(), column, lr, rows, cols, tau, v, rows, lane.stream));
  return ReflectorFactorOf<T>(lane, v, rows, cols, tau, f, pw.work.s);
}

template <typename T>
Status Engine::ReflectorFactorOf(const Lane& lane, const void* v, int64_t rows, int64_t cols,
                                 const void* tau, void* f, void* s) {
  // S := VᴴV, then its strict upper part and diag(1/τ); F := S⁻¹ (trsm on the identity).
  const int64_t t = state_.plan.tile;
  int ir = 0, ic = 0, it = 0;
  JAXMG_RETURN_IF_ERROR(CheckedInt(rows, "rows", &ir));
  JAXMG_RETURN_IF_ERROR(CheckedInt(cols, "columns", &ic));
  JAXMG_RETURN_IF_ERROR(CheckedInt(t, "tile", &it));
  const T one(1), zero(0);
  const int x = Scalar<T>::kIndex;
  JAXMG_RETURN_IF_ERROR(CublasCheck(lane.lb->gemm[x](lane.blas, AdjointOp<T>(), CUBLAS_OP_N, ic, ic,
                                                     ir, &one, v, ir, v, ir, &zero, s, it),
                                    "cublas gemm (VᴴV)"));
  JAXMG_CUDA(cuda::ReflectorFactor(KernelType<T>(), s, t, cols, tau, lane.stream));
  JAXMG_CUDA(cuda::IdentityBlock(KernelType<T>(), f, t, cols, cols, 0, lane.stream));
  return CublasCheck(
      lane.lb->trsm[x](lane.blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                       CUBLAS_DIAG_NON_UNIT, ic, ic, &one, s, it, f, it),
      "cublas trsm (T = S⁻¹)");
}

template <typename T>
Status Engine::ApplyReflectors(const Lane& lane, const void* v, int64_t rows, int64_t k,
                               const void* f, int64_t ldf, bool adjoint, void* c, int64_t cols,
                               int64_t ldc, const QrWork& work) {
  if (cols <= 0 || rows <= 0 || k <= 0) return Status();
  int ir = 0, ic = 0, ik = 0, is = 0, il = 0;
  JAXMG_RETURN_IF_ERROR(CheckedInt(rows, "rows", &ir));
  JAXMG_RETURN_IF_ERROR(CheckedInt(cols, "columns", &ic));
  JAXMG_RETURN_IF_ERROR(CheckedInt(k, "reflectors", &ik));
  JAXMG_RETURN_IF_ERROR(CheckedInt(ldf, "tile", &is));
  JAXMG_RETURN_IF_ERROR(CheckedInt(ldc, "local rows", &il));
  const T one(1), zero(0), minus_one(-1);
  const LocalBlas& lb = *lane.lb;
  const int x = Scalar<T>::kIndex;
  {
    PartTimer part("gemm W = Vᴴ C");
    JAXMG_RETURN_IF_ERROR(CublasCheck(lb.gemm[x](lane.blas, AdjointOp<T>(), CUBLAS_OP_N, ik, ic, ir,
                                                 &one, v, ir, c, il, &zero, work.w, ik),
                                      "cublas gemm (Vᴴ C)"));
  }
  {
    PartTimer part(adjoint ? "trmm Tᴴ W" : "trmm T W");
    JAXMG_RETURN_IF_ERROR(
        CublasCheck(lb.trmm[x](lane.blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER,
                               adjoint ? AdjointOp<T>() : CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, ik, ic,
                               &one, f, is, work.w, ik, work.w2, ik),
                    "cublas trmm (T W)"));
  }
  PartTimer part("gemm C -= V W");
  return CublasCheck(lb.gemm[x](lane.blas, CUBLAS_OP_N, CUBLAS_OP_N, ir, ic, ik, &minus_one, v, ir,
                                work.w2, ik, &one, c, il),
                     "cublas gemm (C − V W)");
}

// Q (the leading n columns, in place of the factors) by backward accumulation, tile column k
// from the last: its owner rebuilds V_k from its columns (before they are overwritten) and
// broadcasts it; every rank applies Q_k to its columns right of tile k (already Q's, rows
// k t .. m); the owner then writes tile k's own columns, Q_k [0; I; 0] = [0; I; 0] − [0; V X]
// with X = T (V's leading block)ᴴ. About 2 m n² − 2n³/3 flops, as the factorization. Local
// errors as in Qr1D.
template <typename T>
Status Engine::Orgqr1D() {
  const QrShape q = QrShapeOf();
  const int64_t m = q.m, n = q.n, t = q.t, lr = q.lr, tiles = q.tiles, held = q.held;
  const int procs = q.procs, me = q.me;
  const size_t es = sizeof(T);
  Lane main;
  const QrWork& work = qr_work_;  // Qr1D's
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(MainLane(&main)));
  char* a = static_cast<char*>(work_);
  const char* tau = static_cast<const char*>(tau_);
  void* v = qr_panel_;
  Status failed;
  // Tile k's own columns from row 0: [0; I; 0] − [0; V X].
  auto own_columns = [&](char* column, int64_t row0, int64_t rows, int64_t kb, const void* f) {
    int ir = 0, ik = 0, it = 0, il = 0;
    JAXMG_RETURN_IF_ERROR(CheckedInt(rows, "rows", &ir));
    JAXMG_RETURN_IF_ERROR(CheckedInt(kb, "reflectors", &ik));
    JAXMG_RETURN_IF_ERROR(CheckedInt(t, "tile", &it));
    JAXMG_RETURN_IF_ERROR(CheckedInt(lr, "local rows", &il));
    const T one(1), minus_one(-1);
    const int x = Scalar<T>::kIndex;
    JAXMG_CUDA(cuda::Adjoint(KernelType<T>(), v, rows, kb, kb, work.w, kb, stream_));
    JAXMG_RETURN_IF_ERROR(CublasCheck(
        main.lb->trmm[x](main.blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                         CUBLAS_DIAG_NON_UNIT, ik, ik, &one, f, it, work.w, ik, work.w2, ik),
        "cublas trmm (T Lᴴ)"));
    JAXMG_CUDA(cuda::IdentityBlock(KernelType<T>(), column, lr, m, kb, row0, stream_));
    return CublasCheck(main.lb->gemm[x](main.blas, CUBLAS_OP_N, CUBLAS_OP_N, ir, ik, ik, &minus_one,
                                        v, ir, work.w2, ik, &one, column + es * row0, il),
                       "cublas gemm (Q_k's columns)");
  };
  for (int64_t k = tiles - 1; k >= 0; --k) {
    const int owner = static_cast<int>(k % procs);
    const int64_t row0 = k * t, rows = m - row0, kb = std::min(t, n - row0);
    char* column = a + es * (k / procs) * t * lr;  // the tile's columns from row 0
    const void* f = static_cast<const char*>(qr_t_) + es * k * t * t;
    if (failed.ok()) failed = TestFailure("orgqr", ctx_.rank, tiles - 1 - k);
    if (me == owner && failed.ok()) {
      const cudaError_t e = cuda::ReflectorBlock(KernelType<T>(), column + es * row0, lr, rows, kb,
                                                 tau + es * row0, v, rows, stream_);
      if (e != cudaSuccess) failed = Status::Error(std::string("CUDA: ") + cudaGetErrorString(e));
    }
    if (procs > 1) {
      JAXMG_NCCL(ncclBroadcast(v, v, rows * kb * Scalar<T>::kParts, NcclRealOf<T>(), owner,
                               ctx_.comm, stream_));
    }
    if (!failed.ok()) continue;
    const int64_t first = k >= me ? (k - me) / procs + 1 : 0, cols = held - first * t;
    failed = ApplyReflectors<T>(main, v, rows, kb, f, t, /*adjoint=*/false,
                                a + es * (row0 + first * t * lr), cols, lr, work);
    if (failed.ok() && me == owner) failed = own_columns(column, row0, rows, kb, f);
  }
  if (DebugParts()) PrintParts("Orgqr1D");
  return AgreeOnFailure("orgqr", failed);
}

#define JAXMG_INSTANTIATE_QR_1D(T)                                                               \
  template Status Engine::Qr1D<T>();                                                             \
  template Status Engine::QrPanel<T>(const Lane& lane, const QrPanelWork& pw, char* column,      \
                                     int64_t rows, int64_t cols, char* tau, void* v, void* f);   \
  template Status Engine::ReflectorFactorOf<T>(const Lane& lane, const void* v, int64_t rows,    \
                                               int64_t cols, const void* tau, void* f, void* s); \
  template Status Engine::ApplyReflectors<T>(                                                    \
      const Lane& lane, const void* v, int64_t rows, int64_t k, const void* f, int64_t ldf,      \
      bool adjoint, void* c, int64_t cols, int64_t ldc, const QrWork& work);                     \
  template Status Engine::Orgqr1D<T>();
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_QR_1D)
#undef JAXMG_INSTANTIATE_QR_1D

}  // namespace jaxmg::cusolvermp
