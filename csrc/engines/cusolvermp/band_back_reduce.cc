// The two-stage eigensolver's second back-transformation (BandEigh): Z := Q₁ Z with the band
// reduction's reflectors, tile by tile from the last (each owner rebuilds its tile's V and T and
// broadcasts them, as Orgqr1D does).
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
Status Engine::EighBackReduce(const EighWork& ew, Deferred* failed) {
  using R = RealOf<T>;
  const int64_t n = ew.n, t = ew.t, lr = ew.lr, b = ew.b, held = ew.held;
  const int64_t ldz = ew.ldz;
  const int procs = ew.procs, me = ew.me;
  const bool by_rows = ew.by_rows;
  const Lane& main = ew.main;
  void* taus = ew.taus;
  void* z = ew.z;
  void *vw = ew.vw, *f = ew.f, *qw1 = ew.qw1;
  void *qw2 = ew.qw2, *qs = ew.qs, *vt = ew.vt;
  const size_t es = sizeof(T);
  const cuda::Dtype dt = KernelType<T>();
  const size_t reals = static_cast<size_t>(Scalar<T>::kParts);
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
    failed->Step("band_eigh", ctx_.rank, 3);
    for (int64_t kg = groups_q1 - 1; kg >= 0; --kg) {
      const int64_t c0 = kg * gw, r0 = c0 + b, rows = n - r0;
      if (rows < 2) continue;
      const int64_t k = std::min(std::min(gw, n - c0), rows);  // τ = 0 past each panel's
      const int owner = static_cast<int>((c0 / t) % procs);
      if (me == owner) {
        failed->Run([&]() -> Status {
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
      failed->Run([&] {
        return ApplyReflectors<T>(main, vw, rows, k, f, t, /*adjoint=*/false,
                                  static_cast<char*>(z) + es * r0, held, ldz, qwork);
      });
    }
  }
  return Status();
}

#define JAXMG_INSTANTIATE_STAGE(T) \
  template Status Engine::EighBackReduce<T>(const EighWork&, Deferred*);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_STAGE)
#undef JAXMG_INSTANTIATE_STAGE

}  // namespace jaxmg::cusolvermp
