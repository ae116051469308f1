// cuSOLVERMp engine: typed wrappers, status -> Status, and the per-device context cache.
//
// A context is one (mesh, grid shape, device): our own NCCL communicator, a cuSOLVERMp handle and
// its device grid. Contexts are created once, from Python, before the jitted call is built
// (jaxmg/_core/gpu.py) and live until the process exits; the FFI handler finds its context by the
// id it receives as an attribute.
//
// Built against cuSOLVERMp 0.8.0 (the last release that runs on NCCL < 2.29, see
// docs in the report); only Potrf/Potrs are used here.
#pragma once

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
#include <vector>

#include "common/status.h"
#include "layout/layout.h"

namespace jaxmg::cusolvermp {

// cudaDataType of an element type.
template <typename T>
struct DataType;
template <>
struct DataType<float> {
  static constexpr cudaDataType value = CUDA_R_32F;
};
template <>
struct DataType<double> {
  static constexpr cudaDataType value = CUDA_R_64F;
};
template <>
struct DataType<std::complex<float>> {
  static constexpr cudaDataType value = CUDA_C_32F;
};
template <>
struct DataType<std::complex<double>> {
  static constexpr cudaDataType value = CUDA_C_64F;
};

Status CudaCheck(cudaError_t e, const char* what);
Status NcclCheck(ncclResult_t r, const char* what);
Status SolverCheck(cusolverStatus_t s, const char* what);

#define JAXMG_CUDA(expr) JAXMG_RETURN_IF_ERROR(::jaxmg::cusolvermp::CudaCheck((expr), #expr))
#define JAXMG_NCCL(expr) JAXMG_RETURN_IF_ERROR(::jaxmg::cusolvermp::NcclCheck((expr), #expr))
#define JAXMG_SOLVER(expr) JAXMG_RETURN_IF_ERROR(::jaxmg::cusolvermp::SolverCheck((expr), #expr))

// Per-plan data a context keeps between calls: the plan, the row map on the device and the local
// tile permutations (computed once per (n, tile, pad)).
struct PlanState {
  layout::SymmetricPlan plan;
  int64_t* d_row_global = nullptr;  // engine-local row -> original global row (or -1), lr entries
  std::vector<int64_t> row_perm;    // LocalTilePermutation of rows (identity when not needed)
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
  cudaStream_t init_stream = nullptr;  // the handle's creation stream; calls use XLA's stream
  int32_t* pinned = nullptr;           // small pinned host buffer: status and mesh position
  std::vector<char> host_work;         // cuSOLVERMp host workspace
  std::map<std::tuple<int64_t, int64_t, bool>, std::unique_ptr<PlanState>> plans;
  std::mutex mu;  // one call at a time per context

  Status GetPlan(int64_t n, int64_t tile, bool pad, const PlanState** out);
};

struct ContextParams {
  const char* unique_id = nullptr;  // NCCL_UNIQUE_ID_BYTES bytes
  int nranks = 1, rank = 0, device = 0;
  int nprow = 1, npcol = 1;
  int mesh_rows = 1, mesh_cols = 1, mesh_u = 0, mesh_v = 0;
};

// Creates a context (collective over the nranks processes: NCCL init). Returns its id in *id.
Status CreateContext(const ContextParams& p, int64_t* id);
// The context with this id, or an error.
Status FindContext(int64_t id, Context** out);

// Mesh position (u, v) -> NCCL rank r = i * npcol + j of the engine grid position (i, j), from
// the same plan the handler uses. Fails for grids that need a redistribution.
Status RankOfMeshPosition(int mesh_rows, int mesh_cols, int u, int v, int* rank, int* nprow,
                          int* npcol);

// One line: cuSOLVERMp (header, runtime), NCCL (header, runtime), CUDA runtime and driver.
std::string Versions();

// Typed wrappers (uplo = lower, computeType = the data type).
template <typename T>
Status PotrfBufferSize(Context& c, int64_t n, T* a, cusolverMpMatrixDescriptor_t desc,
                       size_t* dev_bytes, size_t* host_bytes) {
  JAXMG_SOLVER(cusolverMpPotrf_bufferSize(c.handle, CUBLAS_FILL_MODE_LOWER, n, a, 1, 1, desc,
                                          DataType<T>::value, dev_bytes, host_bytes));
  return Status();
}

// *failed: the routine returned CUSOLVER_STATUS_INTERNAL_ERROR or _EXECUTION_FAILED, which
// cuSOLVERMp 0.8 does for a matrix that is not positive definite (seen on 2x H200: status 7 on
// every rank). The caller turns that into a positive status (NaN outputs) instead of an error, so
// that every rank still reaches the status consensus.
template <typename T>
Status Potrf(Context& c, int64_t n, T* a, cusolverMpMatrixDescriptor_t desc, void* d_work,
             size_t dev_bytes, int* d_info, bool* failed) {
  const cusolverStatus_t s =
      cusolverMpPotrf(c.handle, CUBLAS_FILL_MODE_LOWER, n, a, 1, 1, desc, DataType<T>::value,
                      d_work, dev_bytes, c.host_work.data(), c.host_work.size(), d_info);
  *failed = s == CUSOLVER_STATUS_INTERNAL_ERROR || s == CUSOLVER_STATUS_EXECUTION_FAILED;
  if (!*failed) JAXMG_RETURN_IF_ERROR(SolverCheck(s, "cusolverMpPotrf"));
  return Status();
}

template <typename T>
Status PotrsBufferSize(Context& c, int64_t n, int64_t nrhs, const T* a,
                       cusolverMpMatrixDescriptor_t desc_a, const T* b,
                       cusolverMpMatrixDescriptor_t desc_b, size_t* dev_bytes, size_t* host_bytes) {
  JAXMG_SOLVER(cusolverMpPotrs_bufferSize(c.handle, CUBLAS_FILL_MODE_LOWER, n, nrhs, a, 1, 1,
                                          desc_a, b, 1, 1, desc_b, DataType<T>::value, dev_bytes,
                                          host_bytes));
  return Status();
}

template <typename T>
Status Potrs(Context& c, int64_t n, int64_t nrhs, const T* a, cusolverMpMatrixDescriptor_t desc_a,
             T* b, cusolverMpMatrixDescriptor_t desc_b, void* d_work, size_t dev_bytes,
             int* d_info) {
  JAXMG_SOLVER(cusolverMpPotrs(c.handle, CUBLAS_FILL_MODE_LOWER, n, nrhs, a, 1, 1, desc_a, b, 1, 1,
                               desc_b, DataType<T>::value, d_work, dev_bytes, c.host_work.data(),
                               c.host_work.size(), d_info));
  return Status();
}

// RAII matrix descriptor (rsrc = csrc = 0, column-major local storage with leading dim lld).
class Descriptor {
 public:
  Descriptor() = default;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (desc_) cusolverMpDestroyMatrixDesc(desc_);
  }
  Status Create(Context& c, cudaDataType dt, int64_t m, int64_t n, int64_t mb, int64_t nb,
                int64_t lld) {
    JAXMG_SOLVER(cusolverMpCreateMatrixDesc(&desc_, c.grid, dt, m, n, mb, nb, 0, 0, lld));
    return Status();
  }
  cusolverMpMatrixDescriptor_t get() const { return desc_; }

 private:
  cusolverMpMatrixDescriptor_t desc_ = nullptr;
};

}  // namespace jaxmg::cusolvermp
