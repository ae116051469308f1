// The two-stage eigensolver's tridiagonal solve (BandEigh's stage three): the tridiagonal
// matrix's eigenvalues w and eigenvectors (cuSOLVERMp's Stedc, on the grid), then Z = diag(phase) Q
// in Z's padded layout.
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

template <typename T>
Status Engine::EighTridiagonal(const EighWork& ew, void* w, Deferred* failed) {
  using R = RealOf<T>;
  [[maybe_unused]] const int64_t n = ew.n, t = ew.t, lr = ew.lr, b = ew.b, held = ew.held;
  [[maybe_unused]] const int64_t ell = ew.ell, h = ew.h, ldz = ew.ldz, kept = ew.kept;
  [[maybe_unused]] const int64_t chunk = ew.chunk, cols_held = ew.cols_held;
  [[maybe_unused]] const int procs = ew.procs, me = ew.me;
  [[maybe_unused]] const bool by_rows = ew.by_rows;
  [[maybe_unused]] const Lane& main = ew.main;
  [[maybe_unused]] void *band = ew.band, *taus = ew.taus, *v2 = ew.v2, *tau2 = ew.tau2;
  [[maybe_unused]] void *sync = ew.sync, *d = ew.d, *e = ew.e, *phase = ew.phase, *z = ew.z;
  [[maybe_unused]] void *q = ew.q, *vb = ew.vb, *taub = ew.taub, *sb = ew.sb, *tb = ew.tb;
  [[maybe_unused]] void *vtb = ew.vtb, *wb = ew.wb, *vw = ew.vw, *f = ew.f, *qw1 = ew.qw1;
  [[maybe_unused]] void *qw2 = ew.qw2, *qs = ew.qs, *y = ew.y, *vt = ew.vt;
  [[maybe_unused]] const size_t es = sizeof(T);
  [[maybe_unused]] const cuda::Dtype dt = KernelType<T>();
  [[maybe_unused]] const cuda::Dtype dr = KernelType<R>();
  [[maybe_unused]] const size_t reals = static_cast<size_t>(Scalar<T>::kParts);
  // The tridiagonal matrix's eigenvectors (real) into q (local_b_'s memory), then z = diag(p) q
  // in z's padded layout.
  failed->Keep(CudaCheck(cudaMemsetAsync(z, 0, es * ldz * cols_held, stream_), "cudaMemsetAsync"));
  {
    StepTimer stedc("Stedc", stream_);
    failed->Step("band_eigh", ctx_.rank, 1);
    char compz[2] = {'I', 0};
    std::vector<int> iwork(std::max<int64_t>(n, 2 * procs + 1));
    void* qd = q;
    size_t dev = 0, host = 0;
    void* d_work = nullptr;
    Deferred buffers;  // the solve's workspace, agreed before the collective solve
    buffers.Run([&]() -> Status {
      JAXMG_SOLVER(cusolverMpStedc_bufferSize(ctx_.handle, compz, n, d, e, qd, 1, 1,
                                              ew.desc_q->get(), DataTypeOf<R>(), &dev, &host,
                                              iwork.data()));
      return Workspace(dev, host, &d_work);
    });
    JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(buffers.status()));
    failed->Keep(
        SolverCheck(cusolverMpStedc(ctx_.handle, compz, n, d, e, qd, 1, 1, ew.desc_q->get(),
                                    DataTypeOf<R>(), d_work, workspace_bytes_,
                                    ctx_.host_work.data(), ctx_.host_work.size(), small_),
                    "cusolverMpStedc"));
    int64_t ldq = std::max<int64_t>(lr, 1);
    if (by_rows) {
      // q holds Z's rows: y := Zᵀ on the grid, whose local rows are Z's columns (transposed).
      JAXMG_RETURN_IF_ERROR(GridAdjoint<R>(q, y));
      failed->Keep(CudaCheck(cuda::Adjoint(dr, y, ldq, held, n, q, n, stream_), "Adjoint"));
      ldq = n;
    }
    failed->Run([&] {
      return CudaCheck(cuda::PhaseRows(dt, q, ldq, phase, n, held, z, ldz, stream_), "PhaseRows");
    });
  }
  failed->Run([&] {
    return CudaCheck(cudaMemcpyAsync(w, d, sizeof(R) * n, cudaMemcpyDeviceToDevice, stream_),
                     "cudaMemcpyAsync");
  });

  return Status();
}

#define JAXMG_INSTANTIATE_STAGE(T) \
  template Status Engine::EighTridiagonal<T>(const EighWork&, void*, Deferred*);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_STAGE)
#undef JAXMG_INSTANTIATE_STAGE

}  // namespace jaxmg::cusolvermp
