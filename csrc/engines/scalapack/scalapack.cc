#include "engines/scalapack/scalapack.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>

#include "common/deferred.h"
#include "common/environment.h"
#include "common/scalar.h"

extern "C" {
int Csys2blacs_handle(MPI_Comm comm);
void Cblacs_gridmap(int* context, int* usermap, int ldumap, int nprow, int npcol);
void Cblacs_gridinfo(int context, int* nprow, int* npcol, int* myrow, int* mycol);
void descinit_(int* desc, const int* m, const int* n, const int* mb, const int* nb,
               const int* irsrc, const int* icsrc, const int* ictxt, const int* lld, int* info);

#define JAXMG_DECLARE_POTRF(p, T)                                                                  \
  void p##potrf_(const char* uplo, const int* n, T* a, const int* ia, const int* ja,               \
                 const int* desca, int* info);                                                     \
  void p##potrs_(const char* uplo, const int* n, const int* nrhs, const T* a, const int* ia,       \
                 const int* ja, const int* desca, T* b, const int* ib, const int* jb,              \
                 const int* descb, int* info);                                                     \
  void p##getrf_(const int* m, const int* n, T* a, const int* ia, const int* ja, const int* desca, \
                 int* ipiv, int* info);                                                            \
  void p##getrs_(const char* trans, const int* n, const int* nrhs, const T* a, const int* ia,      \
                 const int* ja, const int* desca, const int* ipiv, T* b, const int* ib,            \
                 const int* jb, const int* descb, int* info);                                      \
  void p##getri_(const int* n, T* a, const int* ia, const int* ja, const int* desca,               \
                 const int* ipiv, T* work, const int* lwork, int* iwork, const int* liwork,        \
                 int* info);                                                                       \
  void p##gemr2d_(const int* m, const int* n, const T* a, const int* ia, const int* ja,            \
                  const int* desca, T* b, const int* ib, const int* jb, const int* descb,          \
                  const int* ictxt);
JAXMG_DECLARE_POTRF(ps, float)
JAXMG_DECLARE_POTRF(pd, double)
JAXMG_DECLARE_POTRF(pc, std::complex<float>)
JAXMG_DECLARE_POTRF(pz, std::complex<double>)
#undef JAXMG_DECLARE_POTRF

// QR: p?orgqr is p?ungqr for the complex types.
#define JAXMG_DECLARE_QR(p, T, gqr)                                                                \
  void p##geqrf_(const int* m, const int* n, T* a, const int* ia, const int* ja, const int* desca, \
                 T* tau, T* work, const int* lwork, int* info);                                    \
  void p##gqr##_(const int* m, const int* n, const int* k, T* a, const int* ia, const int* ja,     \
                 const int* desca, const T* tau, T* work, const int* lwork, int* info);            \
  void p##gels_(const char* trans, const int* m, const int* n, const int* nrhs, T* a,              \
                const int* ia, const int* ja, const int* desca, T* b, const int* ib,               \
                const int* jb, const int* descb, T* work, const int* lwork, int* info);
// Hermitian eigenproblems: p?syevd / p?syev (real), p?heevd / p?heev (complex, with rwork); the
// transposes p?tran (real) and p?tranc (complex, conjugated).
#define JAXMG_DECLARE_EIG_REAL(p, T)                                                         \
  void p##syevd_(const char* jobz, const char* uplo, const int* n, T* a, const int* ia,      \
                 const int* ja, const int* desca, T* w, T* z, const int* iz, const int* jz,  \
                 const int* descz, T* work, const int* lwork, int* iwork, const int* liwork, \
                 int* info);                                                                 \
  void p##syev_(const char* jobz, const char* uplo, const int* n, T* a, const int* ia,       \
                const int* ja, const int* desca, T* w, T* z, const int* iz, const int* jz,   \
                const int* descz, T* work, const int* lwork, int* info);                     \
  void p##tran_(const int* m, const int* n, const T* alpha, const T* a, const int* ia,       \
                const int* ja, const int* desca, const T* beta, T* c, const int* ic,         \
                const int* jc, const int* descc);
#define JAXMG_DECLARE_EIG_COMPLEX(p, T, R)                                                  \
  void p##heevd_(const char* jobz, const char* uplo, const int* n, T* a, const int* ia,     \
                 const int* ja, const int* desca, R* w, T* z, const int* iz, const int* jz, \
                 const int* descz, T* work, const int* lwork, R* rwork, const int* lrwork,  \
                 int* iwork, const int* liwork, int* info);                                 \
  void p##heev_(const char* jobz, const char* uplo, const int* n, T* a, const int* ia,      \
                const int* ja, const int* desca, R* w, T* z, const int* iz, const int* jz,  \
                const int* descz, T* work, const int* lwork, R* rwork, const int* lrwork,   \
                int* info);                                                                 \
  void p##tranc_(const int* m, const int* n, const T* alpha, const T* a, const int* ia,     \
                 const int* ja, const int* desca, const T* beta, T* c, const int* ic,       \
                 const int* jc, const int* descc);
JAXMG_DECLARE_EIG_REAL(ps, float)
JAXMG_DECLARE_EIG_REAL(pd, double)
JAXMG_DECLARE_EIG_COMPLEX(pc, std::complex<float>, float)
JAXMG_DECLARE_EIG_COMPLEX(pz, std::complex<double>, double)
#undef JAXMG_DECLARE_EIG_REAL
#undef JAXMG_DECLARE_EIG_COMPLEX

JAXMG_DECLARE_QR(ps, float, orgqr)
JAXMG_DECLARE_QR(pd, double, orgqr)
JAXMG_DECLARE_QR(pc, std::complex<float>, ungqr)
JAXMG_DECLARE_QR(pz, std::complex<double>, ungqr)
#undef JAXMG_DECLARE_QR

// SVD (p?gesvd; the complex ones take rwork) and the PBLAS product p?gemm.
#define JAXMG_DECLARE_SVD(p, T, R, ...)                                                           \
  void p##gesvd_(const char* jobu, const char* jobvt, const int* m, const int* n, T* a,           \
                 const int* ia, const int* ja, const int* desca, R* s, T* u, const int* iu,       \
                 const int* ju, const int* descu, T* vt, const int* ivt, const int* jvt,          \
                 const int* descvt, T* work, const int* lwork, __VA_ARGS__ int* info);            \
  void p##gemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, \
                const T* alpha, const T* a, const int* ia, const int* ja, const int* desca,       \
                const T* b, const int* ib, const int* jb, const int* descb, const T* beta, T* c,  \
                const int* ic, const int* jc, const int* descc);
