// The GPU engine's eigenvalues in two stages, on 1 x P grids (every row local, columns
// block-cyclic in tiles of t): the engine matrix is reduced to a Hermitian band of width b over
// the devices (BLAS3), the band is gathered on rank 0, chased to a tridiagonal matrix and its
// eigenvalues found by bisection there (cuda/band.h), and broadcast. The one-stage tridiagonal
// reduction (cuSOLVERMp's Syevd) reads the whole trailing matrix for every column, and is bound
// by memory bandwidth; the band reduction is all matrix products.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "common/deferred.h"
#include "common/scalar.h"
#include "cuda/band.h"
#include "cuda/kernels.h"
#include "engines/cusolvermp/engine.h"
#include "engines/cusolvermp/engine_util.h"
#include "engines/cusolvermp/local_blas.h"

namespace jaxmg::cusolvermp {

int64_t Engine::EigBand(int64_t t) {
  // JAXMG_EIG_BAND: the widest band tried (default 64, at most 64: the chase's blocks hold a
  // b x b block in shared memory); the band is the widest divisor of t up to it, so that the
  // panels stay inside tiles.
  const char* value = std::getenv("JAXMG_EIG_BAND");
  int64_t b = value != nullptr ? std::atoll(value) : 64;
  b = std::min<int64_t>(b > 0 ? b : 64, 64);
  while (b > 1 && t % b != 0) --b;
  return b >= 2 ? b : 0;
}

// Which eigensolver: JAXMG_GPU_EIGVALS (eigenvalues alone) or JAXMG_GPU_EIGH (with vectors)
// set to "cusolvermp" or "two-stage" decides; unset, one GPU takes the two stages and grids of
// several take cuSOLVERMp's Syevd, until the two stages' runs on several GPUs (their
// collectives, and the P x 1 transposes) have been checked there.
bool Engine::UseTwoStage(const char* variable, int64_t t) const {
  const char* choice = std::getenv(variable);
  const std::string c = choice != nullptr ? choice : "";
  const bool wanted = c == "two-stage" || (c.empty() && ctx_.nprow * ctx_.npcol == 1);
  return wanted && (ctx_.nprow == 1 || ctx_.npcol == 1) && EigBand(t) > 0;
}

bool Engine::UseBandEigenvalues(int64_t t) const { return UseTwoStage("JAXMG_GPU_EIGVALS", t); }

Engine::BandSource Engine::EngineMatrix() const {
  return BandSource{work_, state_.plan.cols.extent, state_.plan.tile, local_rows_};
}

bool Engine::UseBandEigh() const { return UseTwoStage("JAXMG_GPU_EIGH", state_.plan.tile); }

// Stage one: for each panel of b columns from c0 (inside one tile, so on one process): QR of
// its rows below the band (r0 = c0 + b .. n), Q = I − V T Vᴴ; then A22 := Qᴴ A22 Q on the
// trailing matrix (rows and columns r0 .. n, both triangles kept) as A22 −= V Wᴴ + W Vᴴ with
// X = A22 V T, M = Tᴴ Vᴴ X, W = X − ½ V M. Every rank forms the rows of A22 V that match its
// own columns or rows ((A22 V)[C, :] = A22[:, C]ᴴ V = A22[C, :] V, A22 Hermitian) and one
// all-reduce joins them. The panel's columns then hold the band: the diagonal block and R.
// On a 1 x P grid every rank holds whole columns; on a P x 1 grid whole rows, and the panel
// (A's columns c0 .. c0 + b from row c0) is the adjoint of its owner's rows.
// Local library errors stop this rank's computing but not its collectives, and are agreed
// before the band is gathered.
template <typename T>
Status Engine::BandReduce(const BandSource& src, int64_t b, void** band_out, void** taus_out) {
  StepTimer timer("BandReduce", stream_);
  const bool by_rows = ctx_.npcol == 1 && ctx_.nprow > 1;  // P x 1: rows are distributed
  const int procs = by_rows ? ctx_.nprow : ctx_.npcol, me = by_rows ? ctx_.myrow : ctx_.mycol;
  const int64_t n = src.n, t = src.t, lr = src.lr;
  const int64_t held = layout::CyclicLocalExtent(n, t, me, procs);  // local columns (rows)
  const size_t es = sizeof(T);
  const cuda::Dtype dt = KernelType<T>();
  Lane main;
  void *vw = nullptr, *x = nullptr, *y = nullptr, *g = nullptr, *f = nullptr, *s = nullptr;
  void *m1 = nullptr, *m2 = nullptr, *taus = nullptr, *info = nullptr, *band = nullptr;
  void* panel_copy = nullptr;
  const int64_t rows_held = std::max<int64_t>(held, 1);
  Status local = MainLane(&main);
  for (auto [p, bytes] : {std::pair<void**, size_t>{&vw, es * n * 2 * b},
                          {&x, es * n * b},
                          {&y, es * rows_held * b},
                          {&g, es * rows_held * 2 * b},
                          {&f, es * t * t},
                          {&s, es * t * t},
                          {&m1, es * b * b},
                          {&m2, es * b * b},
                          {&taus, es * n},
                          {&info, sizeof(int)},
                          {&band, es * cuda::BandElements(n, b)},
                          {&panel_copy, by_rows ? es * n * b : 0}}) {
    if (local.ok()) local = Scratch(bytes, p);
  }
  size_t dev = 0, host = 0;
  if (local.ok()) {
    local =
        SolverCheck(main.lb->geqrf_buffer_size(main.dn, main.params, n, b, DataTypeOf<T>(), vw, n,
                                               DataTypeOf<T>(), taus, DataTypeOf<T>(), &dev, &host),
                    "cusolverDnXgeqrf_bufferSize");
  }
  void* d_work = nullptr;
  if (local.ok()) local = Workspace(dev, host, &d_work);
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(local));
  JAXMG_CUDA(cudaMemsetAsync(band, 0, es * cuda::BandElements(n, b), stream_));
  JAXMG_CUDA(cudaMemsetAsync(taus, 0, es * n, stream_));  // τ = 0 (H = I) where none is made

