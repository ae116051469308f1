// The selected eigenpairs of a Hermitian matrix (scalapack.h EighSubset): ScaLAPACK's p?syevr /
// p?heevr (MRRR) with RANGE = 'I'.
#include <algorithm>
#include <complex>
#include <new>
#include <string>
#include <vector>

#include "common/scalar.h"
#include "engines/scalapack/scalapack.h"

extern "C" {
// Selected eigenpairs by MRRR: p?syevr (real), p?heevr (complex, with rwork).
#define JAXMG_DECLARE_EVR(p, T, R, evr, ...)                                                \
  void p##evr##_(const char* jobz, const char* range, const char* uplo, const int* n, T* a, \
                 const int* ia, const int* ja, const int* desca, const R* vl, const R* vu,  \
                 const int* il, const int* iu, int* m, int* nz, R* w, T* z, const int* iz,  \
                 const int* jz, const int* descz, T* work, const int* lwork,                \
                 __VA_ARGS__ int* iwork, const int* liwork, int* info);
JAXMG_DECLARE_EVR(ps, float, float, syevr)
JAXMG_DECLARE_EVR(pd, double, double, syevr)
JAXMG_DECLARE_EVR(pc, std::complex<float>, float, heevr, float* rwork, const int* lrwork, )
JAXMG_DECLARE_EVR(pz, std::complex<double>, double, heevr, double* rwork, const int* lrwork, )
#undef JAXMG_DECLARE_EVR
int numroc_(const int* n, const int* nb, const int* iproc, const int* isrcproc, const int* nprocs);
}

namespace jaxmg::scalapack {
namespace {

// One p?syevr / p?heevr call with RANGE = 'I' (rwork: the complex types' real workspace, else
// unused).
#define JAXMG_EVR_CALL(p, T, evr, ...)                                                             \
  void Evr(const char* jobz, int n, T* a, const Descriptor& desc, int il, int iu, int* m, int* nz, \
           RealOf<T>* w, T* z, const Descriptor& descz, T* work, int lwork, RealOf<T>* rwork,      \
           int lrwork, int* iwork, int liwork, int* info) {                                        \
    const int one = 1;                                                                             \
    const RealOf<T> unused(0);                                                                     \
    p##evr##_(jobz, "I", "L", &n, a, &one, &one, desc.desc, &unused, &unused, &il, &iu, m, nz, w,  \
              z, &one, &one, descz.desc, work, &lwork, __VA_ARGS__ iwork, &liwork, info);          \
  }
JAXMG_EVR_CALL(ps, float, syevr)
JAXMG_EVR_CALL(pd, double, syevr)
JAXMG_EVR_CALL(pc, std::complex<float>, heevr, rwork, &lrwork, )
JAXMG_EVR_CALL(pz, std::complex<double>, heevr, rwork, &lrwork, )
#undef JAXMG_EVR_CALL

}  // namespace