JAXMG_DECLARE_SVD(ps, float, float)
JAXMG_DECLARE_SVD(pd, double, double)
JAXMG_DECLARE_SVD(pc, std::complex<float>, float, float* rwork, )
JAXMG_DECLARE_SVD(pz, std::complex<double>, double, double* rwork, )
#undef JAXMG_DECLARE_SVD
// The generalized-problem reduction (p?sygst real, p?hegst complex) and p?trsm.
#define JAXMG_DECLARE_GST(p, T, R, gst)                                                     \
  void p##gst##_(const int* ibtype, const char* uplo, const int* n, T* a, const int* ia,    \
                 const int* ja, const int* desca, const T* b, const int* ib, const int* jb, \
                 const int* descb, R* scale, int* info);                                    \
  void p##trsm_(const char* side, const char* uplo, const char* transa, const char* diag,   \
                const int* m, const int* n, const T* alpha, const T* a, const int* ia,      \
                const int* ja, const int* desca, T* b, const int* ib, const int* jb,        \
                const int* descb);
JAXMG_DECLARE_GST(ps, float, float, sygst)
JAXMG_DECLARE_GST(pd, double, double, sygst)
JAXMG_DECLARE_GST(pc, std::complex<float>, float, hegst)
JAXMG_DECLARE_GST(pz, std::complex<double>, double, hegst)
#undef JAXMG_DECLARE_GST
}

