// The two-stage eigensolver's first back-transformation (BandEigh): Z := Q₂ Z with the bulge
// chase's reflectors, in waves of compact WY blocks (cuda/band.h WaveBlocks) with strided batched
// gemm.
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
Status Engine::EighBackChase(const EighWork& ew, Deferred* failed) {
  using R = RealOf<T>;
  const int64_t n = ew.n, b = ew.b, held = ew.held;
  const int64_t ell = ew.ell, h = ew.h, ldz = ew.ldz;
  const int64_t chunk = ew.chunk;
  const Lane& main = ew.main;
  void *v2 = ew.v2, *tau2 = ew.tau2;
  void* z = ew.z;
  void *vb = ew.vb, *taub = ew.taub, *sb = ew.sb, *tb = ew.tb;
  void *vtb = ew.vtb, *wb = ew.wb;
  const size_t es = sizeof(T);
  const cuda::Dtype dt = KernelType<T>();
  using Wave = EighWave;
  const std::vector<Wave>& waves = ew.waves;
  const LocalBlas& lb = *main.lb;
  const int xi = Scalar<T>::kIndex;
  const T one(1), zero(0), minus_one(-1);
  failed->Step("band_eigh", ctx_.rank, 2);
  failed->Run([&]() -> Status {
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
  return Status();
}

#define JAXMG_INSTANTIATE_STAGE(T) \
  template Status Engine::EighBackChase<T>(const EighWork&, Deferred*);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_STAGE)
#undef JAXMG_INSTANTIATE_STAGE

}  // namespace jaxmg::cusolvermp
