// The CPU engine's two-stage eigensolver on 1 x P and P x 1 grids: the band reduction over the
// processes and Z := Q₁ Z (algorithms/band_reduce.h, over the CPU backend), with LAPACK's band
// eigensolver (?sbevd, ?hbevd: its own bulge chase, divide and conquer, and Q₂) on rank 0
// between them; the eigenvectors of the band go to the ranks that hold their columns.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <limits>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "algorithms/band_reduce.h"
#include "common/deferred.h"
#include "common/scalar.h"
#include "engines/scalapack/backend.h"
#include "engines/scalapack/engine.h"
#include "engines/scalapack/engine_util.h"

extern "C" {
void ssbevd_(const char* jobz, const char* uplo, const int* n, const int* kd, float* ab,
             const int* ldab, float* w, float* z, const int* ldz, float* work, const int* lwork,
             int* iwork, const int* liwork, int* info);
void dsbevd_(const char* jobz, const char* uplo, const int* n, const int* kd, double* ab,
             const int* ldab, double* w, double* z, const int* ldz, double* work, const int* lwork,
             int* iwork, const int* liwork, int* info);
void chbevd_(const char* jobz, const char* uplo, const int* n, const int* kd,
             std::complex<float>* ab, const int* ldab, float* w, std::complex<float>* z,
             const int* ldz, std::complex<float>* work, const int* lwork, float* rwork,
             const int* lrwork, int* iwork, const int* liwork, int* info);
void zhbevd_(const char* jobz, const char* uplo, const int* n, const int* kd,
             std::complex<double>* ab, const int* ldab, double* w, std::complex<double>* z,
             const int* ldz, std::complex<double>* work, const int* lwork, double* rwork,
             const int* lrwork, int* iwork, const int* liwork, int* info);
}

