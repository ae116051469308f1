// cuSOLVERMp + cuBLASMp engine: status -> Status, type maps, and the per-device context cache.
//
// A context is one (mesh, grid shape, NCCL rank map, device): our own NCCL communicator, a
// cuSOLVERMp handle and device grid, and a cuBLASMp handle and grid (for Gemr2D). Contexts are
// created once, from Python, before the jitted call is built (jaxmg/_core/gpu.py) and live until
// the process exits. The contexts of one process's devices of a mesh share an id (one device per
// process under a launcher, every local GPU in a single process): the FFI handler finds its
// context by that id, received as an attribute, and its device ordinal. XLA calls each device's
// handler on that device's own thread; a handler touches only its own context (its
// communicators, streams and lock), so the concurrent handlers of one call meet only in NCCL
// collectives, which every device's handler reaches.
//
// Built against cuSOLVERMp 0.9.x and cuBLASMp 0.10.x (both need NCCL >= 2.29).
#pragma once

#include <cublasmp.h>
#include <cuda_runtime.h>
#include <cusolverMp.h>
#include <nccl.h>

#include <complex>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/scalar.h"
#include "common/status.h"
#include "layout/layout.h"

namespace jaxmg::cusolvermp {

// cudaDataType of an element type (by Scalar<T>::kIndex).
template <typename T>
constexpr cudaDataType DataTypeOf() {
  constexpr cudaDataType kTypes[] = {CUDA_R_32F, CUDA_R_64F, CUDA_C_32F, CUDA_C_64F};
  return kTypes[Scalar<T>::kIndex];
}
// NCCL type of the real parts.
template <typename T>
constexpr ncclDataType_t NcclRealOf() {
  return sizeof(RealOf<T>) == 4 ? ncclFloat32 : ncclFloat64;
}

Status CudaCheck(cudaError_t e, const char* what);
Status NcclCheck(ncclResult_t r, const char* what);
Status SolverCheck(cusolverStatus_t s, const char* what);
Status BlasMpCheck(cublasMpStatus_t s, const char* what);

#define JAXMG_CUDA(expr) JAXMG_RETURN_IF_ERROR(::jaxmg::cusolvermp::CudaCheck((expr), #expr))
#define JAXMG_NCCL(expr) JAXMG_RETURN_IF_ERROR(::jaxmg::cusolvermp::NcclCheck((expr), #expr))
#define JAXMG_SOLVER(expr) JAXMG_RETURN_IF_ERROR(::jaxmg::cusolvermp::SolverCheck((expr), #expr))
#define JAXMG_BLASMP(expr) JAXMG_RETURN_IF_ERROR(::jaxmg::cusolvermp::BlasMpCheck((expr), #expr))

// Per-plan data a context keeps between calls: the plan, the right-hand-side row maps on the
// device and the local tile permutations.
struct PlanState {
  layout::Plan plan;
  // For each local row r of this process row: the original global index (or -1) of engine
  // index CyclicAxis::Global(r) through the plan's rows axis ([0]) and columns axis ([1]); [2]: the
  // engine index itself when it is below the matrix's column count (the leading rows: R of a
  // QR factorization, a least-squares solution), else -1.
  int64_t* d_rhs_map[3] = {nullptr, nullptr, nullptr};
  std::vector<int64_t> row_perm;  // LocalTilePermutation of rows (identity when not needed)
  std::vector<int64_t> col_perm;
};

struct Context {
  int64_t id = 0;
  int device = 0;
  int nranks = 1, rank = 0;
  int nprow = 1, npcol = 1, myrow = 0, mycol = 0;
  int mesh_rows = 1, mesh_cols = 1, mesh_u = 0, mesh_v = 0;
  ncclComm_t comm = nullptr;
  cusolverMpHandle_t handle = nullptr;
  cusolverMpGrid_t grid = nullptr;
  cublasMpHandle_t blas = nullptr;
  cublasMpGrid_t blas_grid = nullptr;
  // Single-GPU handles for the engine's own algorithms (created on first use).
  void* local_blas = nullptr;          // cublasHandle_t
  void* dn = nullptr;                  // cusolverDnHandle_t
  void* dn_params = nullptr;           // cusolverDnParams_t
  cudaStream_t init_stream = nullptr;  // the handles' creation stream; calls use XLA's stream
  // A side stream of the highest priority for the own algorithms' look-ahead, its own cuBLAS and
  // cusolverDn handles, and two events (created on first use).
  cudaStream_t side_stream = nullptr;
  void* side_blas = nullptr;
  void* side_dn = nullptr;
  void* side_dn_params = nullptr;
  cudaEvent_t side_events[2] = {nullptr, nullptr};
  // config.gpu_math as last set on each handle (common/config.h's Choice code; a new handle's
  // products are native, code 0): a call sets a mode only where it differs (ApplyMath).
  int64_t math_mp = 0, math_blas = 0, math_dn = 0, math_side_blas = 0, math_side_dn = 0;
  int32_t* pinned = nullptr;   // 16 pinned ints: status, diagonal check, mesh position, agreement
  void* probe_host = nullptr;  // pinned: the symmetry check's products (grown on demand)
  size_t probe_host_bytes = 0;
  // Agreement of host values (AgreeOnCall, BoundedAllreduceMax) on a communicator and stream of
  // its own, never XLA's stream: a non-blocking NCCL communicator split from `comm`, whose
  // all-reduce is polled against JAXMG_CALL_TIMEOUT and aborted when a peer does not come. Calls
  // so far, a device and a pinned buffer of kAgreeSlots int64, the event that ends an all-reduce,
  // and why the context refuses every call (after a peer did not come).
  static constexpr int kAgreeSlots = 64;
  int64_t calls = 0;
  ncclComm_t agree_comm = nullptr;
  cudaStream_t agree_stream = nullptr;
  int64_t* agree_dev = nullptr;
  int64_t* agree_host = nullptr;
  cudaEvent_t agree_end = nullptr;
  std::string poisoned;
  std::vector<char> host_work;  // engine host workspace
  std::map<std::tuple<int64_t, int64_t, int64_t, bool, int, bool>, std::unique_ptr<PlanState>>
      plans;
  // The contexts split from this one whose NCCL ranks follow another order of the mesh's
  // devices (ContextOfPositions), by their ranks' ranks in this context's communicator. Used
  // under this context's mutex only.
  std::vector<std::pair<std::vector<int>, std::unique_ptr<Context>>> reordered;
  std::mutex mu;  // one call at a time per context (and its reordered ones)

  Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();

