// The two-stage eigensolver's bulge chase with vectors (BandEigh's stage two): the band to a
// tridiagonal matrix on rank 0, keeping the chase's reflectors, which every rank then receives
// with the tridiagonal matrix.
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
Status Engine::EighChase(const EighWork& ew, Deferred* failed) {
  using R = RealOf<T>;
  const int64_t n = ew.n, b = ew.b;
  const int64_t kept = ew.kept;
  const int procs = ew.procs, me = ew.me;
  void *band = ew.band, *v2 = ew.v2, *tau2 = ew.tau2;
  void *sync = ew.sync, *d = ew.d, *e = ew.e, *phase = ew.phase;
  const cuda::Dtype dt = KernelType<T>();
  const size_t reals = static_cast<size_t>(Scalar<T>::kParts);
  failed->Step("band_eigh", ctx_.rank, 0);
  if (me == 0) {
    failed->Run([&]() -> Status {
      StepTimer chase("BandToTridiagonal (vectors)", stream_);
      JAXMG_CUDA(
          cuda::BandToTridiagonal(dt, band, n, b, static_cast<int*>(sync), v2, tau2, stream_));
      JAXMG_CUDA(cuda::TridiagonalOf(dt, band, n, b, d, e, phase, stream_));
      return Status();
    });
    if (!failed->ok()) {
      // A well-formed (zero) tridiagonal matrix for every rank's collective solve after a
      // failure here: the solve's steps may depend on its values, which are rank 0's everywhere.
      failed->Keep(CudaCheck(cudaMemsetAsync(d, 0, sizeof(R) * n, stream_), "cudaMemsetAsync"));
      failed->Keep(CudaCheck(cudaMemsetAsync(e, 0, sizeof(R) * n, stream_), "cudaMemsetAsync"));
    }
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

  return Status();
}

#define JAXMG_INSTANTIATE_STAGE(T) template Status Engine::EighChase<T>(const EighWork&, Deferred*);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_STAGE)
#undef JAXMG_INSTANTIATE_STAGE

}  // namespace jaxmg::cusolvermp
