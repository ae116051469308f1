// The two-stage eigensolver's choice (which grids and tiles take it) and its first stage on 1 x P
// and P x 1 grids: the engine matrix reduced to a Hermitian band of width b over the devices
// (BLAS3; the one-stage tridiagonal reduction, cuSOLVERMp's Syevd, reads the whole trailing
// matrix for every column and is bound by memory bandwidth).
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

#define JAXMG_INSTANTIATE_BAND_REDUCE(T)                                                   \
  template Status Engine::BandReduce<T>(const BandSource& src, int64_t b, void** band_out, \
                                        void** taus_out);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_BAND_REDUCE)
#undef JAXMG_INSTANTIATE_BAND_REDUCE

}  // namespace jaxmg::cusolvermp
