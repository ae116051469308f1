// The two-stage eigensolver's second back-transformation (BandEigh): Z := Q₁ Z with the band
// reduction's reflectors, over the GPU backend (algorithms/band_reduce.h).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/band_reduce.h"
#include "common/deferred.h"
#include "common/scalar.h"
#include "cuda/band.h"
#include "cuda/kernels.h"
#include "engines/cusolvermp/backend.h"
#include "engines/cusolvermp/engine.h"
#include "engines/cusolvermp/engine_util.h"
#include "engines/cusolvermp/local_blas.h"

namespace jaxmg::cusolvermp {

template <typename T>
Status Engine::EighBackReduce(const EighWork& ew, Deferred* failed) {
  // Z := Q₁ Z by tiles from the last (algorithms/band_reduce.h BandBackReduce).
  StepTimer back("Q1 (band reduction)", stream_);
  // JAXMG_EIG_Q1_WIDTH: the panels joined (a multiple of b dividing t; default t).
  const char* width_env = std::getenv("JAXMG_EIG_Q1_WIDTH");
  int64_t gw = width_env != nullptr ? std::atoll(width_env) : ew.t;
  if (gw < ew.b || ew.t % gw != 0 || gw % ew.b != 0) gw = ew.t;
  Backend backend(*this);
  const algorithms::BackReduceWork<T> w{
      static_cast<T*>(ew.vw),
      static_cast<T*>(ew.f),
      static_cast<T*>(ew.qs),
      static_cast<T*>(ew.vt),
      {static_cast<T*>(ew.qw1), static_cast<T*>(ew.qw2), static_cast<T*>(ew.qs)}};
  return algorithms::BandBackReduce<T>(backend, ew.main, BandShapeOf(ew.n, ew.t, ew.lr, ew.b),
                                       static_cast<const T*>(work_), static_cast<const T*>(ew.taus),
                                       gw, static_cast<T*>(ew.z), ew.ldz, w, failed);
}

#define JAXMG_INSTANTIATE_STAGE(T) \
  template Status Engine::EighBackReduce<T>(const EighWork&, Deferred*);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_STAGE)
#undef JAXMG_INSTANTIATE_STAGE

}  // namespace jaxmg::cusolvermp