  char* a = static_cast<char*>(src.a);
  const LocalBlas& lb = *main.lb;
  const int xi = Scalar<T>::kIndex;
  const T one(1), zero(0), minus_one(-1), minus_half(-0.5);
  const size_t reals = static_cast<size_t>(Scalar<T>::kParts);
  // The panel's columns c0 .. c0 + b on its owner, global row i at column[i − row0 + c ld].
  struct Panel {
    char* column;
    int64_t ld, row0;
  };
  auto panel_of = [&](int64_t c0) -> Panel {
    const int64_t lc0 = (c0 / t / procs) * t + c0 % t;  // local column (row)
    if (!by_rows) return Panel{a + es * lr * lc0, lr, 0};
    return Panel{static_cast<char*>(panel_copy), n - c0, c0};
  };
  // The panel's QR: V into vw's first k columns (ld rows), T into f (ld t).
  auto factor = [&](const Panel& pc, int64_t r0, int64_t rows, int64_t k) -> Status {
    PartTimer part("panel");
    char* below = pc.column + es * (r0 - pc.row0);
    void* tau = static_cast<char*>(taus) + es * (r0 - b);  // the panel's τ, kept for Q₁
    JAXMG_SOLVER(lb.geqrf(main.dn, main.params, rows, b, DataTypeOf<T>(), below, pc.ld,
                          DataTypeOf<T>(), tau, DataTypeOf<T>(), d_work, dev, ctx_.host_work.data(),
                          ctx_.host_work.size(), static_cast<int*>(info)));
    JAXMG_CUDA(cuda::ReflectorBlock(dt, below, pc.ld, rows, k, tau, vw, rows, stream_));
    return ReflectorFactorOf<T>(main, vw, rows, k, tau, f, s);
  };
  // A22 := Qᴴ A22 Q on this rank's columns (rows) from local index lf.
  auto update = [&](int64_t r0, int64_t rows, int64_t k) -> Status {
    PartTimer part("two-sided update");
    int ir = 0, ik = 0, ic = 0, it = 0, il = 0, i2 = 0;
    const int64_t lf = layout::CyclicLocalExtent(r0, t, me, procs), count = held - lf;
    JAXMG_RETURN_IF_ERROR(CheckedInt(rows, "rows", &ir));
    JAXMG_RETURN_IF_ERROR(CheckedInt(k, "reflectors", &ik));
    JAXMG_RETURN_IF_ERROR(CheckedInt(std::max<int64_t>(count, 1), "columns", &ic));
    JAXMG_RETURN_IF_ERROR(CheckedInt(t, "tile", &it));
    JAXMG_RETURN_IF_ERROR(CheckedInt(lr, "local rows", &il));
    JAXMG_RETURN_IF_ERROR(CheckedInt(2 * k, "reflectors", &i2));
    // This rank's part of A22: columns lf .. from row r0 (1 x P), or rows lf .. from column r0.
    char* c = by_rows ? a + es * (lf + r0 * lr) : a + es * (r0 + lf * lr);
    void* wk = static_cast<char*>(vw) + es * rows * k;  // W, after V in vw
    JAXMG_CUDA(cudaMemsetAsync(x, 0, es * rows * k, stream_));
    if (count > 0) {
      JAXMG_RETURN_IF_ERROR(
          CublasCheck(lb.gemm[xi](main.blas, by_rows ? CUBLAS_OP_N : AdjointOp<T>(), CUBLAS_OP_N,
                                  ic, ik, ir, &one, c, il, vw, ir, &zero, y, ic),
                      "cublas gemm (rows of A22 V)"));
      JAXMG_CUDA(cuda::CyclicRows(dt, true, y, count, count, k, lf, t, procs, me, r0, x, rows, 0,
                                  stream_));
    }
    if (procs > 1) {
      PartTimer comm("all-reduce");
      JAXMG_NCCL(
          ncclAllReduce(x, x, rows * k * reals, NcclRealOf<T>(), ncclSum, ctx_.comm, stream_));
    }
    JAXMG_RETURN_IF_ERROR(
        CublasCheck(lb.trmm[xi](main.blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                                CUBLAS_DIAG_NON_UNIT, ir, ik, &one, f, it, x, ir, wk, ir),
                    "cublas trmm (X = A22 V T)"));
    JAXMG_RETURN_IF_ERROR(CublasCheck(lb.gemm[xi](main.blas, AdjointOp<T>(), CUBLAS_OP_N, ik, ik,
                                                  ir, &one, vw, ir, wk, ir, &zero, m1, ik),
                                      "cublas gemm (Vᴴ X)"));
    JAXMG_RETURN_IF_ERROR(
        CublasCheck(lb.trmm[xi](main.blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, AdjointOp<T>(),
                                CUBLAS_DIAG_NON_UNIT, ik, ik, &one, f, it, m1, ik, m2, ik),
                    "cublas trmm (M = Tᴴ Vᴴ X)"));
    JAXMG_RETURN_IF_ERROR(CublasCheck(lb.gemm[xi](main.blas, CUBLAS_OP_N, CUBLAS_OP_N, ir, ik, ik,
                                                  &minus_half, vw, ir, m2, ik, &one, wk, ir),
                                      "cublas gemm (W = X − ½ V M)"));
    if (count <= 0) return Status();
    // g := this rank's rows of [W V]; its columns −= [V W] gᴴ = V Wᴴ + W Vᴴ, or its rows
    // −= g [V W]ᴴ.
    JAXMG_CUDA(cuda::CyclicRows(dt, false, g, count, count, 2 * k, lf, t, procs, me, r0, vw, rows,
                                k, stream_));
    if (by_rows) {
      return CublasCheck(lb.gemm[xi](main.blas, CUBLAS_OP_N, AdjointOp<T>(), ic, ir, i2, &minus_one,
                                     g, ic, vw, ir, &one, c, il),
                         "cublas gemm (A22 − V Wᴴ − W Vᴴ)");
    }
    return CublasCheck(lb.gemm[xi](main.blas, CUBLAS_OP_N, AdjointOp<T>(), ir, ic, i2, &minus_one,
                                   vw, ir, g, ic, &one, c, il),
                       "cublas gemm (A22 − V Wᴴ − W Vᴴ)");
  };
  for (int64_t c0 = 0; c0 < n; c0 += b) {
    const int owner = static_cast<int>((c0 / t) % procs);
    const int64_t r0 = c0 + b, rows = n - r0, k = std::min(rows, b), width = std::min(b, n - c0);
    const bool mine = owner == me;
    const Panel pc = panel_of(c0);
    if (local.ok()) local = TestFailure("band_reduce", ctx_.rank, c0 / b);
    if (mine && local.ok() && by_rows) {
      // The panel := the adjoint of this rank's rows c0 .. c0 + width from column c0.
      const int64_t lc0 = (c0 / t / procs) * t + c0 % t;
      const cudaError_t e =
          cuda::Adjoint(dt, a + es * (lc0 + c0 * lr), lr, width, n - c0, pc.column, pc.ld, stream_);
      if (e != cudaSuccess) local = Status::Error(std::string("CUDA: ") + cudaGetErrorString(e));
    }
    if (rows >= 2) {
      if (mine && local.ok()) local = factor(pc, r0, rows, k);
      if (mine && local.ok() && by_rows) {
        // The factored rows below the band (V under R) back into this rank's rows c0 .. as
        // their adjoint (rows no later step reads), for the eigenvectors' back-transformation.
        const int64_t lc0 = (c0 / t / procs) * t + c0 % t;
        const cudaError_t e = cuda::Adjoint(dt, pc.column + es * (r0 - pc.row0), pc.ld, rows, k,
                                            a + es * (lc0 + r0 * lr), lr, stream_);
        if (e != cudaSuccess) local = Status::Error(std::string("CUDA: ") + cudaGetErrorString(e));
      }
      if (procs > 1) {
        PartTimer part("broadcast");
        JAXMG_NCCL(ncclGroupStart());
        JAXMG_NCCL(
            ncclBroadcast(vw, vw, rows * k * reals, NcclRealOf<T>(), owner, ctx_.comm, stream_));
        JAXMG_NCCL(ncclBroadcast(f, f, t * k * reals, NcclRealOf<T>(), owner, ctx_.comm, stream_));
        JAXMG_NCCL(ncclGroupEnd());
      }
      if (local.ok()) local = update(r0, rows, k);
    }
    if (mine && local.ok()) {
      // The panel's columns are final: the diagonal block and R below it.
      const cudaError_t e =
          cuda::BandFromColumns(dt, pc.column, pc.ld, pc.row0, c0, width, n, b, band, stream_);
      if (e != cudaSuccess) local = Status::Error(std::string("CUDA: ") + cudaGetErrorString(e));
    }
  }
  if (DebugParts()) PrintParts("BandReduce");
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("band_reduce", local));
  if (procs > 1) {  // the band, summed onto rank 0
    JAXMG_NCCL(ncclReduce(band, band, cuda::BandElements(n, b) * reals, NcclRealOf<T>(), ncclSum, 0,
                          ctx_.comm, stream_));
  }
  *band_out = band;
  *taus_out = taus;
  return Status();
}