template <typename T>
Status EighSubset(const Grid& grid, bool vectors, int64_t n, int64_t lo, int64_t hi, T* a,
                  const Descriptor& desc, RealOf<T>* w, T* z, const Descriptor& descz, int* info) {
  using R = RealOf<T>;
  constexpr bool kComplex = Scalar<T>::kParts == 2;
  int in, il, iu;
  JAXMG_RETURN_IF_ERROR(CheckedInt(n, "order", &in));
  JAXMG_RETURN_IF_ERROR(CheckedInt(lo + 1, "first index", &il));
  JAXMG_RETURN_IF_ERROR(CheckedInt(hi, "last index", &iu));
  const char* jobz = vectors ? "V" : "N";
  const int64_t k = hi - lo;
  int found = 0, found_vectors = 0;
  int lwork = 1, lrwork = 1, liwork = 1;
  std::vector<T> work;
  std::vector<R> rwork(1, R(0));
  std::vector<int> iwork;
  // The workspaces: the query (every size -1), then at least the documented minima (the query
  // of some ScaLAPACK versions answers less for small orders); agreed before the collective
  // solve, so that a rank whose allocation fails does not leave its peers waiting in it.
  const Status sized = [&]() -> Status {
    T query(0);
    R rquery(0);
    int iquery = 0;
    Evr(jobz, in, a, desc, il, iu, &found, &found_vectors, w, z, descz, &query, -1, &rquery, -1,
        &iquery, -1, info);
    if (*info < 0) {
      return JAXMG_ERROR("p?syevr / p?heevr: illegal argument " + std::to_string(-*info));
    }
    const int nb = desc.desc[5], procs = grid.nprow * grid.npcol, zero = 0;
    const int64_t nn = std::max<int64_t>({n, nb, 2});
    const int nn_i = static_cast<int>(nn), k_i = static_cast<int>(std::max<int64_t>({k, nb, 2}));
    const int64_t np0 = numroc_(&nn_i, &nb, &zero, &zero, &grid.nprow);
    const int64_t mq0 = numroc_(&k_i, &nb, &zero, &zero, &grid.npcol);
    const int64_t per_rank = (k + procs - 1) / procs;
    const int64_t real_floor =
        vectors ? 2 + 5 * n + std::max(18 * nn, np0 * mq0 + 2 * nb * nb) + (2 + per_rank) * nn
                : 2 + 5 * n + std::max(12 * nn, nb * (np0 + 1));
    const int64_t nnp = std::max<int64_t>({n, procs + 1, 4});
    const int64_t int_floor = (vectors ? 12 : 10) * nnp + 2 * n;
    try {
      if constexpr (kComplex) {
        const int64_t complex_floor = vectors ? n + std::max((np0 + mq0 + nb) * nb, 3 * int64_t{nb})
                                              : n + std::max(nb * (np0 + 1), 3 * int64_t{nb});
        JAXMG_RETURN_IF_ERROR(
            QueriedWork(T(std::max<double>(std::real(query), static_cast<double>(complex_floor))),
                        &work, &lwork));
        JAXMG_RETURN_IF_ERROR(
            QueriedWork(std::max<R>(rquery, static_cast<R>(real_floor)), &rwork, &lrwork));
      } else {
        JAXMG_RETURN_IF_ERROR(
            QueriedWork(std::max<T>(query, static_cast<T>(real_floor)), &work, &lwork));
      }
      JAXMG_RETURN_IF_ERROR(
          CheckedInt(std::max<int64_t>(iquery, int_floor), "integer workspace", &liwork));
      iwork.assign(static_cast<size_t>(liwork), 0);
    } catch (const std::bad_alloc&) {
      return JAXMG_ERROR("could not allocate p?syevr's workspace");
    }
    return Status();
  }();
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure(grid, "p?syevr", sized));
  Evr(jobz, in, a, desc, il, iu, &found, &found_vectors, w, z, descz, work.data(), lwork,
      rwork.data(), lrwork, iwork.data(), liwork, info);
  if (*info < 0) {
    return JAXMG_ERROR("p?syevr / p?heevr: illegal argument " + std::to_string(-*info));
  }
  // Fewer pairs than asked: reported as the first one missing (no convergence).
  if (*info == 0 && (found != k || (vectors && found_vectors != k))) {
    *info = static_cast<int>(
        std::min<int64_t>(lo + std::min(found, vectors ? found_vectors : found) + 1, INT32_MAX));
  }
  return Status();
}
template Status EighSubset<float>(const Grid&, bool, int64_t, int64_t, int64_t, float*,
                                  const Descriptor&, float*, float*, const Descriptor&, int*);
template Status EighSubset<double>(const Grid&, bool, int64_t, int64_t, int64_t, double*,
                                   const Descriptor&, double*, double*, const Descriptor&, int*);
template Status EighSubset<std::complex<float>>(const Grid&, bool, int64_t, int64_t, int64_t,
                                                std::complex<float>*, const Descriptor&, float*,
                                                std::complex<float>*, const Descriptor&, int*);
template Status EighSubset<std::complex<double>>(const Grid&, bool, int64_t, int64_t, int64_t,
                                                 std::complex<double>*, const Descriptor&, double*,
                                                 std::complex<double>*, const Descriptor&, int*);

}  // namespace jaxmg::scalapack