namespace jaxmg::scalapack {
namespace {

// w (ascending) and, with vectors, z (n x n, leading dimension n) := the eigenvalues and
// eigenvectors of the Hermitian band ab (lower band storage, bandwidth kd, leading dimension
// ldab; overwritten); *info: LAPACK's (> 0: it did not converge).
template <typename T>
Status LocalBandEigh(bool vectors, int n, int kd, T* ab, int ldab, RealOf<T>* w, T* z, int* info) {
  using R = RealOf<T>;
  const char* jobz = vectors ? "V" : "N";
  const int ldz = std::max(n, 1);
  int lwork = -1, lrwork = -1, liwork = -1, iwsize = 0;
  T wsize(0);
  R rsize(0);
  auto call = [&](T* work, R* rwork, int* iwork) {
    if constexpr (std::is_same_v<T, float>) {
      ssbevd_(jobz, "L", &n, &kd, ab, &ldab, w, z, &ldz, work, &lwork, iwork, &liwork, info);
    } else if constexpr (std::is_same_v<T, double>) {
      dsbevd_(jobz, "L", &n, &kd, ab, &ldab, w, z, &ldz, work, &lwork, iwork, &liwork, info);
    } else if constexpr (std::is_same_v<T, std::complex<float>>) {
      chbevd_(jobz, "L", &n, &kd, ab, &ldab, w, z, &ldz, work, &lwork, rwork, &lrwork, iwork,
              &liwork, info);
    } else {
      zhbevd_(jobz, "L", &n, &kd, ab, &ldab, w, z, &ldz, work, &lwork, rwork, &lrwork, iwork,
              &liwork, info);
    }
  };
  call(&wsize, &rsize, &iwsize);  // the workspace query
  if (*info < 0) return JAXMG_ERROR("?sbevd/?hbevd: argument " + std::to_string(-*info));
  lwork = std::max(1, static_cast<int>(std::real(wsize)));
  lrwork = std::max(1, static_cast<int>(rsize));
  liwork = std::max(1, iwsize);
  std::vector<T> work;
  std::vector<R> rwork;
  std::vector<int> iwork;
  try {
    work.resize(static_cast<size_t>(lwork));
    rwork.resize(static_cast<size_t>(lrwork));
    iwork.resize(static_cast<size_t>(liwork));
  } catch (const std::bad_alloc&) {
    return JAXMG_ERROR("could not allocate the band eigensolver's workspace");
  }
  call(work.data(), rwork.data(), iwork.data());
  if (*info < 0) return JAXMG_ERROR("?sbevd/?hbevd: argument " + std::to_string(-*info));
  return Status();
}

}  // namespace

bool Engine::UseTwoStage(bool vectors) const {
  // The two stages need every row (1 x P) or every column (P x 1) on each process and a band
  // that divides the tile. JAXMG_CPU_EIGH=two-stage or =scalapack chooses; unset, the measured
  // one (bench/cpu_own.py --routine eigh|eigvalsh; bench/results/cpu_own_eig*): eigenvalues
  // alone by the two stages (1.06-1.69x p?syevd on 1 x 2 and 2 x 1 at N = 2048-3072, 0.82-1.06x
  // at 1024, 2.4-3.1x on 1 x 4), with eigenvectors p?syevd (the two stages 0.32-0.64x: LAPACK's
  // band eigensolver with vectors runs on process 0 alone).
  const char* choice = std::getenv("JAXMG_CPU_EIGH");
  const std::string c = choice != nullptr ? choice : "";
  const bool wanted = c == "two-stage" || (c.empty() && !vectors);
  const bool one_dimensional = grid_->nprow == 1 || grid_->npcol == 1;
  return wanted && one_dimensional && EigBand(plan_->tile) > 0;
}

int64_t Engine::EigBand(int64_t t) {
  const char* value = std::getenv("JAXMG_EIG_BAND");
  return algorithms::BandWidth(t, value != nullptr ? std::atoll(value) : 64);
}

template <typename T>
Status Engine::TwoStageEigh(bool vectors, RealOf<T>* w, int* info) {
  using R = RealOf<T>;
  const int64_t n = plan_->engine_rows(), t = plan_->tile;
  algorithms::BandShape s;
  s.by_rows = grid_->npcol == 1 && grid_->nprow > 1;  // P x 1: rows are distributed
  s.procs = s.by_rows ? grid_->nprow : grid_->npcol;
  s.me = s.by_rows ? grid_->myrow : grid_->mycol;
  s.n = n, s.t = t, s.lr = local_rows_, s.b = EigBand(t), s.rank = s.me;
  s.held = CyclicLocalExtent(n, t, s.me, s.procs);  // local columns (rows)
  backend_ = std::make_unique<Backend>(*grid_);
  Backend& bk = *backend_;
  algorithms::Banded<T> banded;
  JAXMG_RETURN_IF_ERROR(algorithms::BandReduce<T>(bk, s, As<T>(work_), &banded));

  // The back-transformation's buffers (agreed), then the band's eigenproblem on rank 0.
  const int64_t cols = std::max<int64_t>(s.held, 1);
  T* z = nullptr;
  algorithms::BackReduceWork<T> work;
  Backend::Lane lane;
  Deferred local;
  if (vectors) {
    for (auto [p, count] : {std::pair<T**, int64_t>{&z, n * cols},
                            {&work.vw, n * t},
                            {&work.f, t * t},
                            {&work.qs, t * t},
                            {&work.vt, s.by_rows ? n * s.b : 0},
                            {&work.products.w, t * cols},
                            {&work.products.w2, t * cols}}) {
      if (count > 0) local.Run([&] { return bk.Buffer(count, p); });
    }
    work.products.s = work.qs;
  }
  JAXMG_RETURN_IF_ERROR(bk.Agree("buffers", local.status()));
  Deferred failed;
  std::vector<R> values(static_cast<size_t>(n), std::numeric_limits<R>::quiet_NaN());
  std::vector<T> whole;  // rank 0: the band's eigenvectors, n x n
  int64_t solved = 0;
  failed.Step("band_eigh", s.rank, 1);
  if (s.me == 0) {
    failed.Run([&]() -> Status {
      int ni = 0, kd = 0, ldab = 0, lapack_info = 0;
      JAXMG_RETURN_IF_ERROR(CheckedInt(n, "the matrix's order", &ni));
      JAXMG_RETURN_IF_ERROR(CheckedInt(s.b, "the band", &kd));
      JAXMG_RETURN_IF_ERROR(CheckedInt(2 * s.b + 1, "the band storage", &ldab));
      try {
        whole.resize(vectors ? static_cast<size_t>(n) * static_cast<size_t>(n) : 1);
      } catch (const std::bad_alloc&) {
        return JAXMG_ERROR("could not allocate the band's eigenvectors on process 0 (" +
                           std::to_string(n) + " x " + std::to_string(n) + ")");
      }
      JAXMG_RETURN_IF_ERROR(LocalBandEigh<T>(vectors, ni, kd, banded.band, ldab, values.data(),
                                             whole.data(), &lapack_info));
      solved = lapack_info;
      return Status();
    });
  }
  JAXMG_RETURN_IF_ERROR(bk.Agree("band_eigh", failed.status()));
  JAXMG_RETURN_IF_ERROR(bk.Broadcast(values.data(), n, &solved, 1, 0));
  std::copy(values.begin(), values.end(), w);
  *info = static_cast<int>(std::min<int64_t>(solved, INT32_MAX));
  if (!vectors) return Status();

  // Each rank's columns of Z from rank 0 (one scatter, a column of n scalars the unit), then
  // Z := Q₁ Z on them.
  JAXMG_RETURN_IF_ERROR(ScatterColumns<T>(s, whole.data(), z));
  whole = std::vector<T>();
  failed.Run([&] { return bk.MainLane(&lane); });
  JAXMG_RETURN_IF_ERROR(algorithms::BandBackReduce<T>(bk, lane, s, As<T>(work_), banded.taus, t, z,
                                                      n, work, &failed));
  JAXMG_RETURN_IF_ERROR(bk.Agree("band_eigh", failed.status()));

  // The eigenvectors in the engine's layout (local_b_, distributed as the matrix): this rank's
  // columns of Z (1 x P), or on a P x 1 grid Z's rows: the rows of Zᴴ this rank holds are its
  // columns of Z, and one distributed transpose gives Z.
  T* out = As<T>(local_b_.data());
  if (!s.by_rows) {
    std::copy_n(z, n * s.held, out);
    return Status();
  }
  T* m = As<T>(work_);  // (the reduced matrix: no longer needed)
  for (int64_t i = 0; i < s.held; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const T v = z[j + i * n];
      if constexpr (Scalar<T>::kParts == 2) {
        m[i + j * local_rows_] = std::conj(v);
      } else {
        m[i + j * local_rows_] = v;
      }
    }
  }
  return scalapack::Adjoint<T>(n, m, desc_a_, out, desc_b_);
}

