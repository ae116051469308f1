#include "engines/cusolvermp/cusolvermp.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common/environment.h"

namespace jaxmg::cusolvermp {
namespace {

std::mutex& TableMutex() {
  static std::mutex mu;
  return mu;
}

// Context id -> the contexts of this process's devices of that mesh (one per device).
std::map<int64_t, std::vector<std::unique_ptr<Context>>>& Table() {
  static auto* table =
      new std::map<int64_t, std::vector<std::unique_ptr<Context>>>();  // never destroyed:
  return *table;  // handles and communicators live until the process exits
}

// MAJOR * 10000 + MINOR * 100 + PATCH (cuSOLVERMp >= 0.9, cuBLASMp, NCCL >= 2.9 likewise).
std::string VersionString(int v) {
  return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." +
         std::to_string(v % 100);
}

}  // namespace

Status CudaCheck(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status();
  return Status::Error(std::string("CUDA error ") + cudaGetErrorName(e) + " (" +
                       cudaGetErrorString(e) + ") in " + what);
}

Status NcclCheck(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return Status();
  std::string msg = std::string("NCCL error ") + ncclGetErrorString(r) + " in " + what;
  if (r == ncclSystemError || r == ncclRemoteError || r == ncclInternalError) {
    msg += " (run with NCCL_DEBUG=WARN for details)";
  }
  return Status::Error(msg);
}

Status SolverCheck(cusolverStatus_t s, const char* what) {
  if (s == CUSOLVER_STATUS_SUCCESS) return Status();
  static const char* const kNames[] = {
      "SUCCESS",          "NOT_INITIALIZED", "ALLOC_FAILED",
      "INVALID_VALUE",    "ARCH_MISMATCH",   "MAPPING_ERROR",
      "EXECUTION_FAILED", "INTERNAL_ERROR",  "MATRIX_TYPE_NOT_SUPPORTED",
      "NOT_SUPPORTED"};
  const int code = static_cast<int>(s);
  const std::string name = code >= 0 && code < 10 ? kNames[code] : "status";
  return Status::Error("cuSOLVERMp error " + std::to_string(code) + " (CUSOLVER_STATUS_" + name +
                       ") in " + what);
}

Status BlasMpCheck(cublasMpStatus_t s, const char* what) {
  if (s == CUBLASMP_STATUS_SUCCESS) return Status();
  return Status::Error("cuBLASMp error " + std::to_string(static_cast<int>(s)) + " (" +
                       cublasMpGetStatusString(s) + ") in " + what);
}

Status RankOfMeshPosition(layout::Symmetry symmetry, bool force_redistribute, int mesh_rows,
                          int mesh_cols, int u, int v, int* rank, int* nprow, int* npcol) {
  if (u < 0 || u >= mesh_rows || v < 0 || v >= mesh_cols) {
    return JAXMG_ERROR("mesh position out of range");
  }
  // grid_of_mesh depends on the mesh shape and plan kind only (not on n or the tile): plan a
  // tiny matrix.
  layout::Plan plan;
  const int64_t n = static_cast<int64_t>(mesh_rows) * mesh_cols;
  JAXMG_RETURN_IF_ERROR(
      layout::MakePlan(symmetry, n, n, mesh_rows, mesh_cols, 1, true, force_redistribute, &plan));
  *nprow = plan.grid_rows();
  *npcol = plan.grid_cols();
  const int i = plan.rows.grid_of_mesh[v], j = plan.cols.grid_of_mesh[u];
  *rank = i * *npcol + j;
  return Status();
}

Context::~Context() {
  // Runs only for a context whose creation failed (made contexts live until the process exits).
  if (blas_grid) cublasMpGridDestroy(blas_grid);
  if (blas) cublasMpDestroy(blas);
  if (grid) cusolverMpDestroyGrid(grid);
  if (handle) cusolverMpDestroy(handle);
  if (agree_end) cudaEventDestroy(agree_end);
  if (agree_stream) cudaStreamDestroy(agree_stream);
  if (agree_comm) ncclCommAbort(agree_comm);
  if (agree_host) cudaFreeHost(agree_host);
  if (agree_dev) cudaFree(agree_dev);
  if (pinned) cudaFreeHost(pinned);
  if (probe_host) cudaFreeHost(probe_host);
  if (init_stream) cudaStreamDestroy(init_stream);
  for (cudaEvent_t e : side_events) {
    if (e) cudaEventDestroy(e);
  }
  if (side_stream) cudaStreamDestroy(side_stream);
  if (comm) ncclCommDestroy(comm);
}

namespace {

// The steps of a context's creation that involve this process only.
Status CreateLocal(const ContextParams& p, Context* c) {
  JAXMG_CUDA(cudaStreamCreateWithFlags(&c->init_stream, cudaStreamNonBlocking));
  JAXMG_SOLVER(cusolverMpCreate(&c->handle, p.device, c->init_stream));
  int runtime = 0;
  JAXMG_SOLVER(cusolverMpGetVersion(c->handle, &runtime));
  if (runtime / 100 != CUSOLVERMP_VERSION / 100) {
    return Status::Error("libcusolverMp version " + VersionString(runtime) +
                         " does not match the header jaxmg was built with (" +
                         VersionString(CUSOLVERMP_VERSION) +
                         "): load the libcusolverMp.so.0 of nvidia-cusolvermp-cu13 " +
                         VersionString(CUSOLVERMP_VERSION) +
                         " (pip install 'jaxmg[cuda13]') or rebuild libjaxmg_cuda.so");
  }
  int blas_runtime = 0;
  JAXMG_BLASMP(cublasMpGetVersion(&blas_runtime));
  if (blas_runtime / 100 != CUBLASMP_VERSION / 100) {
    return Status::Error("libcublasmp version " + VersionString(blas_runtime) +
                         " does not match the header jaxmg was built with (" +
                         VersionString(CUBLASMP_VERSION) + "): install nvidia-cublasmp-cu13 " +
                         VersionString(CUBLASMP_VERSION) + " or rebuild libjaxmg_cuda.so");
  }
  JAXMG_BLASMP(cublasMpCreate(&c->blas, c->init_stream));
  JAXMG_CUDA(cudaMallocHost(&c->pinned, 16 * sizeof(int32_t)));
  JAXMG_CUDA(cudaMalloc(&c->agree_dev, Context::kAgreeSlots * sizeof(int64_t)));
  JAXMG_CUDA(cudaMallocHost(&c->agree_host, Context::kAgreeSlots * sizeof(int64_t)));
  JAXMG_CUDA(cudaEventCreateWithFlags(&c->agree_end, cudaEventDisableTiming));
  JAXMG_CUDA(cudaStreamCreateWithFlags(&c->agree_stream, cudaStreamNonBlocking));
  return Status();
}

// Waits until a non-blocking NCCL call on `comm` is no longer in progress, at most until
// `deadline`; returns its outcome (ncclInProgress when the deadline passed).
ncclResult_t WaitNccl(ncclComm_t comm, std::chrono::steady_clock::time_point deadline) {
  ncclResult_t state = ncclInProgress;
  while (ncclCommGetAsyncError(comm, &state) == ncclSuccess && state == ncclInProgress &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return state;
}

std::chrono::steady_clock::time_point Deadline() {
  return std::chrono::steady_clock::now() +
         std::chrono::microseconds(static_cast<int64_t>(CallTimeoutSeconds() * 1e6));
}

// The agreement communicator: non-blocking, split from the context's (every rank is present:
// the context's own initialization has just completed).
Status SplitAgreeComm(Context* c) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r = ncclCommSplit(c->comm, 0, c->rank, &c->agree_comm, &config);
  if (r == ncclInProgress || (r == ncclSuccess && c->agree_comm != nullptr)) {
    r = WaitNccl(c->agree_comm, Deadline());
  }
  return NcclCheck(r, "ncclCommSplit (the agreement communicator)");
}

// The fields of p in a new context (its grid position from its rank: row-major mapping).
void SetFields(const ContextParams& p, Context* c) {
  c->device = p.device;
  c->nranks = p.nranks;
  c->rank = p.rank;
  c->nprow = p.nprow;
  c->npcol = p.npcol;
  c->myrow = p.rank / p.npcol;  // row-major grid mapping
  c->mycol = p.rank % p.npcol;
  c->mesh_rows = p.mesh_rows;
  c->mesh_cols = p.mesh_cols;
  c->mesh_u = p.mesh_u;
  c->mesh_v = p.mesh_v;
}

// The steps of a context's creation after its communicator (c->comm): the agreement
// communicator, this process's handles and buffers (a local failure agreed on before the grids,
// whose creation is collective), the grids.
Status FinishContext(const ContextParams& p, Context* c) {
  JAXMG_RETURN_IF_ERROR(SplitAgreeComm(c));
  const Status local = CreateLocal(p, c);
  int64_t failed = local.ok() ? 0 : 1;
  if (c->agree_dev != nullptr && c->agree_host != nullptr && c->agree_stream != nullptr) {
    JAXMG_RETURN_IF_ERROR(BoundedAllreduceMax(*c, &failed, 1));
  } else {
    failed = 1;  // cannot take part in the agreement: the others time out with a message
  }
  if (!local.ok()) return local;
  if (failed != 0) {
    return Status::Error(
        "another process of this mesh failed to create its GPU context (its "
        "error says why)");
  }
  JAXMG_SOLVER(cusolverMpCreateDeviceGrid(c->handle, &c->grid, c->comm, p.nprow, p.npcol,
                                          CUSOLVERMP_GRID_MAPPING_ROW_MAJOR));
  JAXMG_BLASMP(
      cublasMpGridCreate(p.nprow, p.npcol, CUBLASMP_GRID_LAYOUT_ROW_MAJOR, c->comm, &c->blas_grid));
  return Status();
}

// One device's context (its rank of the collective creation).
Status CreateOne(const ContextParams& p, std::unique_ptr<Context>* out) {
  if (p.nranks != p.nprow * p.npcol) return JAXMG_ERROR("nranks != grid rows * grid cols");
  if (p.rank < 0 || p.rank >= p.nranks) return JAXMG_ERROR("rank out of range");
  int nccl_version = 0;
  JAXMG_NCCL(ncclGetVersion(&nccl_version));
  if (nccl_version < 22900) {
    return Status::Error(
        "cuSOLVERMp 0.9 and cuBLASMp 0.10 need NCCL >= 2.29, but the loaded libnccl is " +
        VersionString(nccl_version) +
        ": install nvidia-nccl-cu13>=2.29.2 (pip install 'jaxmg[cuda13]' resolves it)");
  }
  auto c = std::make_unique<Context>();
  SetFields(p, c.get());
  JAXMG_CUDA(cudaSetDevice(p.device));
  ncclUniqueId uid;
  static_assert(sizeof(uid.internal) == NCCL_UNIQUE_ID_BYTES, "unexpected ncclUniqueId");
  std::memcpy(uid.internal, p.unique_id, NCCL_UNIQUE_ID_BYTES);
  // Every process has joined before this (jaxmg/_core/gpu.py agrees first, with a bounded wait).
  JAXMG_NCCL(ncclCommInitRank(&c->comm, p.nranks, uid, p.rank));
  JAXMG_RETURN_IF_ERROR(FinishContext(p, c.get()));
  *out = std::move(c);
  return Status();
}

}  // namespace

Status CreateContexts(const std::vector<ContextParams>& ps, int64_t* id) {
  if (ps.empty()) return JAXMG_ERROR("no device to create a context for");
  // What can fail before the NCCL initialization fails here, on every device at once: a thread
  // that stopped before ncclCommInitRank would leave the others waiting in it for good.
  for (const ContextParams& p : ps) {
    if (p.nranks != p.nprow * p.npcol) return JAXMG_ERROR("nranks != grid rows * grid cols");
    if (p.rank < 0 || p.rank >= p.nranks) return JAXMG_ERROR("rank out of range");
    JAXMG_CUDA(cudaSetDevice(p.device));
  }
  std::vector<std::unique_ptr<Context>> made(ps.size());
  std::vector<Status> status(ps.size());
  if (ps.size() == 1) {
    status[0] = CreateOne(ps[0], &made[0]);
  } else {
    // NCCL's initialization of several ranks of one process: one thread per rank (each blocks
    // in ncclCommInitRank until every rank has come). The steps after it are collective too
    // (the agreement split, the failure agreement, the grids) and run on the same threads.
    std::vector<std::thread> threads;
    threads.reserve(ps.size());
    for (size_t i = 0; i < ps.size(); ++i) {
      threads.emplace_back([&, i]() { status[i] = CreateOne(ps[i], &made[i]); });
    }
    for (auto& t : threads) t.join();
  }
  for (const Status& s : status) {
    if (!s.ok()) return s;
  }
  std::lock_guard<std::mutex> lock(TableMutex());
  auto& table = Table();
  *id = table.empty() ? 1 : table.rbegin()->first + 1;
  for (auto& c : made) c->id = *id;
  table[*id] = std::move(made);
  return Status();
}

Status BoundedAllreduceMax(Context& c, int64_t* values, size_t count) {
  if (!c.poisoned.empty()) return Status::Error(c.poisoned);
  if (count > static_cast<size_t>(Context::kAgreeSlots)) return JAXMG_ERROR("too many values");
  if (c.nranks == 1) return Status();
  const auto deadline = Deadline();
  auto give_up = [&c]() {
    ncclCommAbort(c.agree_comm);  // ends the pending all-reduce (it runs on our stream only)
    c.agree_comm = nullptr;
    c.poisoned =
        "jaxmg: a process of this mesh did not join a jaxmg call within "
        "JAXMG_CALL_TIMEOUT = " +
        std::to_string(static_cast<int64_t>(CallTimeoutSeconds())) +
        " s (a process may have raised an error before the call, taken another branch, "
        "or died); the processes can no longer pair their calls: restart the job";
    return Status::Error(c.poisoned);
  };
  int64_t* host = c.agree_host;
  std::memcpy(host, values, count * sizeof(int64_t));
  const size_t bytes = count * sizeof(int64_t);
  cudaStream_t s = c.agree_stream;
  JAXMG_CUDA(cudaMemcpyAsync(c.agree_dev, host, bytes, cudaMemcpyHostToDevice, s));
  ncclResult_t r =
      ncclAllReduce(c.agree_dev, c.agree_dev, count, ncclInt64, ncclMax, c.agree_comm, s);
  if (r == ncclInProgress) r = WaitNccl(c.agree_comm, deadline);
  if (r == ncclInProgress) return give_up();
  JAXMG_RETURN_IF_ERROR(NcclCheck(r, "ncclAllReduce (call agreement)"));
  JAXMG_CUDA(cudaMemcpyAsync(host, c.agree_dev, bytes, cudaMemcpyDeviceToHost, s));
  JAXMG_CUDA(cudaEventRecord(c.agree_end, s));
  while (true) {
    const cudaError_t e = cudaEventQuery(c.agree_end);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) return CudaCheck(e, "the call agreement");
    if (std::chrono::steady_clock::now() > deadline) return give_up();
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  std::memcpy(values, host, bytes);
  return Status();
}

Status AgreeOnCall(Context& c, const std::vector<int64_t>& values,
                   const std::vector<const char*>& names) {
  if (!c.poisoned.empty()) return Status::Error(c.poisoned);
  // max over the ranks of (v, -v) gives each field's maximum and minimum in one all-reduce.
  std::vector<int64_t> both{c.calls++};
  both.insert(both.end(), values.begin(), values.end());
  const size_t k = both.size();
  both.resize(2 * k);
  for (size_t i = 0; i < k; ++i) both[k + i] = -both[i];
  JAXMG_RETURN_IF_ERROR(BoundedAllreduceMax(c, both.data(), both.size()));
  for (size_t i = 0; i < k; ++i) {
    const int64_t hi = both[i], lo = -both[k + i];
    if (hi == lo) continue;
    const std::string field = i == 0 ? "call number" : names[i - 1];
    const std::string detail = field == "routine" ? "they call different routines"
                                                  : "from " + std::to_string(lo) + " to " +
                                                        std::to_string(hi) + " across processes";
    return Status::Error("jaxmg: the processes of this mesh disagree on the " + field +
                         " of this call (" + detail +
                         "); every process must make the same jaxmg calls, in the same order, "
                         "with the same arguments");
  }
  return Status();
}

Status ContextOfPositions(Context& c, cudaStream_t stream, const int32_t* position,
                          layout::Symmetry symmetry, bool force_redistribute, Context** out) {
  *out = &c;
  if (c.nranks == 1) return Status();
  const size_t count = static_cast<size_t>(c.nranks) + 1;
  if (count > static_cast<size_t>(Context::kAgreeSlots)) {
    return Status::Error("jaxmg: a mesh of " + std::to_string(c.nranks) +
                         " devices seen only as an abstract mesh inside jit: pass mesh=... (the "
                         "concrete mesh) to the jaxmg call");
  }
  // This rank's real NCCL rank (+1; 0 where it failed) in its slot of c's ranks, agreed (max).
  int32_t uv[2] = {-1, -1};
  Status local = CudaCheck(
      cudaMemcpyAsync(uv, position, sizeof(uv), cudaMemcpyDeviceToHost, stream), "the position");
  if (local.ok()) local = CudaCheck(cudaStreamSynchronize(stream), "the position");
  ContextParams p;
  if (local.ok()) {
    local = RankOfMeshPosition(symmetry, force_redistribute, c.mesh_rows, c.mesh_cols, uv[0], uv[1],
                               &p.rank, &p.nprow, &p.npcol);
  }
  std::vector<int64_t> slots(count, 0);
  slots[c.rank] = local.ok() ? p.rank + 1 : 0;
  slots[c.nranks] = local.ok() ? 0 : 1;
  JAXMG_RETURN_IF_ERROR(BoundedAllreduceMax(c, slots.data(), count));
  if (!local.ok()) return local;
  if (slots[c.nranks] != 0) {
    return Status::Error(
        "jaxmg: another process of this mesh could not read its shard's mesh "
        "position (its error says why)");
  }
  std::vector<int> order(c.nranks);  // the real NCCL rank of each of c's ranks
  std::vector<bool> seen(c.nranks, false);
  bool same = true;
  for (int r = 0; r < c.nranks; ++r) {
    order[r] = static_cast<int>(slots[r] - 1);
    if (order[r] < 0 || order[r] >= c.nranks || seen[order[r]]) {
      return JAXMG_ERROR("the shards' mesh positions are not a permutation of the mesh");
    }
    seen[order[r]] = true;
    same = same && order[r] == r;
  }
  if (same) return Status();
  for (auto& [key, made] : c.reordered) {
    if (key == order) {
      *out = made.get();
      return Status();
    }
  }
  // Every rank is here with the same order: split c's communicator, ranked by the real order.
  p.nranks = c.nranks;
  p.device = c.device;
  p.mesh_rows = c.mesh_rows;
  p.mesh_cols = c.mesh_cols;
  p.mesh_u = uv[0];
  p.mesh_v = uv[1];
  auto d = std::make_unique<Context>();
  SetFields(p, d.get());
  d->id = c.id;
  JAXMG_NCCL(ncclCommSplit(c.comm, 0, p.rank, &d->comm, nullptr));
  JAXMG_RETURN_IF_ERROR(FinishContext(p, d.get()));
  c.reordered.emplace_back(order, std::move(d));
  *out = c.reordered.back().second.get();
  return Status();
}

Status FindContext(int64_t id, int device, Context** out) {
  std::lock_guard<std::mutex> lock(TableMutex());
  auto it = Table().find(id);
  if (it == Table().end()) {
    return Status::Error("jaxmg GPU context " + std::to_string(id) +
                         " does not exist in this process (contexts are created by the jaxmg "
                         "call before tracing; do not reuse compiled calls across processes)");
  }
  for (const auto& c : it->second) {
    if (c->device == device) {
      *out = c.get();
      return Status();
    }
  }
  return Status::Error("jaxmg GPU context " + std::to_string(id) +
                       " was made for other devices "
                       "of this process than GPU " +
                       std::to_string(device) +
                       " (the mesh of the call is not the mesh the context was made for; pass "
                       "mesh=... explicitly)");
}

Status Context::GetPlan(layout::Symmetry symmetry, int64_t n, int64_t cols, int64_t tile, bool pad,
                        bool force_redistribute, const PlanState** out) {
  auto key = std::make_tuple(n, cols, tile, pad, static_cast<int>(symmetry), force_redistribute);
  auto it = plans.find(key);
  if (it != plans.end()) {
    *out = it->second.get();
    return Status();
  }
  auto s = std::make_unique<PlanState>();
  JAXMG_RETURN_IF_ERROR(layout::MakePlan(symmetry, n, cols, mesh_rows, mesh_cols, tile, pad,
                                         force_redistribute, &s->plan));
  const layout::Plan& plan = s->plan;
  if (plan.grid_rows() != nprow || plan.grid_cols() != npcol ||
      plan.rows.grid_of_mesh[mesh_v] != myrow || plan.cols.grid_of_mesh[mesh_u] != mycol) {
    return JAXMG_ERROR("this call's layout plan puts mesh position (" + std::to_string(mesh_u) +
                       ", " + std::to_string(mesh_v) +
                       ") elsewhere on the grid than its GPU context does");
  }
  const int64_t lr = layout::EngineLocalExtent(plan, plan.rows, myrow);
  JAXMG_CUDA(cudaSetDevice(device));
  for (int axis = 0; axis < 3; ++axis) {
    const layout::AxisPlan& map = axis == 0 ? plan.rows : plan.cols;
    std::vector<int64_t> rows(static_cast<size_t>(lr));
    for (int64_t r = 0; r < lr; ++r) {
      const int64_t engine =
          layout::CyclicAxis{plan.tile, nprow, myrow}.Global(layout::LocalIndex{r}).value;
      if (axis == 2) {  // the leading rows (engine order), as many as the matrix has columns
        rows[r] = engine < plan.cols.extent ? engine : -1;
      } else {
        rows[r] = layout::EngineGlobalToOriginal(plan, map, engine).value;
      }
    }
    JAXMG_CUDA(cudaMalloc(&s->d_rhs_map[axis], sizeof(int64_t) * std::max<int64_t>(lr, 1)));
    JAXMG_CUDA(
        cudaMemcpy(s->d_rhs_map[axis], rows.data(), sizeof(int64_t) * lr, cudaMemcpyHostToDevice));
  }
  s->row_perm = layout::LocalTilePermutation(plan, plan.rows, myrow);
  s->col_perm = layout::LocalTilePermutation(plan, plan.cols, mycol);
  *out = s.get();
  plans[key] = std::move(s);
  return Status();
}

std::string Versions() {
  std::string line = "cuSOLVERMp header " + VersionString(CUSOLVERMP_VERSION);
  int devices = 0;
  std::string runtime = "n/a";
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    int dev = 0;
    cudaGetDevice(&dev);
    cudaStream_t stream = nullptr;
    cusolverMpHandle_t h = nullptr;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess &&
        cusolverMpCreate(&h, dev, stream) == CUSOLVER_STATUS_SUCCESS) {
      int v = 0;
      if (cusolverMpGetVersion(h, &v) == CUSOLVER_STATUS_SUCCESS) runtime = VersionString(v);
      cusolverMpDestroy(h);
    } else {
      runtime = "n/a (handle creation failed)";
    }
    if (stream) cudaStreamDestroy(stream);
  } else {
    runtime = "n/a (no GPU)";
  }
  line += ", runtime " + runtime;
  int blas = 0;
  cublasMpGetVersion(&blas);
  line +=
      "; cuBLASMp header " + VersionString(CUBLASMP_VERSION) + ", runtime " + VersionString(blas);
  int nccl = 0;
  ncclGetVersion(&nccl);
  line += "; NCCL header " + VersionString(NCCL_VERSION_CODE) + ", runtime " + VersionString(nccl);
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  line += "; CUDA runtime " + std::to_string(rt / 1000) + "." + std::to_string((rt % 1000) / 10) +
          ", driver " +
          (drv ? std::to_string(drv / 1000) + "." + std::to_string((drv % 1000) / 10)
               : std::string("none"));
  line += "; GPUs " + std::to_string(devices);
  return line;
}

}  // namespace jaxmg::cusolvermp