template <typename T>
Status Engine::BandEigenvalues(const BandSource& src, void* w) {
  StepTimer timer("BandEigenvalues", stream_);
  const int64_t n = src.n, b = EigBand(src.t);
  const bool by_rows = ctx_.npcol == 1 && ctx_.nprow > 1;
  const int procs = by_rows ? ctx_.nprow : ctx_.npcol, me = by_rows ? ctx_.myrow : ctx_.mycol;
  const cuda::Dtype dt = KernelType<T>();
  void *band = nullptr, *taus = nullptr, *bisect = nullptr, *sync = nullptr;
  JAXMG_RETURN_IF_ERROR(BandReduce<T>(src, b, &band, &taus));
  Status local = Scratch(sizeof(double) * (2 * n + 4), &bisect);
  if (local.ok()) local = Scratch(sizeof(int) * (n + 1), &sync);
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(local));
  // Rank 0's local error is kept past the broadcast and agreed after it.
  Deferred failed;
  failed.Step("band_eigvals", ctx_.rank, 0);
  if (me == 0) {
    failed.Run([&]() -> Status {
      {
        StepTimer chase("BandToTridiagonal", stream_);
        JAXMG_CUDA(cuda::BandToTridiagonal(dt, band, n, b, static_cast<int*>(sync), nullptr,
                                           nullptr, stream_));
      }
      StepTimer bisection("TridiagonalEigenvalues", stream_);
      JAXMG_CUDA(
          cuda::TridiagonalEigenvalues(dt, band, n, b, static_cast<double*>(bisect), w, stream_));
      return Status();
    });
  }
  if (procs > 1) {
    JAXMG_NCCL(ncclBroadcast(w, w, n, NcclRealOf<T>(), 0, ctx_.comm, stream_));
  }
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("band_eigvals", failed));
  // No solver status: AgreeValues reads small_[0] as one (non-finite eigenvalues still count).
  JAXMG_RETURN_IF_ERROR(Small());
  JAXMG_CUDA(cudaMemsetAsync(small_, 0, sizeof(int32_t), stream_));
  return Status();
}