template <typename T>
Status Engine::ScatterColumns(const algorithms::BandShape& s, const T* whole, T* z) {
  const int64_t n = s.n, t = s.t;
  const int size = static_cast<int>(grid_->comm_ranks.size());
  int me = 0;
  JAXMG_RETURN_IF_ERROR(MpiCheck(MPI_Comm_rank(grid_->comm, &me), "MPI_Comm_rank"));
  const int root = grid_->comm_ranks[0];
  MPI_Datatype column = MPI_DATATYPE_NULL;
  JAXMG_RETURN_IF_ERROR(MpiCheck(
      MPI_Type_contiguous(static_cast<int>(n * Scalar<T>::kParts), RealMpiType<T>(), &column),
      "MPI_Type_contiguous"));
  JAXMG_RETURN_IF_ERROR(MpiCheck(MPI_Type_commit(&column), "MPI_Type_commit"));
  // Grid position q (its comm rank comm_ranks[q]) holds the columns g with (g / t) mod P = q.
  std::vector<int> counts(static_cast<size_t>(size), 0), displs(static_cast<size_t>(size), 0);
  std::vector<T> packed;
  Status packing;
  if (me == root) {
    int64_t at = 0;
    try {
      packed.resize(static_cast<size_t>(std::max<int64_t>(n * n, 1)));
    } catch (const std::bad_alloc&) {
      packing = JAXMG_ERROR("could not allocate the scatter of the eigenvectors on process 0");
    }
    std::vector<int64_t> start(static_cast<size_t>(size), 0);
    for (int q = 0; q < s.procs && packing.ok(); ++q) {
      const int r = grid_->comm_ranks[static_cast<size_t>(q)];
      const int64_t held = CyclicLocalExtent(n, t, q, s.procs);
      counts[r] = static_cast<int>(held);
      start[r] = at;
      for (int64_t l = 0; l < held; ++l, ++at) {
        const int64_t g = CyclicGlobal(l, t, s.procs, q);
        std::copy_n(whole + g * n, n, packed.data() + at * n);
      }
    }
    for (int r = 0; r < size; ++r) displs[r] = static_cast<int>(start[r]);
  }
  Status agreed = AgreeOnFailure(*grid_, "band_eigh", packing);  // before the scatter
  if (agreed.ok()) {
    agreed = MpiCheck(MPI_Scatterv(packed.data(), counts.data(), displs.data(), column, z,
                                   static_cast<int>(s.held), column, root, grid_->comm),
                      "MPI_Scatterv");
  }
  MPI_Type_free(&column);
  return agreed;
}

#define JAXMG_INSTANTIATE_TWO_STAGE(T)                                            \
  template Status Engine::TwoStageEigh<T>(bool vectors, RealOf<T>* w, int* info); \
  template Status Engine::ScatterColumns<T>(const algorithms::BandShape& s, const T* whole, T* z);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_TWO_STAGE)
#undef JAXMG_INSTANTIATE_TWO_STAGE

}  // namespace jaxmg::scalapack
