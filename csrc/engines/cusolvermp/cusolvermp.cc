#include "engines/cusolvermp/cusolvermp.h"

#include <cstdio>
#include <cstring>

namespace jaxmg::cusolvermp {
namespace {

std::mutex& TableMutex() {
  static std::mutex mu;
  return mu;
}

std::map<int64_t, std::unique_ptr<Context>>& Table() {
  static auto* table = new std::map<int64_t, std::unique_ptr<Context>>();  // never destroyed:
  return *table;  // handles and communicators live until the process exits
}

std::string VersionString(int v, int major_scale) {
  const int major = v / major_scale, minor = (v % major_scale) / 100, patch = v % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
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

Status RankOfMeshPosition(int mesh_rows, int mesh_cols, int u, int v, int* rank, int* nprow,
                          int* npcol) {
  if (u < 0 || u >= mesh_rows || v < 0 || v >= mesh_cols) {
    return JAXMG_ERROR("mesh position out of range");
  }
  // grid_of_mesh depends on the mesh shape only (not on n or the tile): plan a tiny matrix.
  layout::SymmetricPlan plan;
  JAXMG_RETURN_IF_ERROR(layout::MakeSymmetricPlan(static_cast<int64_t>(mesh_rows) * mesh_cols,
                                                  mesh_rows, mesh_cols, 1, true, &plan));
  if (plan.strategy != layout::Strategy::kRelabel) {
    return Status::Error("the GPU engine (cuSOLVERMp 0.8) cannot use a " +
                         std::to_string(mesh_rows) + "x" + std::to_string(mesh_cols) +
                         " mesh: one mesh dimension must divide the other (e.g. 2x1, 1x2, 2x2, "
                         "4x2); other grids need a redistribution (Gemr2D) that it lacks");
  }
  *nprow = plan.grid_rows();
  *npcol = plan.grid_cols();
  const int i = plan.rows.grid_of_mesh[v], j = plan.cols.grid_of_mesh[u];
  *rank = i * *npcol + j;
  return Status();
}

Status CreateContext(const ContextParams& p, int64_t* id) {
  if (p.nranks != p.nprow * p.npcol) return JAXMG_ERROR("nranks != grid rows * grid cols");
  if (p.rank < 0 || p.rank >= p.nranks) return JAXMG_ERROR("rank out of range");
  int nccl_version = 0;
  JAXMG_NCCL(ncclGetVersion(&nccl_version));
  if (nccl_version < 22700) {
    return Status::Error("cuSOLVERMp 0.8 needs NCCL >= 2.27, but the loaded libnccl is " +
                         std::to_string(nccl_version));
  }
  auto c = std::make_unique<Context>();
  c->device = p.device;
  c->nranks = p.nranks;
  c->rank = p.rank;
  c->nprow = p.nprow;
  c->npcol = p.npcol;
  c->myrow = p.rank / p.npcol;  // CUSOLVERMP_GRID_MAPPING_ROW_MAJOR
  c->mycol = p.rank % p.npcol;
  c->mesh_rows = p.mesh_rows;
  c->mesh_cols = p.mesh_cols;
  c->mesh_u = p.mesh_u;
  c->mesh_v = p.mesh_v;
  JAXMG_CUDA(cudaSetDevice(p.device));
  ncclUniqueId uid;
  static_assert(sizeof(uid.internal) == NCCL_UNIQUE_ID_BYTES, "unexpected ncclUniqueId");
  std::memcpy(uid.internal, p.unique_id, NCCL_UNIQUE_ID_BYTES);
  JAXMG_NCCL(ncclCommInitRank(&c->comm, p.nranks, uid, p.rank));
  JAXMG_CUDA(cudaStreamCreateWithFlags(&c->init_stream, cudaStreamNonBlocking));
  JAXMG_SOLVER(cusolverMpCreate(&c->handle, p.device, c->init_stream));
  int runtime = 0;
  JAXMG_SOLVER(cusolverMpGetVersion(c->handle, &runtime));
  if (runtime / 100 != CUSOLVERMP_VERSION / 100) {
    return Status::Error("libcusolverMp version " + std::to_string(runtime) +
                         " does not match the header jaxmg was built with (" +
                         std::to_string(CUSOLVERMP_VERSION) +
                         ", i.e. 0.8.x): load the libcusolverMp.so.0 of nvidia-cusolvermp-cu13 "
                         "0.8.0 (LD_LIBRARY_PATH) or rebuild libjaxmg_cuda.so");
  }
  JAXMG_SOLVER(cusolverMpCreateDeviceGrid(c->handle, &c->grid, c->comm, p.nprow, p.npcol,
                                          CUSOLVERMP_GRID_MAPPING_ROW_MAJOR));
  JAXMG_CUDA(cudaMallocHost(&c->pinned, 4 * sizeof(int32_t)));
  std::lock_guard<std::mutex> lock(TableMutex());
  auto& table = Table();
  c->id = table.empty() ? 1 : table.rbegin()->first + 1;
  *id = c->id;
  table[c->id] = std::move(c);
  return Status();
}

Status FindContext(int64_t id, Context** out) {
  std::lock_guard<std::mutex> lock(TableMutex());
  auto it = Table().find(id);
  if (it == Table().end()) {
    return Status::Error("jaxmg GPU context " + std::to_string(id) +
                         " does not exist in this process (contexts are created by "
                         "jaxmg.potrs before tracing; do not reuse compiled calls across "
                         "processes)");
  }
  *out = it->second.get();
  return Status();
}

Status Context::GetPlan(int64_t n, int64_t tile, bool pad, const PlanState** out) {
  auto key = std::make_tuple(n, tile, pad);
  auto it = plans.find(key);
  if (it != plans.end()) {
    *out = it->second.get();
    return Status();
  }
  auto s = std::make_unique<PlanState>();
  JAXMG_RETURN_IF_ERROR(layout::MakeSymmetricPlan(n, mesh_rows, mesh_cols, tile, pad, &s->plan));
  const layout::SymmetricPlan& plan = s->plan;
  if (plan.strategy != layout::Strategy::kRelabel) {
    return Status::Error("the GPU engine cannot use this mesh (needs a redistribution)");
  }
  if (plan.grid_rows() != nprow || plan.grid_cols() != npcol) {
    return JAXMG_ERROR("plan grid does not match the context grid");
  }
  const int64_t lr = layout::EngineLocalExtent(plan, plan.rows, myrow);
  std::vector<int64_t> rows(static_cast<size_t>(lr));
  for (int64_t r = 0; r < lr; ++r) {
    rows[r] = layout::EngineToGlobal(plan, plan.rows, myrow, layout::LocalIndex{r}).value;
  }
  JAXMG_CUDA(cudaSetDevice(device));
  JAXMG_CUDA(cudaMalloc(&s->d_row_global, sizeof(int64_t) * std::max<int64_t>(lr, 1)));
  JAXMG_CUDA(
      cudaMemcpy(s->d_row_global, rows.data(), sizeof(int64_t) * lr, cudaMemcpyHostToDevice));
  s->row_perm = layout::LocalTilePermutation(plan, plan.rows, myrow);
  s->col_perm = layout::LocalTilePermutation(plan, plan.cols, mycol);
  *out = s.get();
  plans[key] = std::move(s);
  return Status();
}

std::string Versions() {
  std::string line;
  int header = CUSOLVERMP_VERSION;
  line += "cuSOLVERMp header " + VersionString(header, 1000);
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
      if (cusolverMpGetVersion(h, &v) == CUSOLVER_STATUS_SUCCESS) {
        runtime = VersionString(v, 1000);
      }
      cusolverMpDestroy(h);
    } else {
      runtime = "n/a (handle creation failed)";
    }
    if (stream) cudaStreamDestroy(stream);
  } else {
    runtime = "n/a (no GPU)";
  }
  line += ", runtime " + runtime;
  int nccl = 0;
  ncclGetVersion(&nccl);
  line += "; NCCL header " + VersionString(NCCL_VERSION_CODE, 10000) + ", runtime " +
          VersionString(nccl, 10000);
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
