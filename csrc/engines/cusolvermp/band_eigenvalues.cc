// The GPU engine's eigenvalues in two stages, on 1 x P grids (every row local, columns
// block-cyclic in tiles of t): the band reduction (band_reduce.cc), the band gathered on rank 0,
// chased to a tridiagonal matrix and its eigenvalues found by bisection there (cuda/band.h), and
// broadcast.
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

#define JAXMG_INSTANTIATE_BAND_EIGENVALUES(T) \
  template Status Engine::BandEigenvalues<T>(const BandSource& src, void* w);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_BAND_EIGENVALUES)
#undef JAXMG_INSTANTIATE_BAND_EIGENVALUES

}  // namespace jaxmg::cusolvermp
