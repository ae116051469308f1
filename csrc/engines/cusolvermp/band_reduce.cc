// The two-stage eigensolver's choice (which grids and tiles take it) and its first stage on 1 x P
// and P x 1 grids (algorithms/band_reduce.h): the engine matrix reduced to a Hermitian band of
// width b over the devices.
#include "algorithms/band_reduce.h"

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
#include "engines/cusolvermp/backend.h"
#include "engines/cusolvermp/engine.h"
#include "engines/cusolvermp/engine_util.h"
#include "engines/cusolvermp/local_blas.h"

namespace jaxmg::cusolvermp {

int64_t Engine::EigBand(int64_t t) {
  // JAXMG_EIG_BAND: the widest band tried (default 64; algorithms/band_reduce.h BandWidth).
  const char* value = std::getenv("JAXMG_EIG_BAND");
  return algorithms::BandWidth(t, value != nullptr ? std::atoll(value) : 64);
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

algorithms::BandShape Engine::BandShapeOf(int64_t n, int64_t t, int64_t lr, int64_t b) const {
  algorithms::BandShape s;
  s.by_rows = ctx_.npcol == 1 && ctx_.nprow > 1;  // P x 1: rows are distributed
  s.procs = s.by_rows ? ctx_.nprow : ctx_.npcol;
  s.me = s.by_rows ? ctx_.myrow : ctx_.mycol;
  s.n = n, s.t = t, s.lr = lr, s.b = b;
  s.held = layout::CyclicLocalExtent(n, t, s.me, s.procs);  // local columns (rows)
  s.rank = ctx_.rank;
  return s;
}

// Stage one (algorithms/band_reduce.h) over the GPU backend.
template <typename T>
Status Engine::BandReduce(const BandSource& src, int64_t b, void** band_out, void** taus_out) {
  StepTimer timer("BandReduce", stream_);
  Backend backend(*this);
  algorithms::Banded<T> out;
  JAXMG_RETURN_IF_ERROR(algorithms::BandReduce<T>(backend, BandShapeOf(src.n, src.t, src.lr, b),
                                                  static_cast<T*>(src.a), &out));
  if (DebugParts()) PrintParts("BandReduce");
  *band_out = out.band;
  *taus_out = out.taus;
  return Status();
}

#define JAXMG_INSTANTIATE_BAND_REDUCE(T)                                                   \
  template Status Engine::BandReduce<T>(const BandSource& src, int64_t b, void** band_out, \
                                        void** taus_out);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_BAND_REDUCE)
#undef JAXMG_INSTANTIATE_BAND_REDUCE

}  // namespace jaxmg::cusolvermp