  // The plan of (n x cols, tile, pad, symmetry, force_redistribute), made once. Fails when the
  // plan's grid map is not this context's.
  Status GetPlan(layout::Symmetry symmetry, int64_t n, int64_t cols, int64_t tile, bool pad,
                 bool force_redistribute, const PlanState** out);
};

struct ContextParams {
  const char* unique_id = nullptr;  // NCCL_UNIQUE_ID_BYTES bytes
  int nranks = 1, rank = 0, device = 0;
  int nprow = 1, npcol = 1;
  int mesh_rows = 1, mesh_cols = 1, mesh_u = 0, mesh_v = 0;
};

// Creates the contexts of this process's devices of one mesh, ps[i] for its i-th device
// (collective over the nranks devices of the mesh in all processes: NCCL init). Several devices
// initialize on threads of their own, one per NCCL rank, as NCCL requires of one process. Returns
// in *id the id they share; FindContext picks a device's.
Status CreateContexts(const std::vector<ContextParams>& ps, int64_t* id);
// values[i] = max over the context's ranks (host values); the wait for the other ranks is bounded
// by JAXMG_CALL_TIMEOUT (then the agreement communicator is aborted and the context refuses
// every call).
Status BoundedAllreduceMax(Context& c, int64_t* values, size_t count);
// Before any engine collective of a call: the ranks of the context all-reduce (max) `values` and
// their negatives (prefixed with the context's call counter) and compare. The wait for the other
// ranks is bounded (JAXMG_CALL_TIMEOUT): a rank that does not come makes the others refuse every
// later call. A
// difference is the same error on every rank, naming the field (names[i] for values[i]).
Status AgreeOnCall(Context& c, const std::vector<int64_t>& values,
                   const std::vector<const char*>& names);
// For a call traced with only the abstract mesh (its context assumed jax.make_mesh's order of
// the devices): the context whose NCCL ranks follow the shards' real mesh positions. Reads this
// shard's position (device memory, on `stream`), agrees every rank's real NCCL rank in one
// all-reduce, and returns `c` itself when they are c's ranks, else the context split from c's
// communicator in the real order (made once per order, kept in c.reordered). Collective over
// c's ranks; call with c.mu held.
Status ContextOfPositions(Context& c, cudaStream_t stream, const int32_t* position,
                          layout::Symmetry symmetry, bool force_redistribute, Context** out);
// The context of GPU `device` (the CUDA ordinal) among those with this id, or an error.
Status FindContext(int64_t id, int device, Context** out);

// Mesh position (u, v) -> NCCL rank r = i * npcol + j of the engine grid position (i, j), from
// the same plan the handlers use for routines of this symmetry (and redistribution choice).
Status RankOfMeshPosition(layout::Symmetry symmetry, bool force_redistribute, int mesh_rows,
                          int mesh_cols, int u, int v, int* rank, int* nprow, int* npcol);

// One line: cuSOLVERMp, cuBLASMp and NCCL (header, runtime), CUDA runtime and driver.
std::string Versions();

}  // namespace jaxmg::cusolvermp
