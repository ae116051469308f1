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
  const int64_t n = ew.n, lr = ew.lr, held = ew.held;
  const int64_t ldz = ew.ldz;
  const int64_t cols_held = ew.cols_held;
  const int procs = ew.procs;
  const bool by_rows = ew.by_rows;
  void *d = ew.d, *e = ew.e, *phase = ew.phase, *z = ew.z;
  void* q = ew.q;
  void* y = ew.y;
  const size_t es = sizeof(T);
  const cuda::Dtype dt = KernelType<T>();
  const cuda::Dtype dr = KernelType<R>();
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