// Eigenvalues and eigenvectors on a 1 x P or P x 1 grid: stage one (BandReduce), the chase on
// rank 0
// keeping its reflectors, which every rank then receives with the tridiagonal matrix; Stedc
// (cuSOLVERMp) gives its eigenvalues and eigenvectors Z on the grid; then Z := Q₂ Z on each
// rank's columns in waves of compact WY blocks (cuda/band.h WaveBlocks) with strided batched
// gemm, and Z := Q₁ Z panel by panel from the last (each owner rebuilds its panel's V and T and
// broadcasts them, as Orgqr1D does). Z is held with b + ℓ − 1 rows of zero padding below, so
// that every block of a wave has one shape. On a P x 1 grid each rank works on the columns of Z
// whose indices are its rows: Stedc's Z (by rows) is transposed on the grid once (Geadd), and
// the result's adjoint, by rows, is what VectorsOut writes back.
template <typename T>
Status Engine::BandEigh(void* w) {
  StepTimer timer("BandEigh", stream_);
  using R = RealOf<T>;
  const layout::Plan& plan = state_.plan;
  const bool by_rows = ctx_.npcol == 1 && ctx_.nprow > 1;  // P x 1: rows are distributed
  const int procs = by_rows ? ctx_.nprow : ctx_.npcol, me = by_rows ? ctx_.myrow : ctx_.mycol;
  const int64_t n = plan.cols.extent, t = plan.tile, lr = local_rows_, b = EigBand(t);
  const int64_t held = layout::CyclicLocalExtent(n, t, me, procs);  // local columns (rows)
  const size_t es = sizeof(T);
  const cuda::Dtype dt = KernelType<T>();
  const cuda::Dtype dr = KernelType<R>();
  const size_t reals = static_cast<size_t>(Scalar<T>::kParts);
  // ℓ: sweeps per wave block (JAXMG_EIG_Q2_GROUP, default b; at most 128 and ℓ² elements in
  // 160 KB, the factor kernel's shared memory). At N = 32768 on one H200, ℓ = 128 (b = 64) took
  // 9.2 s against 8.3 s for ℓ = 64: its blocks hold more zeros than their larger products gain.
  const char* group_env = std::getenv("JAXMG_EIG_Q2_GROUP");
  int64_t ell = group_env != nullptr ? std::atoll(group_env) : b;
  ell = std::clamp<int64_t>(ell, 1, 128);
  while (ell > 1 && static_cast<int64_t>(es) * ell * ell > (int64_t{160} << 10)) ell /= 2;
  const int64_t h = b + ell - 1, ldz = n + h;
  const int64_t groups = n > 2 ? (n - 2 + ell - 1) / ell : 0;
  const int64_t rows_j = n > 2 ? (n - 2) / b + 1 : 0;
  const int64_t kept = cuda::ChaseReflectors(n, b);
  void *band = nullptr, *taus = nullptr;
  JAXMG_RETURN_IF_ERROR(BandReduce<T>(EngineMatrix(), b, &band, &taus));

  // Buffers (agreed), then the chase on rank 0.
  // The waves of Q₂'s blocks (cuda/band.h WaveBlocks): the first group, its block row and the
  // number of blocks of each.
  struct Wave {
    int64_t g0, j0, count;
  };
  std::vector<Wave> waves;
  int64_t batch_max = 1;
  for (int64_t wave = 0; groups > 0 && wave < (rows_j - 1) + 2 * (groups - 1) + 1; ++wave) {
    Wave v{-1, 0, 0};
    for (int64_t g = std::max<int64_t>(0, groups - 1 - wave / 2 - 1); g < groups; ++g) {
      const int64_t j = wave + 1 - 2 * (groups - 1 - g);
      if (j < 1) continue;
      if (j > rows_j || g * ell >= cuda::ChaseSweeps(n, b, j)) break;
      if (v.g0 < 0) v.g0 = g, v.j0 = j;
      ++v.count;
    }
    if (v.count == 0) continue;
    waves.push_back(v);
    batch_max = std::max(batch_max, v.count);
  }
  // Columns of Z per product: W (ℓ x columns per block) within 1 GiB.
  const int64_t cols_held = std::max<int64_t>(held, 1);
  const int64_t chunk = std::clamp<int64_t>(
      (int64_t{1} << 30) / static_cast<int64_t>(es * batch_max * ell), 1, cols_held);
  void *v2 = nullptr, *tau2 = nullptr, *sync = nullptr, *d = nullptr, *e = nullptr;
  void *phase = nullptr, *z = nullptr, *q = nullptr, *vb = nullptr, *taub = nullptr;
  void *sb = nullptr, *tb = nullptr, *vtb = nullptr, *wb = nullptr, *vw = nullptr, *f = nullptr;
  void *qw1 = nullptr, *qw2 = nullptr, *qs = nullptr, *y = nullptr, *vt = nullptr;
  Lane main;
  Status local = MainLane(&main);
  for (auto [p, bytes] : {std::pair<void**, size_t>{&v2, es * std::max<int64_t>(kept, 1) * b},
                          {&tau2, es * std::max<int64_t>(kept, 1)},
                          {&sync, sizeof(int) * (n + 1)},
                          {&d, sizeof(R) * n},
                          {&e, sizeof(R) * n},
                          {&phase, es * n},
                          {&z, es * ldz * cols_held},
                          {&vb, es * batch_max * h * ell},
                          {&taub, es * batch_max * ell},
                          {&sb, es * batch_max * ell * ell},
                          {&tb, es * batch_max * ell * ell},
                          {&vtb, es * batch_max * h * ell},
                          {&wb, es * batch_max * ell * chunk},
                          {&vw, es * n * t},
                          {&f, es * t * t},
                          {&qw1, es * t * cols_held},
                          {&qw2, es * t * cols_held},
                          {&qs, es * t * t},
                          {&y, by_rows ? sizeof(R) * std::max<int64_t>(lr * local_cols_, 1) : 0},
                          {&vt, by_rows ? es * n * b : 0},
                          {&local_b_, es * std::max<int64_t>(lr * local_cols_, 1)}}) {
    if (local.ok()) local = Scratch(bytes, p);
  }
  q = local_b_;  // Stedc's real vectors, until the eigenvectors are written there at the end
  if (local.ok()) {
    local = desc_b_.Create(ctx_, DataTypeOf<T>(), n, n, t, t, std::max<int64_t>(lr, 1));
  }
  Descriptor desc_q;
  if (local.ok()) {
    local = desc_q.Create(ctx_, DataTypeOf<R>(), n, n, t, t, std::max<int64_t>(lr, 1));
  }
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(local));
  // From here a local error is kept (every rank still enters each collective) and agreed at the
  // end. The test hook's steps: 0 the chase, 1 the tridiagonal solve, 2 and 3 the two
  // back-transformations.
  Deferred failed;
  failed.Step("band_eigh", ctx_.rank, 0);
  if (me == 0) {
    failed.Run([&]() -> Status {
      StepTimer chase("BandToTridiagonal (vectors)", stream_);
      JAXMG_CUDA(
          cuda::BandToTridiagonal(dt, band, n, b, static_cast<int*>(sync), v2, tau2, stream_));
      JAXMG_CUDA(cuda::TridiagonalOf(dt, band, n, b, d, e, phase, stream_));
      return Status();
    });
  }
  if (procs > 1) {
    StepTimer share("broadcast reflectors", stream_);
    JAXMG_NCCL(ncclGroupStart());
    JAXMG_NCCL(ncclBroadcast(d, d, n, NcclRealOf<T>(), 0, ctx_.comm, stream_));
    JAXMG_NCCL(ncclBroadcast(e, e, n, NcclRealOf<T>(), 0, ctx_.comm, stream_));
    JAXMG_NCCL(ncclBroadcast(phase, phase, n * reals, NcclRealOf<T>(), 0, ctx_.comm, stream_));
    JAXMG_NCCL(ncclBroadcast(tau2, tau2, kept * reals, NcclRealOf<T>(), 0, ctx_.comm, stream_));
    JAXMG_NCCL(ncclGroupEnd());
    JAXMG_NCCL(ncclBroadcast(v2, v2, kept * b * reals, NcclRealOf<T>(), 0, ctx_.comm, stream_));
  }

  // The tridiagonal matrix's eigenvectors (real) into q (local_b_'s memory), then z = diag(p) q
  // in z's padded layout.
  failed.Keep(CudaCheck(cudaMemsetAsync(z, 0, es * ldz * cols_held, stream_), "cudaMemsetAsync"));
  {
    StepTimer stedc("Stedc", stream_);
    failed.Step("band_eigh", ctx_.rank, 1);
    char compz[2] = {'I', 0};
    std::vector<int> iwork(std::max<int64_t>(n, 2 * procs + 1));
    void* qd = q;
    size_t dev = 0, host = 0;
    void* d_work = nullptr;
    Deferred buffers;  // the solve's workspace, agreed before the collective solve
    buffers.Run([&]() -> Status {
      JAXMG_SOLVER(cusolverMpStedc_bufferSize(ctx_.handle, compz, n, d, e, qd, 1, 1, desc_q.get(),
                                              DataTypeOf<R>(), &dev, &host, iwork.data()));
      return Workspace(dev, host, &d_work);
    });
    JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(buffers.status()));
    failed.Keep(SolverCheck(cusolverMpStedc(ctx_.handle, compz, n, d, e, qd, 1, 1, desc_q.get(),
                                            DataTypeOf<R>(), d_work, workspace_bytes_,
                                            ctx_.host_work.data(), ctx_.host_work.size(), small_),
                            "cusolverMpStedc"));
    int64_t ldq = std::max<int64_t>(lr, 1);
    if (by_rows) {
      // q holds Z's rows: y := Zᵀ on the grid, whose local rows are Z's columns (transposed).
      JAXMG_RETURN_IF_ERROR(GridAdjoint<R>(q, y));
      failed.Keep(CudaCheck(cuda::Adjoint(dr, y, ldq, held, n, q, n, stream_), "Adjoint"));
      ldq = n;
    }
    failed.Run([&] {
      return CudaCheck(cuda::PhaseRows(dt, q, ldq, phase, n, held, z, ldz, stream_), "PhaseRows");
    });
  }
  failed.Run([&] {
    return CudaCheck(cudaMemcpyAsync(w, d, sizeof(R) * n, cudaMemcpyDeviceToDevice, stream_),
                     "cudaMemcpyAsync");
  });

  const LocalBlas& lb = *main.lb;
  const int xi = Scalar<T>::kIndex;
  const T one(1), zero(0), minus_one(-1);
  failed.Step("band_eigh", ctx_.rank, 2);
  failed.Run([&]() -> Status {
    int ih = 0, il = 0, ic = 0, iz = 0, icount = 0;
    JAXMG_RETURN_IF_ERROR(CheckedInt(h, "wave block rows", &ih));
    JAXMG_RETURN_IF_ERROR(CheckedInt(ell, "wave block columns", &il));
    JAXMG_RETURN_IF_ERROR(CheckedInt(ldz, "rows", &iz));
    {
      // Z := Q₂ Z, wave by wave, W as Wᴴ = Zᴴ V (Z's columns the long side: 7.10 s against 7.35 s
      // for W = Vᴴ Z at N = 32768 on one H200; JAXMG_EIG_Q2_ROWS=0 takes the latter).
      const char* rows_env = std::getenv("JAXMG_EIG_Q2_ROWS");
      const bool q2_rows = rows_env == nullptr || std::string(rows_env) != "0";
      StepTimer back("Q2 (chase reflectors)", stream_);
      for (const Wave& v : waves) {
        const int64_t g0 = v.g0, j0 = v.j0, count = v.count;
        JAXMG_RETURN_IF_ERROR(CheckedInt(count, "wave blocks", &icount));
        JAXMG_CUDA(cuda::WaveBlocks(dt, v2, tau2, n, b, ell, g0, j0, count, vb, taub, stream_));
        JAXMG_RETURN_IF_ERROR(CublasCheck(
            lb.gemm_batched[xi](main.blas, AdjointOp<T>(), CUBLAS_OP_N, il, il, ih, &one, vb, ih,
                                h * ell, vb, ih, h * ell, &zero, sb, il, ell * ell, icount),
            "cublas gemm (wave VᴴV)"));
        JAXMG_CUDA(cuda::WaveFactors(dt, sb, taub, ell, count, tb, stream_));
        JAXMG_RETURN_IF_ERROR(CublasCheck(
            lb.gemm_batched[xi](main.blas, CUBLAS_OP_N, CUBLAS_OP_N, ih, il, il, &one, vb, ih,
                                h * ell, tb, il, ell * ell, &zero, vtb, ih, h * ell, icount),
            "cublas gemm (wave V T)"));
        const int64_t row0 = g0 * ell + 1 + (j0 - 1) * b, stride = ell + 2 * b;
        for (int64_t c = 0; c < held; c += chunk) {
          const int64_t cw = std::min(chunk, held - c);
          JAXMG_RETURN_IF_ERROR(CheckedInt(cw, "columns", &ic));
          char* zc = static_cast<char*>(z) + es * (row0 + c * ldz);
          if (q2_rows) {
            // Wᴴ = Zᴴ V (columns x ℓ: the long side first), then Z −= (V T) (Wᴴ)ᴴ.
            JAXMG_RETURN_IF_ERROR(CublasCheck(
                lb.gemm_batched[xi](main.blas, AdjointOp<T>(), CUBLAS_OP_N, ic, il, ih, &one, zc,
                                    iz, stride, vb, ih, h * ell, &zero, wb, ic, ell * cw, icount),
                "cublas gemm (wave Zᴴ V)"));
            JAXMG_RETURN_IF_ERROR(
                CublasCheck(lb.gemm_batched[xi](main.blas, CUBLAS_OP_N, AdjointOp<T>(), ih, ic, il,
                                                &minus_one, vtb, ih, h * ell, wb, ic, ell * cw,
                                                &one, zc, iz, stride, icount),
                            "cublas gemm (wave Z − V T W)"));
            continue;
          }
          JAXMG_RETURN_IF_ERROR(CublasCheck(
              lb.gemm_batched[xi](main.blas, AdjointOp<T>(), CUBLAS_OP_N, il, ic, ih, &one, vb, ih,
                                  h * ell, zc, iz, stride, &zero, wb, il, ell * cw, icount),
              "cublas gemm (wave Vᴴ Z)"));
          JAXMG_RETURN_IF_ERROR(CublasCheck(
              lb.gemm_batched[xi](main.blas, CUBLAS_OP_N, CUBLAS_OP_N, ih, ic, il, &minus_one, vtb,
                                  ih, h * ell, wb, il, ell * cw, &one, zc, iz, stride, icount),
              "cublas gemm (wave Z − V T W)"));
        }
      }
    }
    return Status();
  });
  {
    // Z := Q₁ Z by tiles from the last: a tile's panels (one owner) joined into one compact WY
    // block (V_p placed p b rows down, T of all their reflectors), so that the products are t
    // wide instead of b.
    StepTimer back("Q1 (band reduction)", stream_);
    const QrWork qwork{qw1, qw2, qs};
    char* a = static_cast<char*>(work_);
    // JAXMG_EIG_Q1_WIDTH: the panels joined (a multiple of b dividing t; default t).
    const char* width_env = std::getenv("JAXMG_EIG_Q1_WIDTH");
    int64_t gw = width_env != nullptr ? std::atoll(width_env) : t;
    if (gw < b || t % gw != 0 || gw % b != 0) gw = t;
    const int64_t groups_q1 = (n + gw - 1) / gw;
    failed.Step("band_eigh", ctx_.rank, 3);
    for (int64_t kg = groups_q1 - 1; kg >= 0; --kg) {
      const int64_t c0 = kg * gw, r0 = c0 + b, rows = n - r0;
      if (rows < 2) continue;
      const int64_t k = std::min(std::min(gw, n - c0), rows);  // τ = 0 past each panel's
      const int owner = static_cast<int>((c0 / t) % procs);
      if (me == owner) {
        failed.Run([&]() -> Status {
          JAXMG_CUDA(cudaMemsetAsync(vw, 0, es * rows * k, stream_));
          const int64_t lc0 = (c0 / t / procs) * t + c0 % t;
          char* column = a + es * lr * lc0;
          for (int64_t p = 0; p * b < k; ++p) {
            const int64_t pr0 = r0 + p * b, prows = n - pr0, pk = std::min(prows, b);
            if (prows < 2) break;
            const char* at = column + es * (pr0 + p * b * lr);
            int64_t ld_at = lr;
            if (by_rows) {  // BandReduce left the factored rows' adjoint in this rank's rows
              JAXMG_CUDA(cuda::Adjoint(dt, a + es * (lc0 + p * b + pr0 * lr), lr, pk, prows, vt,
                                       prows, stream_));
              at = static_cast<const char*>(vt), ld_at = prows;
            }
            JAXMG_CUDA(cuda::ReflectorBlock(
                dt, at, ld_at, prows, pk, static_cast<char*>(taus) + es * (c0 + p * b),
                static_cast<char*>(vw) + es * (p * b + p * b * rows), rows, stream_));
          }
          JAXMG_RETURN_IF_ERROR(
              ReflectorFactorOf<T>(main, vw, rows, k, static_cast<char*>(taus) + es * c0, f, qs));
          return Status();
        });
      }
      if (procs > 1) {
        JAXMG_NCCL(ncclGroupStart());
        JAXMG_NCCL(
            ncclBroadcast(vw, vw, rows * k * reals, NcclRealOf<T>(), owner, ctx_.comm, stream_));
        JAXMG_NCCL(ncclBroadcast(f, f, t * k * reals, NcclRealOf<T>(), owner, ctx_.comm, stream_));
        JAXMG_NCCL(ncclGroupEnd());
      }
      failed.Run([&] {
        return ApplyReflectors<T>(main, vw, rows, k, f, t, /*adjoint=*/false,
                                  static_cast<char*>(z) + es * r0, held, ldz, qwork);
      });
    }
  }
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("band_eigh", failed));
  if (by_rows) {
    // Zᴴ's rows of this rank are its columns of Z: VectorsOut needs no exchange.
    JAXMG_CUDA(cuda::Adjoint(dt, z, ldz, n, held, local_b_, std::max<int64_t>(lr, 1), stream_));
    vectors_adjointed_ = true;
  } else if (held > 0) {
    JAXMG_CUDA(cudaMemcpy2DAsync(local_b_, es * lr, z, es * ldz, es * n, held,
                                 cudaMemcpyDeviceToDevice, stream_));
  }
  return Status();
}

#define JAXMG_INSTANTIATE_BAND_EIGENVALUES(T)                                 \
  template Status Engine::BandEigenvalues<T>(const BandSource& src, void* w); \
  template Status Engine::BandEigh<T>(void* w);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_BAND_EIGENVALUES)
#undef JAXMG_INSTANTIATE_BAND_EIGENVALUES

}  // namespace jaxmg::cusolvermp