namespace jaxmg::scalapack {
namespace {

bool g_initialized_here = false;
MPI_Comm g_agree_comm = MPI_COMM_NULL;        // a duplicate of MPI_COMM_WORLD for call agreement
std::string g_poisoned;                       // set when a call timed out: every later call refuses
std::map<std::vector<int>, int64_t> g_calls;  // calls so far per set of members
std::mutex g_engine_mutex;

struct GridKey {
  std::vector<int> ranks;
  int nprow, npcol;
  bool operator<(const GridKey& o) const {
    return std::tie(ranks, nprow, npcol) < std::tie(o.ranks, o.nprow, o.npcol);
  }
};
std::map<GridKey, std::unique_ptr<Grid>>& GridCache() {
  static auto* cache = new std::map<GridKey, std::unique_ptr<Grid>>();
  return *cache;
}
std::map<std::vector<int>, MPI_Comm>& CommCache() {
  static auto* cache = new std::map<std::vector<int>, MPI_Comm>();
  return *cache;
}

// A communicator holding exactly `members` (world ranks, sorted), created collectively by them.
Status GetComm(const std::vector<int>& members, MPI_Comm* out) {
  auto& cache = CommCache();
  auto it = cache.find(members);
  if (it != cache.end()) {
    *out = it->second;
    return Status();
  }
  MPI_Group world_group, group;
  JAXMG_RETURN_IF_ERROR(MpiCheck(MPI_Comm_group(MPI_COMM_WORLD, &world_group), "MPI_Comm_group"));
  JAXMG_RETURN_IF_ERROR(MpiCheck(
      MPI_Group_incl(world_group, static_cast<int>(members.size()), members.data(), &group),
      "MPI_Group_incl"));
  MPI_Comm comm;
  JAXMG_RETURN_IF_ERROR(MpiCheck(MPI_Comm_create_group(MPI_COMM_WORLD, group, /*tag=*/7411, &comm),
                                 "MPI_Comm_create_group"));
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  cache[members] = comm;
  *out = comm;
  return Status();
}

}  // namespace

Status MpiCheck(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Status();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status::Error(std::string(what) + " failed: " + std::string(text, len));
}

Status EnsureMpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    JAXMG_RETURN_IF_ERROR(MpiCheck(
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread"));
    g_initialized_here = true;
    if (provided < MPI_THREAD_SERIALIZED) {
      return JAXMG_ERROR("the MPI library does not provide MPI_THREAD_SERIALIZED");
    }
  }
  // MPI errors come back as return codes (then Python errors), not as a job abort; communicators
  // made from MPI_COMM_WORLD inherit the handler.
  JAXMG_RETURN_IF_ERROR(MpiCheck(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
                                 "MPI_Comm_set_errhandler"));
  if (g_agree_comm == MPI_COMM_NULL) {
    JAXMG_RETURN_IF_ERROR(MpiCheck(MPI_Comm_dup(MPI_COMM_WORLD, &g_agree_comm), "MPI_Comm_dup"));
  }
  return Status();
}

namespace {

// Waits for `requests` until all complete or `deadline`; on time-out cancels what is pending.
bool WaitAll(std::vector<MPI_Request>& requests, std::chrono::steady_clock::time_point deadline) {
  while (true) {
    int done = 0;
    MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    if (done) return true;
    if (std::chrono::steady_clock::now() > deadline) {
      for (MPI_Request& r : requests) {
        if (r != MPI_REQUEST_NULL) {
          MPI_Cancel(&r);
          MPI_Request_free(&r);
        }
      }
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

constexpr int kFingerprintTag = 7412, kVerdictTag = 7413;

}  // namespace

Status AgreeOnCall(const std::vector<int>& members, const std::vector<int64_t>& values,
                   const std::vector<const char*>& names) {
  if (!g_poisoned.empty()) return Status::Error(g_poisoned);
  const int64_t call = g_calls[members]++;
  if (members.size() <= 1) return Status();
  const double timeout = CallTimeoutSeconds();
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(static_cast<int64_t>(timeout * 1e6));
  std::vector<int64_t> mine{call};
  mine.insert(mine.end(), values.begin(), values.end());
  const int count = static_cast<int>(mine.size());
  const int hub = members[0], me = WorldRank();
  // Verdict: [0] 0 = agreed, 1 = a field differs, 2 = a member did not come; [1] field index;
  // [2] the differing member; [3], [4] the hub's and that member's values.
  std::vector<int64_t> verdict(5, 0);
  auto timed_out = [&](const std::string& who) {
    g_poisoned = "jaxmg: " + who + " did not join a jaxmg call within JAXMG_CALL_TIMEOUT = " +
                 std::to_string(static_cast<int64_t>(timeout)) +
                 " s (a process may have raised an error before the call, taken another branch, "
                 "or died); the processes can no longer pair their calls: restart the job";
    return Status::Error(g_poisoned);
  };
  if (me == hub) {
    const size_t others = members.size() - 1;
    std::vector<int64_t> theirs(others * count);
    std::vector<MPI_Request> recvs(others, MPI_REQUEST_NULL);
    for (size_t i = 0; i < others; ++i) {
      JAXMG_RETURN_IF_ERROR(
          MpiCheck(MPI_Irecv(theirs.data() + i * count, count, MPI_INT64_T, members[i + 1],
                             kFingerprintTag, g_agree_comm, &recvs[i]),
                   "MPI_Irecv"));
    }
    const bool all = WaitAll(recvs, deadline);
    if (!all) {
      verdict[0] = 2;
    } else {
      for (size_t i = 0; i < others && verdict[0] == 0; ++i) {
        for (int f = 0; f < count; ++f) {
          if (theirs[i * count + f] != mine[f]) {
            verdict = {1, f, members[i + 1], mine[f], theirs[i * count + f]};
            break;
          }
        }
      }
    }
    // Every member that came hears the verdict (one that did not is not waited for).
    std::vector<MPI_Request> sends(others, MPI_REQUEST_NULL);
    for (size_t i = 0; i < others; ++i) {
      JAXMG_RETURN_IF_ERROR(MpiCheck(MPI_Isend(verdict.data(), 5, MPI_INT64_T, members[i + 1],
                                               kVerdictTag, g_agree_comm, &sends[i]),
                                     "MPI_Isend"));
    }
    if (!WaitAll(sends, deadline + std::chrono::seconds(1)) && verdict[0] == 0) {
      return timed_out("a process of this mesh");
    }
  } else {
    std::vector<MPI_Request> reqs(2, MPI_REQUEST_NULL);
    JAXMG_RETURN_IF_ERROR(MpiCheck(
        MPI_Isend(mine.data(), count, MPI_INT64_T, hub, kFingerprintTag, g_agree_comm, &reqs[0]),
        "MPI_Isend"));
    JAXMG_RETURN_IF_ERROR(MpiCheck(
        MPI_Irecv(verdict.data(), 5, MPI_INT64_T, hub, kVerdictTag, g_agree_comm, &reqs[1]),
        "MPI_Irecv"));
    if (!WaitAll(reqs, deadline + std::chrono::seconds(2))) {
      return timed_out("process " + std::to_string(hub) + " (the first of this mesh)");
    }
  }
  if (verdict[0] == 2) return timed_out("a process of this mesh");
  if (verdict[0] == 1) {
    const int f = static_cast<int>(verdict[1]);
    const std::string field = f == 0 ? "call number" : names[f - 1];
    const std::string values =
        field == "routine"
            ? "they call different routines"
            : "process " + std::to_string(hub) + ": " + std::to_string(verdict[3]) + ", process " +
                  std::to_string(verdict[2]) + ": " + std::to_string(verdict[4]);
    return Status::Error("jaxmg: the processes of this mesh disagree on the " + field +
                         " of this call (" + values +
                         "); every process must make the same jaxmg calls, in the same order, "
                         "with the same arguments");
  }
  return Status();
}

void FinalizeMpi() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized || !g_initialized_here) return;
  std::lock_guard<std::mutex> lock(g_engine_mutex);
  // BLACS contexts (GridCache) are released with MPI; only our communicators are freed here.
  if (g_agree_comm != MPI_COMM_NULL) MPI_Comm_free(&g_agree_comm);
  for (auto& [members, comm] : CommCache()) {
    (void)members;
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
  CommCache().clear();
  MPI_Finalize();
}

int WorldRank() {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int WorldSize() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

std::unique_lock<std::mutex> EngineLock() { return std::unique_lock<std::mutex>(g_engine_mutex); }

Status GatherMeshRanks(int my_position, int positions, std::vector<int>* ranks) {
  if (WorldSize() != positions) {
    return JAXMG_ERROR("the mesh has " + std::to_string(positions) + " devices but the job has " +
                       std::to_string(WorldSize()) + " processes; pass the concrete mesh");
  }
  std::vector<int> position_of_rank(positions);
  JAXMG_RETURN_IF_ERROR(MpiCheck(
      MPI_Allgather(&my_position, 1, MPI_INT, position_of_rank.data(), 1, MPI_INT, MPI_COMM_WORLD),
      "MPI_Allgather"));
  ranks->assign(positions, -1);
  for (int r = 0; r < positions; ++r) {
    const int p = position_of_rank[r];
    if (p < 0 || p >= positions || (*ranks)[p] != -1) {
      return JAXMG_ERROR("mesh positions are not one per process");
    }
    (*ranks)[p] = r;
  }
  return Status();
}

Status GetGrid(const std::vector<int>& world_ranks, int nprow, int npcol, const Grid** grid) {
  GridKey key{world_ranks, nprow, npcol};
  auto& cache = GridCache();
  auto it = cache.find(key);
  if (it != cache.end()) {
    *grid = it->second.get();
    return Status();
  }
  if (static_cast<int64_t>(world_ranks.size()) != static_cast<int64_t>(nprow) * npcol) {
    return JAXMG_ERROR("grid map has " + std::to_string(world_ranks.size()) + " ranks for a " +
                       std::to_string(nprow) + "x" + std::to_string(npcol) + " grid");
  }
  std::vector<int> members = world_ranks;
  std::sort(members.begin(), members.end());
  if (std::adjacent_find(members.begin(), members.end()) != members.end()) {
    return JAXMG_ERROR(
        "the CPU engine needs one device per process; a process appears twice "
        "in the mesh");
  }
  const int me = WorldRank();
  if (!std::binary_search(members.begin(), members.end(), me)) {
    return JAXMG_ERROR("process " + std::to_string(me) + " is not part of this mesh");
  }
  auto g = std::make_unique<Grid>();
  JAXMG_RETURN_IF_ERROR(GetComm(members, &g->comm));
  // BLACS usermap is column-major (ldumap = nprow) and holds ranks within g->comm.
  std::vector<int> usermap(world_ranks.size());
  for (int i = 0; i < nprow; ++i) {
    for (int j = 0; j < npcol; ++j) {
      const int world = world_ranks[i * npcol + j];
      usermap[i + j * nprow] = static_cast<int>(
          std::lower_bound(members.begin(), members.end(), world) - members.begin());
    }
  }
  g->comm_ranks.assign(world_ranks.size(), 0);
  for (int i = 0; i < nprow; ++i) {
    for (int j = 0; j < npcol; ++j) g->comm_ranks[i * npcol + j] = usermap[i + j * nprow];
  }
  g->context = Csys2blacs_handle(g->comm);
  Cblacs_gridmap(&g->context, usermap.data(), nprow, nprow, npcol);
  int pr, pc;
  Cblacs_gridinfo(g->context, &pr, &pc, &g->myrow, &g->mycol);
  if (pr != nprow || pc != npcol || g->myrow < 0 || g->mycol < 0) {
    return JAXMG_ERROR("BLACS grid creation failed");
  }
  g->nprow = nprow;
  g->npcol = npcol;
  *grid = g.get();
  cache.emplace(std::move(key), std::move(g));
  return Status();
}

Status MakeDescriptor(const Grid& grid, int64_t m, int64_t n, int64_t mb, int64_t nb, int64_t lld,
                      Descriptor* out) {
  int im, in, imb, inb, illd, zero = 0, info = 0;
  JAXMG_RETURN_IF_ERROR(CheckedInt(m, "rows", &im));
  JAXMG_RETURN_IF_ERROR(CheckedInt(n, "columns", &in));
  JAXMG_RETURN_IF_ERROR(CheckedInt(mb, "row block", &imb));
  JAXMG_RETURN_IF_ERROR(CheckedInt(nb, "column block", &inb));
  JAXMG_RETURN_IF_ERROR(CheckedInt(std::max<int64_t>(lld, 1), "local leading dimension", &illd));
  descinit_(out->desc, &im, &in, &imb, &inb, &zero, &zero, &grid.context, &illd, &info);
  if (info != 0) return JAXMG_ERROR("descinit failed with info " + std::to_string(info));
  return Status();
}

#define JAXMG_DEFINE_ROUTINES(p, T)                                                                \
  template <>                                                                                      \
  Status Potrf<T>(int64_t n, T* a, const Descriptor& desc, int* info) {                            \
    int in, one = 1;                                                                               \
    JAXMG_RETURN_IF_ERROR(CheckedInt(n, "order", &in));                                            \
    p##potrf_("L", &in, a, &one, &one, desc.desc, info);                                           \
    if (*info < 0) return JAXMG_ERROR(#p "potrf: illegal argument " + std::to_string(-*info));     \
    return Status();                                                                               \
  }                                                                                                \
  template <>                                                                                      \
  Status Potrs<T>(int64_t n, int64_t nrhs, const T* a, const Descriptor& desc_a, T* b,             \
                  const Descriptor& desc_b, int* info) {                                           \
    int in, ir, one = 1;                                                                           \
    JAXMG_RETURN_IF_ERROR(CheckedInt(n, "order", &in));                                            \
    JAXMG_RETURN_IF_ERROR(CheckedInt(nrhs, "right-hand sides", &ir));                              \
    p##potrs_("L", &in, &ir, a, &one, &one, desc_a.desc, b, &one, &one, desc_b.desc, info);        \
    if (*info < 0) return JAXMG_ERROR(#p "potrs: illegal argument " + std::to_string(-*info));     \
    return Status();                                                                               \
  }                                                                                                \
  template <>                                                                                      \
  Status Getrf<T>(int64_t n, T* a, const Descriptor& desc, int* ipiv, int* info) {                 \
    int in, one = 1;                                                                               \
    JAXMG_RETURN_IF_ERROR(CheckedInt(n, "order", &in));                                            \
    p##getrf_(&in, &in, a, &one, &one, desc.desc, ipiv, info);                                     \
    if (*info < 0) return JAXMG_ERROR(#p "getrf: illegal argument " + std::to_string(-*info));     \
    return Status();                                                                               \
  }                                                                                                \
  template <>                                                                                      \
  Status Getrs<T>(char trans, int64_t n, int64_t nrhs, const T* a, const Descriptor& desc_a,       \
                  const int* ipiv, T* b, const Descriptor& desc_b, int* info) {                    \
    int in, ir, one = 1;                                                                           \
    JAXMG_RETURN_IF_ERROR(CheckedInt(n, "order", &in));                                            \
    JAXMG_RETURN_IF_ERROR(CheckedInt(nrhs, "right-hand sides", &ir));                              \
    p##getrs_(&trans, &in, &ir, a, &one, &one, desc_a.desc, ipiv, b, &one, &one, desc_b.desc,      \
              info);                                                                               \
    if (*info < 0) return JAXMG_ERROR(#p "getrs: illegal argument " + std::to_string(-*info));     \
    return Status();                                                                               \
  }                                                                                                \
  template <>                                                                                      \
  Status Getri<T>(int64_t n, int64_t local_rows, int64_t local_cols, T* a, const Descriptor& desc, \
                  const int* ipiv, int* info) {                                                    \
    int in, one = 1, lwork = -1, liwork = -1, iquery = 0;                                          \
    JAXMG_RETURN_IF_ERROR(CheckedInt(n, "order", &in));                                            \
    T query(0);                                                                                    \
    p##getri_(&in, a, &one, &one, desc.desc, ipiv, &query, &lwork, &iquery, &liwork, info);        \
    if (*info < 0) return JAXMG_ERROR(#p "getri: illegal argument " + std::to_string(-*info));     \
    /* At least the documented bounds: LOCr(N) NB, and LOCc(N) + max(LOCr(N) / MB + 1, NB). */     \
    const int64_t nb = desc.desc[5];                                                               \
    const int64_t lw =                                                                             \
        std::max<int64_t>(static_cast<int64_t>(std::abs(query)) + 1, (local_rows + nb) * nb);      \
    const int64_t liw = std::max<int64_t>(iquery, local_cols + local_rows + 2 * nb);               \
    JAXMG_RETURN_IF_ERROR(CheckedInt(lw, "workspace", &lwork));                                    \
    JAXMG_RETURN_IF_ERROR(CheckedInt(liw, "integer workspace", &liwork));                          \
    std::vector<T> work(static_cast<size_t>(lwork));                                               \
    std::vector<int> iwork(static_cast<size_t>(liwork));                                           \
    p##getri_(&in, a, &one, &one, desc.desc, ipiv, work.data(), &lwork, iwork.data(), &liwork,     \
              info);                                                                               \
    if (*info < 0) return JAXMG_ERROR(#p "getri: illegal argument " + std::to_string(-*info));     \
    return Status();                                                                               \
  }                                                                                                \
  template <>                                                                                      \
  Status Gemr2d<T>(int64_t m, int64_t n, const T* a, const Descriptor& desc_a, T* b,               \
                   const Descriptor& desc_b, const Grid& grid) {                                   \
    int im, in, one = 1;                                                                           \
    JAXMG_RETURN_IF_ERROR(CheckedInt(m, "rows", &im));                                             \
    JAXMG_RETURN_IF_ERROR(CheckedInt(n, "columns", &in));                                          \
    p##gemr2d_(&im, &in, a, &one, &one, desc_a.desc, b, &one, &one, desc_b.desc, &grid.context);   \
    return Status();                                                                               \
  }
JAXMG_DEFINE_ROUTINES(ps, float)
JAXMG_DEFINE_ROUTINES(pd, double)
JAXMG_DEFINE_ROUTINES(pc, std::complex<float>)
JAXMG_DEFINE_ROUTINES(pz, std::complex<double>)
#undef JAXMG_DEFINE_ROUTINES

#define JAXMG_DEFINE_QR(p, T, gqr)                                                                 \
  template <>                                                                                      \
  Status Geqrf<T>(int64_t m, int64_t n, T* a, const Descriptor& desc, T* tau, int* info) {         \
    int im, in, one = 1, lwork = -1;                                                               \
    JAXMG_RETURN_IF_ERROR(CheckedInt(m, "rows", &im));                                             \
    JAXMG_RETURN_IF_ERROR(CheckedInt(n, "columns", &in));                                          \
    T query(0);                                                                                    \
    std::vector<T> work;                                                                           \
    p##geqrf_(&im, &in, a, &one, &one, desc.desc, tau, &query, &lwork, info);                      \
    if (*info == 0) JAXMG_RETURN_IF_ERROR(QueriedWork(query, &work, &lwork));                      \
    if (*info == 0) p##geqrf_(&im, &in, a, &one, &one, desc.desc, tau, work.data(), &lwork, info); \
    if (*info < 0) return JAXMG_ERROR(#p "geqrf: illegal argument " + std::to_string(-*info));     \
    return Status();                                                                               \
  }                                                                                                \
  template <>                                                                                      \
  Status Orgqr<T>(int64_t m, int64_t n, T* a, const Descriptor& desc, const T* tau, int* info) {   \
    int im, in, one = 1, lwork = -1;                                                               \
    JAXMG_RETURN_IF_ERROR(CheckedInt(m, "rows", &im));                                             \
    JAXMG_RETURN_IF_ERROR(CheckedInt(n, "columns", &in));                                          \
    T query(0);                                                                                    \
    std::vector<T> work;                                                                           \
    p##gqr##_(&im, &in, &in, a, &one, &one, desc.desc, tau, &query, &lwork, info);                 \
    if (*info == 0) JAXMG_RETURN_IF_ERROR(QueriedWork(query, &work, &lwork));                      \
    if (*info == 0) {                                                                              \
      p##gqr##_(&im, &in, &in, a, &one, &one, desc.desc, tau, work.data(), &lwork, info);          \
    }                                                                                              \
    if (*info < 0) return JAXMG_ERROR(#p #gqr ": illegal argument " + std::to_string(-*info));     \
    return Status();                                                                               \
  }                                                                                                \
  template <>                                                                                      \
  Status Gels<T>(int64_t m, int64_t n, int64_t nrhs, T* a, const Descriptor& desc_a, T* b,         \
                 const Descriptor& desc_b, int* info) {                                            \
    int im, in, ir, one = 1, lwork = -1;                                                           \
    JAXMG_RETURN_IF_ERROR(CheckedInt(m, "rows", &im));                                             \
    JAXMG_RETURN_IF_ERROR(CheckedInt(n, "columns", &in));                                          \
    JAXMG_RETURN_IF_ERROR(CheckedInt(nrhs, "right-hand sides", &ir));                              \
    T query(0);                                                                                    \
    std::vector<T> work;                                                                           \
    p##gels_("N", &im, &in, &ir, a, &one, &one, desc_a.desc, b, &one, &one, desc_b.desc, &query,   \
             &lwork, info);                                                                        \
    if (*info == 0) JAXMG_RETURN_IF_ERROR(QueriedWork(query, &work, &lwork));                      \
    if (*info == 0) {                                                                              \
      p##gels_("N", &im, &in, &ir, a, &one, &one, desc_a.desc, b, &one, &one, desc_b.desc,         \
               work.data(), &lwork, info);                                                         \
    }                                                                                              \
    if (*info < 0) return JAXMG_ERROR(#p "gels: illegal argument " + std::to_string(-*info));      \
    return Status();                                                                               \
  }
#define JAXMG_DEFINE_EIG_REAL(p, T)                                                                \
  template <>                                                                                      \
  Status Eigh<T>(bool vectors, int64_t n, int64_t local_rows, int64_t local_cols, T* a,            \
                 const Descriptor& desc, RealOf<T>* w, T* z, const Descriptor& descz, int* info) { \
    int in, one = 1, lwork = -1, liwork = -1, iquery = 0;                                          \
    JAXMG_RETURN_IF_ERROR(CheckedInt(n, "order", &in));                                            \
    T query(0);                                                                                    \
    std::vector<T> work;                                                                           \
    if (vectors) {                                                                                 \
      p##syevd_("V", "L", &in, a, &one, &one, desc.desc, w, z, &one, &one, descz.desc, &query,     \
                &lwork, &iquery, &liwork, info);                                                   \
      /* The documented minimum when the query answers less (it does for some tiles). */           \
      const int64_t nb = desc.desc[5], np = local_rows + nb, nq = local_cols + nb;                 \
      const int64_t floor =                                                                        \
          std::max(1 + 6 * n + 2 * np * nq, 3 * n + std::max(nb * (np + 1), 3 * nb)) + 2 * n;      \
      query = std::max(query, static_cast<T>(floor));                                              \
      if (*info == 0) JAXMG_RETURN_IF_ERROR(QueriedWork(query, &work, &lwork));                    \
      liwork = std::max(iquery, 1);                                                                \
      std::vector<int> iwork(static_cast<size_t>(liwork));                                         \
      if (*info == 0) {                                                                            \
        p##syevd_("V", "L", &in, a, &one, &one, desc.desc, w, z, &one, &one, descz.desc,           \
                  work.data(), &lwork, iwork.data(), &liwork, info);                               \
      }                                                                                            \
    } else {                                                                                       \
      p##syev_("N", "L", &in, a, &one, &one, desc.desc, w, z, &one, &one, descz.desc, &query,      \
               &lwork, info);                                                                      \
      if (*info == 0) JAXMG_RETURN_IF_ERROR(QueriedWork(query, &work, &lwork));                    \
      if (*info == 0) {                                                                            \
        p##syev_("N", "L", &in, a, &one, &one, desc.desc, w, z, &one, &one, descz.desc,            \
                 work.data(), &lwork, info);                                                       \
      }                                                                                            \
    }                                                                                              \
    if (*info < 0) return JAXMG_ERROR(#p "syev(d): illegal argument " + std::to_string(-*info));   \
    return Status();                                                                               \
  }                                                                                                \
  template <>                                                                                      \
  Status Adjoint<T>(int64_t n, const T* a, const Descriptor& desca, T* c,                          \
                    const Descriptor& descc) {                                                     \
    int in, one = 1;                                                                               \
    JAXMG_RETURN_IF_ERROR(CheckedInt(n, "order", &in));                                            \
    const T alpha(1), beta(0);                                                                     \
    p##tran_(&in, &in, &alpha, a, &one, &one, desca.desc, &beta, c, &one, &one, descc.desc);       \
    return Status();                                                                               \
  }
#define JAXMG_DEFINE_EIG_COMPLEX(p, T)                                                             \
  template <>                                                                                      \
  Status Eigh<T>(bool vectors, int64_t n, int64_t local_rows, int64_t local_cols, T* a,            \
                 const Descriptor& desc, RealOf<T>* w, T* z, const Descriptor& descz, int* info) { \
    using R = RealOf<T>;                                                                           \
    int in, one = 1, lwork = -1, lrwork = -1, liwork = -1, iquery = 0;                             \
    JAXMG_RETURN_IF_ERROR(CheckedInt(n, "order", &in));                                            \
    T query(0);                                                                                    \
    R rquery(0);                                                                                   \
    std::vector<T> work;                                                                           \
    std::vector<R> rwork;                                                                          \
    auto sized = [&](int* count) {                                                                 \
      return CheckedInt(static_cast<int64_t>(rquery) + 1, "real workspace", count);                \
    };                                                                                             \
    if (vectors) {                                                                                 \
      p##heevd_("V", "L", &in, a, &one, &one, desc.desc, w, z, &one, &one, descz.desc, &query,     \
                &lwork, &rquery, &lrwork, &iquery, &liwork, info);                                 \
      /* The documented minima when the query answers less. */                                     \
      const int64_t nb = desc.desc[5], np = local_rows + nb, nq = local_cols + nb;                 \
      query = T(std::max<double>(std::real(query), static_cast<double>(n + (np + nq + nb) * nb))); \
      rquery = std::max<R>(rquery, static_cast<R>(1 + 9 * n + 3 * np * nq));                       \
      if (*info == 0) JAXMG_RETURN_IF_ERROR(QueriedWork(query, &work, &lwork));                    \
      if (*info == 0) JAXMG_RETURN_IF_ERROR(sized(&lrwork));                                       \
      rwork.assign(static_cast<size_t>(std::max(lrwork, 1)), R(0));                                \
      liwork = std::max(iquery, 1);                                                                \
      std::vector<int> iwork(static_cast<size_t>(liwork));                                         \
      if (*info == 0) {                                                                            \
        p##heevd_("V", "L", &in, a, &one, &one, desc.desc, w, z, &one, &one, descz.desc,           \
                  work.data(), &lwork, rwork.data(), &lrwork, iwork.data(), &liwork, info);        \
      }                                                                                            \
    } else {                                                                                       \
      p##heev_("N", "L", &in, a, &one, &one, desc.desc, w, z, &one, &one, descz.desc, &query,      \
               &lwork, &rquery, &lrwork, info);                                                    \
      if (*info == 0) JAXMG_RETURN_IF_ERROR(QueriedWork(query, &work, &lwork));                    \
      if (*info == 0) JAXMG_RETURN_IF_ERROR(sized(&lrwork));                                       \
      rwork.assign(static_cast<size_t>(std::max(lrwork, 1)), R(0));                                \
      if (*info == 0) {                                                                            \
        p##heev_("N", "L", &in, a, &one, &one, desc.desc, w, z, &one, &one, descz.desc,            \
                 work.data(), &lwork, rwork.data(), &lrwork, info);                                \
      }                                                                                            \
    }                                                                                              \
    if (*info < 0) return JAXMG_ERROR(#p "heev(d): illegal argument " + std::to_string(-*info));   \
    return Status();                                                                               \
  }                                                                                                \
  template <>                                                                                      \
  Status Adjoint<T>(int64_t n, const T* a, const Descriptor& desca, T* c,                          \
                    const Descriptor& descc) {                                                     \
    int in, one = 1;                                                                               \
    JAXMG_RETURN_IF_ERROR(CheckedInt(n, "order", &in));                                            \
    const T alpha(1), beta(0);                                                                     \
    p##tranc_(&in, &in, &alpha, a, &one, &one, desca.desc, &beta, c, &one, &one, descc.desc);      \
    return Status();                                                                               \
  }
JAXMG_DEFINE_EIG_REAL(ps, float)
JAXMG_DEFINE_EIG_REAL(pd, double)
JAXMG_DEFINE_EIG_COMPLEX(pc, std::complex<float>)
JAXMG_DEFINE_EIG_COMPLEX(pz, std::complex<double>)
#undef JAXMG_DEFINE_EIG_REAL
#undef JAXMG_DEFINE_EIG_COMPLEX

JAXMG_DEFINE_QR(ps, float, orgqr)
JAXMG_DEFINE_QR(pd, double, orgqr)
JAXMG_DEFINE_QR(pc, std::complex<float>, ungqr)
JAXMG_DEFINE_QR(pz, std::complex<double>, ungqr)
#undef JAXMG_DEFINE_QR

namespace {
// p?gesvd for real (no rwork) and complex types; the workspace from a query, the complex
// types' real workspace at least its documented 1 + 4 max(m, n).
template <typename T>
void CallGesvd(const char* ju, const char* jvt, const int* m, const int* n, T* a, const int* desca,
               RealOf<T>* s, T* u, const int* descu, T* vt, const int* descvt, T* work,
               const int* lwork, RealOf<T>* rwork, int* info);
#define JAXMG_CALL_GESVD(p, T, ...)                                                              \
  template <>                                                                                    \
  void CallGesvd<T>(const char* ju, const char* jvt, const int* m, const int* n, T* a,           \
                    const int* desca, RealOf<T>* s, T* u, const int* descu, T* vt,               \
                    const int* descvt, T* work, const int* lwork, RealOf<T>* rwork, int* info) { \
    const int one = 1;                                                                           \
    p##gesvd_(ju, jvt, m, n, a, &one, &one, desca, s, u, &one, &one, descu, vt, &one, &one,      \
              descvt, work, lwork, __VA_ARGS__ info);                                            \
  }
JAXMG_CALL_GESVD(ps, float)
JAXMG_CALL_GESVD(pd, double)
JAXMG_CALL_GESVD(pc, std::complex<float>, rwork, )
JAXMG_CALL_GESVD(pz, std::complex<double>, rwork, )
#undef JAXMG_CALL_GESVD

template <typename T>
void CallGemm(const char* ta, const char* tb, const int* m, const int* n, const int* k,
              const T* alpha, const T* a, const int* ia, const int* ja, const int* desca,
              const T* b, const int* ib, const int* jb, const int* descb, const T* beta, T* c,
              const int* ic, const int* jc, const int* descc);
#define JAXMG_CALL_GEMM(p, T)                                                                     \
  template <>                                                                                     \
  void CallGemm<T>(const char* ta, const char* tb, const int* m, const int* n, const int* k,      \
                   const T* alpha, const T* a, const int* ia, const int* ja, const int* desca,    \
                   const T* b, const int* ib, const int* jb, const int* descb, const T* beta,     \
                   T* c, const int* ic, const int* jc, const int* descc) {                        \
    p##gemm_(ta, tb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb, beta, c, ic, jc, descc); \
  }
JAXMG_CALL_GEMM(ps, float)
JAXMG_CALL_GEMM(pd, double)
JAXMG_CALL_GEMM(pc, std::complex<float>)
JAXMG_CALL_GEMM(pz, std::complex<double>)
#undef JAXMG_CALL_GEMM

// A 1-based global index (PBLAS's) as int.
Status CheckedIndex(int64_t i, int* out) { return CheckedInt(i, "global index", out); }
}  // namespace

template <typename T>
Status Gesvd(bool vectors_u, bool vectors_vt, int64_t m, int64_t n, T* a, const Descriptor& desc,
             RealOf<T>* s, T* u, const Descriptor& descu, T* vt, const Descriptor& descvt,
             int* info) {
  using R = RealOf<T>;
  int im, in, lwork = -1;
  JAXMG_RETURN_IF_ERROR(CheckedInt(m, "rows", &im));
  JAXMG_RETURN_IF_ERROR(CheckedInt(n, "columns", &in));
  const char* ju = vectors_u ? "V" : "N";
  const char* jvt = vectors_vt ? "V" : "N";
  std::vector<R> rwork(static_cast<size_t>(1 + 4 * std::max(m, n)), R(0));
  T query(0);
  std::vector<T> work;
  CallGesvd<T>(ju, jvt, &im, &in, a, desc.desc, s, u, descu.desc, vt, descvt.desc, &query, &lwork,
               rwork.data(), info);
  if (*info == 0) JAXMG_RETURN_IF_ERROR(QueriedWork(query, &work, &lwork));
  if (*info == 0 && rwork[0] > static_cast<R>(rwork.size())) {
    rwork.assign(static_cast<size_t>(rwork[0]) + 1, R(0));
  }
  if (*info == 0) {
    CallGesvd<T>(ju, jvt, &im, &in, a, desc.desc, s, u, descu.desc, vt, descvt.desc, work.data(),
                 &lwork, rwork.data(), info);
  }
  if (*info < 0) return JAXMG_ERROR("p?gesvd: illegal argument " + std::to_string(-*info));
  return Status();
}

template <typename T>
Status GemmAt(char transa, char transb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
              int64_t ia, int64_t ja, const Descriptor& desca, const T* b, int64_t ib, int64_t jb,
              const Descriptor& descb, T beta, T* c, int64_t ic, int64_t jc,
              const Descriptor& descc) {
  int im, in, ik, i[6];
  JAXMG_RETURN_IF_ERROR(CheckedInt(m, "rows", &im));
  JAXMG_RETURN_IF_ERROR(CheckedInt(n, "columns", &in));
  JAXMG_RETURN_IF_ERROR(CheckedInt(k, "inner extent", &ik));
  const int64_t at[6] = {ia, ja, ib, jb, ic, jc};
  for (int q = 0; q < 6; ++q) JAXMG_RETURN_IF_ERROR(CheckedIndex(at[q], &i[q]));
  const char ta[2] = {transa, 0}, tb[2] = {transb, 0};
  CallGemm<T>(ta, tb, &im, &in, &ik, &alpha, a, &i[0], &i[1], desca.desc, b, &i[2], &i[3],
              descb.desc, &beta, c, &i[4], &i[5], descc.desc);
  return Status();
}

template <typename T>
Status Gemm(char transa, char transb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
            const Descriptor& desca, const T* b, const Descriptor& descb, T beta, T* c,
            const Descriptor& descc) {
  return GemmAt<T>(transa, transb, m, n, k, alpha, a, 1, 1, desca, b, 1, 1, descb, beta, c, 1, 1,
                   descc);
}

#define JAXMG_DEFINE_GST(p, T, gst)                                                               \
  template <>                                                                                     \
  Status Sygst<T>(int64_t n, T* a, const Descriptor& desca, const T* b, const Descriptor& descb,  \
                  RealOf<T>* scale, int* info) {                                                  \
    int in, one = 1;                                                                              \
    JAXMG_RETURN_IF_ERROR(CheckedInt(n, "order", &in));                                           \
    p##gst##_(&one, "L", &in, a, &one, &one, desca.desc, b, &one, &one, descb.desc, scale, info); \
    if (*info < 0) return JAXMG_ERROR(#p #gst ": illegal argument " + std::to_string(-*info));    \
    return Status();                                                                              \
  }                                                                                               \
  template <>                                                                                     \
  Status TrsmAt<T>(char side, char uplo, char trans, char diag, int64_t m, int64_t n, T alpha,    \
                   const T* a, int64_t ia, int64_t ja, const Descriptor& desca, T* b, int64_t ib, \
                   int64_t jb, const Descriptor& descb) {                                         \
    int im, in, i[4];                                                                             \
    JAXMG_RETURN_IF_ERROR(CheckedInt(m, "rows", &im));                                            \
    JAXMG_RETURN_IF_ERROR(CheckedInt(n, "columns", &in));                                         \
    const int64_t at[4] = {ia, ja, ib, jb};                                                       \
    for (int q = 0; q < 4; ++q) JAXMG_RETURN_IF_ERROR(CheckedIndex(at[q], &i[q]));                \
    const char s[2] = {side, 0}, u[2] = {uplo, 0}, t[2] = {trans, 0}, d[2] = {diag, 0};           \
    p##trsm_(s, u, t, d, &im, &in, &alpha, a, &i[0], &i[1], desca.desc, b, &i[2], &i[3],          \
             descb.desc);                                                                         \
    return Status();                                                                              \
  }                                                                                               \
  template <>                                                                                     \
  Status Trsm<T>(char side, char uplo, char trans, char diag, int64_t m, int64_t n, T alpha,      \
                 const T* a, const Descriptor& desca, T* b, const Descriptor& descb) {            \
    return TrsmAt<T>(side, uplo, trans, diag, m, n, alpha, a, 1, 1, desca, b, 1, 1, descb);       \
  }
JAXMG_DEFINE_GST(ps, float, sygst)
JAXMG_DEFINE_GST(pd, double, sygst)
JAXMG_DEFINE_GST(pc, std::complex<float>, hegst)
JAXMG_DEFINE_GST(pz, std::complex<double>, hegst)
#undef JAXMG_DEFINE_GST

#define JAXMG_INSTANTIATE_SVD(T)                                                                  \
  template Status Gesvd<T>(bool, bool, int64_t, int64_t, T*, const Descriptor&, RealOf<T>*, T*,   \
                           const Descriptor&, T*, const Descriptor&, int*);                       \
  template Status Gemm<T>(char, char, int64_t, int64_t, int64_t, T, const T*, const Descriptor&,  \
                          const T*, const Descriptor&, T, T*, const Descriptor&);                 \
  template Status GemmAt<T>(char, char, int64_t, int64_t, int64_t, T, const T*, int64_t, int64_t, \
                            const Descriptor&, const T*, int64_t, int64_t, const Descriptor&, T,  \
                            T*, int64_t, int64_t, const Descriptor&);
JAXMG_INSTANTIATE_SVD(float)
JAXMG_INSTANTIATE_SVD(double)
JAXMG_INSTANTIATE_SVD(std::complex<float>)
JAXMG_INSTANTIATE_SVD(std::complex<double>)
#undef JAXMG_INSTANTIATE_SVD

namespace {

// In-place sums of count elements of T over the grid's communicator: on every rank (root < 0,
// MPI_Allreduce) or on the communicator's rank root (MPI_Reduce); MPI counts are int, so in
// chunks.
template <typename T>
Status SumOver(const Grid& grid, T* data, int64_t count, int root) {
  using R = RealOf<T>;
  const int64_t total = count * Scalar<T>::kParts;
  constexpr int64_t kChunk = int64_t{1} << 30;
  int me = 0;
  JAXMG_RETURN_IF_ERROR(MpiCheck(MPI_Comm_rank(grid.comm, &me), "MPI_Comm_rank"));
  R* p = reinterpret_cast<R*>(data);
  for (int64_t off = 0; off < total; off += kChunk) {
    const int c = static_cast<int>(std::min(kChunk, total - off));
    if (root < 0) {
      JAXMG_RETURN_IF_ERROR(
          MpiCheck(MPI_Allreduce(MPI_IN_PLACE, p + off, c, RealMpiType<T>(), MPI_SUM, grid.comm),
                   "MPI_Allreduce"));
    } else {
      void* send = me == root ? MPI_IN_PLACE : static_cast<void*>(p + off);
      JAXMG_RETURN_IF_ERROR(MpiCheck(
          MPI_Reduce(send, p + off, c, RealMpiType<T>(), MPI_SUM, root, grid.comm), "MPI_Reduce"));
    }
  }
  return Status();
}

}  // namespace

template <typename T>
Status AllreduceSum(const Grid& grid, T* data, int64_t count) {
  return SumOver(grid, data, count, -1);
}

template <typename T>
Status ReduceSum(const Grid& grid, T* data, int64_t count, int root) {
  return SumOver(grid, data, count, root);
}

#define JAXMG_INSTANTIATE_SUMS(T)                            \
  template Status AllreduceSum<T>(const Grid&, T*, int64_t); \
  template Status ReduceSum<T>(const Grid&, T*, int64_t, int);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_SUMS)
#undef JAXMG_INSTANTIATE_SUMS

Status AllreduceIntSum(const Grid& grid, int* data, int64_t count) {
  constexpr int64_t kChunk = int64_t{1} << 30;
  for (int64_t off = 0; off < count; off += kChunk) {
    const int c = static_cast<int>(std::min(kChunk, count - off));
    JAXMG_RETURN_IF_ERROR(MpiCheck(
        MPI_Allreduce(MPI_IN_PLACE, data + off, c, MPI_INT, MPI_SUM, grid.comm), "MPI_Allreduce"));
  }
  return Status();
}

Status AllreduceMax(const Grid& grid, int* value) {
  return MpiCheck(MPI_Allreduce(MPI_IN_PLACE, value, 1, MPI_INT, MPI_MAX, grid.comm),
                  "MPI_Allreduce");
}

Status AgreeOnFailure(const Grid& grid, const char* algorithm, const Status& local) {
  // As the GPU engine's: the lowest failing rank (as nranks − rank; 0: none), then, only when one
  // failed, its message, so that every rank returns the same error.
  int rank = 0, nranks = 1;
  JAXMG_RETURN_IF_ERROR(MpiCheck(MPI_Comm_rank(grid.comm, &rank), "MPI_Comm_rank"));
  JAXMG_RETURN_IF_ERROR(MpiCheck(MPI_Comm_size(grid.comm, &nranks), "MPI_Comm_size"));
  if (nranks == 1) return local;
  int64_t slots[1 + kMessageSlots] = {};
  slots[0] = local.ok() ? 0 : nranks - rank;
  JAXMG_RETURN_IF_ERROR(MpiCheck(
      MPI_Allreduce(MPI_IN_PLACE, slots, 1, MPI_INT64_T, MPI_MAX, grid.comm), "MPI_Allreduce"));
  if (slots[0] == 0) return Status();
  const int failing = nranks - static_cast<int>(slots[0]);
  if (failing == rank) PackMessage(local.message(), slots + 1);
  JAXMG_RETURN_IF_ERROR(MpiCheck(
      MPI_Allreduce(MPI_IN_PLACE, slots + 1, kMessageSlots, MPI_INT64_T, MPI_MAX, grid.comm),
      "MPI_Allreduce"));
  return AgreedError(algorithm, UnpackMessage(slots + 1), failing, nranks);
}

}  // namespace jaxmg::scalapack
