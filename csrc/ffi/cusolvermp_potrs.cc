// jaxmg_cusolvermp_potrs: Cholesky solve with log-determinant on the GPU engine (cuSOLVERMp).
//
// The same operands, results and attributes as jaxmg_scalapack_potrs, plus `context` (the id of
// the NCCL/cuSOLVERMp context jaxmg/_core/gpu.py created for this mesh and device). Runs once per
// device on its local shard, on XLA's stream:
//   plan -> engine-local matrix (in place; padded copy when T does not divide the shard; local
//   tile permutation on non-square grids) -> potrf -> status consensus (NCCL max) -> logdet ->
//   right-hand side in (zero-filled n x nrhs buffer summed over ranks) -> potrs -> solution out.
// Device workspace comes from XLA's ScratchAllocator. Grids that need a redistribution are
// refused (cuSOLVERMp 0.8 has no Gemr2D).
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <climits>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/kernels.h"
#include "engines/cusolvermp/cusolvermp.h"
#include "ffi/dispatch.h"
#include "ffi/potrs_binding.h"
#include "layout/layout.h"
#include "xla/ffi/api/ffi.h"

namespace jaxmg {
namespace {

namespace ffi = ::xla::ffi;
namespace mp = ::jaxmg::cusolvermp;
using layout::CyclicLocalExtent;
using layout::SymmetricPlan;

template <typename T>
struct Kind;
template <>
struct Kind<float> {
  static constexpr cuda::Dtype dtype = cuda::Dtype::kF32;
  static constexpr ncclDataType_t nccl = ncclFloat32;
  static constexpr int parts = 1;
};
template <>
struct Kind<double> {
  static constexpr cuda::Dtype dtype = cuda::Dtype::kF64;
  static constexpr ncclDataType_t nccl = ncclFloat64;
  static constexpr int parts = 1;
};
template <>
struct Kind<std::complex<float>> {
  static constexpr cuda::Dtype dtype = cuda::Dtype::kC64;
  static constexpr ncclDataType_t nccl = ncclFloat32;
  static constexpr int parts = 2;
};
template <>
struct Kind<std::complex<double>> {
  static constexpr cuda::Dtype dtype = cuda::Dtype::kC128;
  static constexpr ncclDataType_t nccl = ncclFloat64;
  static constexpr int parts = 2;
};

// Device scratch from XLA's allocator; no cudaMalloc per call. XLA accepts alignments up to 16
// (its allocator hands out 256-byte aligned blocks anyway).
class Scratch {
 public:
  explicit Scratch(ffi::ScratchAllocator& alloc) : alloc_(alloc) {}
  Status Get(size_t bytes, void** out) {
    auto p = alloc_.Allocate(std::max<size_t>(bytes, 256), 16);
    if (!p.has_value()) {
      return Status::Error("jaxmg: XLA could not provide " + std::to_string(bytes) +
                           " bytes of GPU scratch (lower XLA_PYTHON_CLIENT_MEM_FRACTION to leave "
                           "room, or use a smaller tile)");
    }
    *out = *p;
    return Status();
  }

 private:
  ffi::ScratchAllocator& alloc_;
};

// Tile permutations on the device: the layout core's cycle-following moves, one tile of scratch.
Status PermuteColumnTilesDevice(char* a, int64_t ld, int64_t tile, size_t es,
                                const std::vector<int64_t>& perm, char* scratch,
                                cudaStream_t stream) {
  const size_t bytes = es * ld * tile;
  auto at = [&](int64_t j) { return j == layout::kScratchTile ? scratch : a + j * bytes; };
  for (const layout::TileMove& m : layout::TileMoves(perm)) {
    JAXMG_CUDA(cudaMemcpyAsync(at(m.dst), at(m.src), bytes, cudaMemcpyDeviceToDevice, stream));
  }
  return Status();
}

Status PermuteRowTilesDevice(char* a, int64_t ld, int64_t cols, int64_t tile, size_t es,
                             const std::vector<int64_t>& perm, char* scratch, cudaStream_t stream) {
  const size_t width = es * tile;
  auto at = [&](int64_t j) { return j == layout::kScratchTile ? scratch : a + j * width; };
  auto pitch = [&](int64_t j) { return j == layout::kScratchTile ? width : es * ld; };
  for (const layout::TileMove& m : layout::TileMoves(perm)) {
    JAXMG_CUDA(cudaMemcpy2DAsync(at(m.dst), pitch(m.dst), at(m.src), pitch(m.src), width, cols,
                                 cudaMemcpyDeviceToDevice, stream));
  }
  return Status();
}

struct Buffers {
  void* a_work;
  const void* b;
  const int32_t* position;
  void* x;
  void* logdet;
  int32_t* status;
  int64_t nrhs;
};

template <typename T>
Status PotrsImpl(mp::Context& ctx, const mp::PlanState& ps, cudaStream_t stream, Scratch& scratch,
                 const Buffers& buf) {
  using K = Kind<T>;
  const SymmetricPlan& plan = ps.plan;
  const size_t es = sizeof(T);
  const int u = ctx.mesh_u, v = ctx.mesh_v;
  const int nprow = ctx.nprow, npcol = ctx.npcol, myrow = ctx.myrow, mycol = ctx.mycol;
  const int64_t t = plan.tile, np = plan.padded_n, nrhs = buf.nrhs;
  const int64_t lr = layout::EngineLocalExtent(plan, plan.rows, myrow);
  const int64_t lc = layout::EngineLocalExtent(plan, plan.cols, mycol);
  const int64_t shard_rows = plan.n / plan.mesh_rows;
  JAXMG_SOLVER(cusolverMpSetStream(ctx.handle, stream));

  // 1. The engine-local matrix: the shard itself, or a padded copy; then local tile permutation.
  char* work = static_cast<char*>(buf.a_work);
  if (plan.padded) {
    void* p = nullptr;
    JAXMG_RETURN_IF_ERROR(scratch.Get(es * lr * lc, &p));
    work = static_cast<char*>(p);
    JAXMG_CUDA(cuda::PadCopy(K::dtype, buf.a_work, plan.rows.shard, plan.cols.shard, work, lr, lc,
                             plan.super_extent, plan.padded_super, static_cast<int64_t>(v) * lr,
                             static_cast<int64_t>(u) * lc, stream));
  }
  if (plan.rows.local_permutation || plan.cols.local_permutation) {
    void* p = nullptr;
    JAXMG_RETURN_IF_ERROR(scratch.Get(es * t * std::max(lr, lc), &p));
    if (plan.rows.local_permutation) {
      JAXMG_RETURN_IF_ERROR(
          PermuteRowTilesDevice(work, lr, lc, t, es, ps.row_perm, static_cast<char*>(p), stream));
    }
    if (plan.cols.local_permutation) {
      JAXMG_RETURN_IF_ERROR(
          PermuteColumnTilesDevice(work, lr, t, es, ps.col_perm, static_cast<char*>(p), stream));
    }
  }

  // Right-hand side storage (needed for the workspace query): lr x lbc, leading dim lr.
  const int64_t lbc = CyclicLocalExtent(nrhs, t, mycol, npcol);
  void* local_b = nullptr;
  JAXMG_RETURN_IF_ERROR(scratch.Get(es * std::max<int64_t>(lr * lbc, 1), &local_b));

  mp::Descriptor desc_a, desc_b;
  JAXMG_RETURN_IF_ERROR(desc_a.Create(ctx, mp::DataType<T>::value, np, np, t, t, lr));
  JAXMG_RETURN_IF_ERROR(desc_b.Create(ctx, mp::DataType<T>::value, np, nrhs, t, t, lr));
  size_t f_dev = 0, f_host = 0, s_dev = 0, s_host = 0;
  T* a_ptr = reinterpret_cast<T*>(work);
  T* b_ptr = static_cast<T*>(local_b);
  JAXMG_RETURN_IF_ERROR(mp::PotrfBufferSize<T>(ctx, np, a_ptr, desc_a.get(), &f_dev, &f_host));
  JAXMG_RETURN_IF_ERROR(mp::PotrsBufferSize<T>(ctx, np, nrhs, a_ptr, desc_a.get(), b_ptr,
                                               desc_b.get(), &s_dev, &s_host));
  const size_t dev_bytes = std::max(f_dev, s_dev);
  const size_t host_bytes = std::max<size_t>(std::max(f_host, s_host), 1);
  if (ctx.host_work.size() < host_bytes) ctx.host_work.resize(host_bytes);
  void* d_work = nullptr;
  JAXMG_RETURN_IF_ERROR(scratch.Get(dev_bytes, &d_work));
  void* small = nullptr;  // [0]: info, [1]: solve info, then 16 bytes for the logdet sum
  JAXMG_RETURN_IF_ERROR(scratch.Get(64, &small));
  int* d_info = static_cast<int*>(small);
  void* d_sum = static_cast<char*>(small) + 16;
  JAXMG_CUDA(cudaMemsetAsync(small, 0, 64, stream));

  // 2. Factor; every rank agrees on the status (max over ranks).
  bool failed = false;
  JAXMG_RETURN_IF_ERROR(
      mp::Potrf<T>(ctx, np, a_ptr, desc_a.get(), d_work, dev_bytes, d_info, &failed));
  if (failed) {
    // The engine gave up (not positive definite): keep the order it reported in info when it
    // did, else report np + 1 ("failed, order unknown"). Either way the status is positive.
    JAXMG_CUDA(
        cudaMemcpyAsync(ctx.pinned, d_info, sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
    JAXMG_CUDA(cudaStreamSynchronize(stream));
    if (ctx.pinned[0] <= 0) {
      ctx.pinned[0] = static_cast<int32_t>(std::min<int64_t>(np + 1, INT32_MAX));
      JAXMG_CUDA(
          cudaMemcpyAsync(d_info, ctx.pinned, sizeof(int32_t), cudaMemcpyHostToDevice, stream));
    }
  }
  JAXMG_NCCL(ncclAllReduce(d_info, d_info, 1, ncclInt32, ncclMax, ctx.comm, stream));
  JAXMG_CUDA(
      cudaMemcpyAsync(buf.status, d_info, sizeof(int32_t), cudaMemcpyDeviceToDevice, stream));
  JAXMG_CUDA(cudaMemcpyAsync(ctx.pinned, d_info, sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  JAXMG_CUDA(cudaMemcpyAsync(ctx.pinned + 1, buf.position, 2 * sizeof(int32_t),
                             cudaMemcpyDeviceToHost, stream));
  JAXMG_CUDA(cudaStreamSynchronize(stream));
  const int info = ctx.pinned[0];
  if (ctx.pinned[1] != u || ctx.pinned[2] != v) {
    return Status::Error("jaxmg GPU context was made for mesh position (" + std::to_string(u) +
                         ", " + std::to_string(v) + ") but this shard is at (" +
                         std::to_string(ctx.pinned[1]) + ", " + std::to_string(ctx.pinned[2]) +
                         "): pass mesh=... (the concrete mesh) to jaxmg.potrs");
  }
  if (info != 0) {  // the same branch on every rank: info is the consensus
    JAXMG_CUDA(cuda::FinishLogdet(K::dtype, d_sum, false, buf.logdet, stream));
    JAXMG_CUDA(cuda::FillNan(K::dtype, buf.x, shard_rows * nrhs, stream));
    return Status();
  }

  // 3. log det A = 2 sum log L_ii (padding contributes log 1 = 0).
  JAXMG_CUDA(
      cuda::LogDiagSum(K::dtype, work, lr, lc, t, nprow, npcol, myrow, mycol, d_sum, stream));
  JAXMG_NCCL(ncclAllReduce(d_sum, d_sum, 1, K::nccl, ncclSum, ctx.comm, stream));
  JAXMG_CUDA(cuda::FinishLogdet(K::dtype, d_sum, true, buf.logdet, stream));

  // 4. Right-hand side: the engine holds conj(A), so it solves conj(A) y = conj(b).
  void* full = nullptr;
  const size_t full_bytes = es * plan.n * nrhs;
  JAXMG_RETURN_IF_ERROR(scratch.Get(full_bytes, &full));
  char* mine = static_cast<char*>(full) + es * u * shard_rows * nrhs;
  JAXMG_CUDA(cudaMemsetAsync(full, 0, full_bytes, stream));
  if (v == 0) {
    JAXMG_CUDA(
        cudaMemcpyAsync(mine, buf.b, es * shard_rows * nrhs, cudaMemcpyDeviceToDevice, stream));
  }
  const size_t reals = static_cast<size_t>(plan.n * nrhs * K::parts);
  JAXMG_NCCL(ncclAllReduce(full, full, reals, K::nccl, ncclSum, ctx.comm, stream));
  JAXMG_CUDA(cuda::GatherRhs(K::dtype, full, nrhs, ps.d_row_global, lr, lbc, t, npcol, mycol,
                             local_b, stream));

  // 5. Solve and bring the solution back to the JAX layout of b.
  JAXMG_RETURN_IF_ERROR(mp::Potrs<T>(ctx, np, nrhs, a_ptr, desc_a.get(), b_ptr, desc_b.get(),
                                     d_work, dev_bytes, d_info + 1));
  JAXMG_CUDA(cudaMemsetAsync(full, 0, full_bytes, stream));
  JAXMG_CUDA(cuda::ScatterRhs(K::dtype, local_b, nrhs, ps.d_row_global, lr, lbc, t, npcol, mycol,
                              full, stream));
  JAXMG_NCCL(ncclAllReduce(full, full, reals, K::nccl, ncclSum, ctx.comm, stream));
  JAXMG_CUDA(
      cudaMemcpyAsync(buf.x, mine, es * shard_rows * nrhs, cudaMemcpyDeviceToDevice, stream));
  return Status();
}

ffi::Error PotrsDispatch(cudaStream_t stream, ffi::ScratchAllocator scratch_alloc, ffi::AnyBuffer a,
                         ffi::AnyBuffer b, ffi::Buffer<ffi::S32> position,
                         ffi::Result<ffi::AnyBuffer> a_work, ffi::Result<ffi::AnyBuffer> x,
                         ffi::Result<ffi::AnyBuffer> logdet,
                         ffi::Result<ffi::Buffer<ffi::S32>> status, int64_t n, int64_t mesh_rows,
                         int64_t mesh_cols, int64_t tile, int64_t pad,
                         ffi::Span<const int64_t> ranks, int64_t context) {
  (void)ranks;  // the context's communicator already fixes who is who
  if (a.element_type() != b.element_type() || a.element_type() != x->element_type()) {
    return ffi::Error::InvalidArgument("jaxmg_cusolvermp_potrs: a, b and x must share a dtype");
  }
  auto b_dims = b.dimensions();
  if (b_dims.size() != 2) {
    return ffi::Error::InvalidArgument("jaxmg_cusolvermp_potrs: b must be 2-D");
  }
  if (position.element_count() != 2) {
    return ffi::Error::InvalidArgument("jaxmg_cusolvermp_potrs: position must hold (u, v)");
  }
  mp::Context* ctx = nullptr;
  Status s = mp::FindContext(context, &ctx);
  if (!s.ok()) return ffi_util::ToFfi(s);
  if (ctx->mesh_rows != mesh_rows || ctx->mesh_cols != mesh_cols) {
    return ffi::Error::InvalidArgument("jaxmg_cusolvermp_potrs: context made for another mesh");
  }
  std::lock_guard<std::mutex> lock(ctx->mu);
  s = mp::CudaCheck(cudaSetDevice(ctx->device), "cudaSetDevice");
  if (!s.ok()) return ffi_util::ToFfi(s);
  const mp::PlanState* ps = nullptr;
  s = ctx->GetPlan(n, tile, pad != 0, &ps);
  if (!s.ok()) return ffi_util::ToFfi(s);
  Scratch scratch(scratch_alloc);
  Buffers buf{a_work->untyped_data(),
              b.untyped_data(),
              position.typed_data(),
              x->untyped_data(),
              logdet->untyped_data(),
              status->typed_data(),
              b_dims[1]};
  s = ffi_util::DispatchFloating(a.element_type(), "potrs", [&](auto tag) {
    using T = typename decltype(tag)::type;
    return PotrsImpl<T>(*ctx, *ps, stream, scratch, buf);
  });
  return ffi_util::ToFfi(s);
}

}  // namespace
}  // namespace jaxmg

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    jaxmg_cusolvermp_potrs, jaxmg::PotrsDispatch,
    jaxmg::ffi_util::BindPotrs(xla::ffi::Ffi::Bind()
                                   .Ctx<xla::ffi::PlatformStream<cudaStream_t>>()
                                   .Ctx<xla::ffi::ScratchAllocator>())
        .Attr<int64_t>("context"));  // the NCCL/cuSOLVERMp context (jaxmg/_core/gpu.py)

namespace {
void WriteError(const jaxmg::Status& s, char* err, int err_len) {
  if (err && err_len > 0) snprintf(err, err_len, "%s", s.message().c_str());
}
}  // namespace

extern "C" {

// NCCL unique id of a new communicator (128 bytes). Returns 0 on success.
__attribute__((visibility("default"))) int jaxmg_nccl_get_unique_id(char* out) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  std::memcpy(out, id.internal, NCCL_UNIQUE_ID_BYTES);
  return 0;
}

// Engine grid shape and NCCL rank of mesh position (u, v). Returns 0, or 1 with a message.
__attribute__((visibility("default"))) int jaxmg_cuda_rank_of_mesh_position(
    int mesh_rows, int mesh_cols, int u, int v, int* rank, int* nprow, int* npcol, char* err,
    int err_len) {
  jaxmg::Status s =
      jaxmg::cusolvermp::RankOfMeshPosition(mesh_rows, mesh_cols, u, v, rank, nprow, npcol);
  if (s.ok()) return 0;
  WriteError(s, err, err_len);
  return 1;
}

// Creates the NCCL communicator, cuSOLVERMp handle and grid of one (mesh, device). Collective
// over the nranks processes. Returns the context id (> 0), or -1 with a message in err.
__attribute__((visibility("default"))) int64_t jaxmg_cuda_create_context(
    const char* unique_id, int nranks, int rank, int device, int nprow, int npcol, int mesh_rows,
    int mesh_cols, int mesh_u, int mesh_v, char* err, int err_len) {
  jaxmg::cusolvermp::ContextParams p;
  p.unique_id = unique_id;
  p.nranks = nranks;
  p.rank = rank;
  p.device = device;
  p.nprow = nprow;
  p.npcol = npcol;
  p.mesh_rows = mesh_rows;
  p.mesh_cols = mesh_cols;
  p.mesh_u = mesh_u;
  p.mesh_v = mesh_v;
  int64_t id = -1;
  jaxmg::Status s = jaxmg::cusolvermp::CreateContext(p, &id);
  if (s.ok()) return id;
  WriteError(s, err, err_len);
  return -1;
}

// One line of versions for `python -m jaxmg info`. Returns 0.
__attribute__((visibility("default"))) int jaxmg_cuda_versions(char* buf, int len) {
  if (!buf || len <= 0) return 1;
  snprintf(buf, len, "%s", jaxmg::cusolvermp::Versions().c_str());
  return 0;
}
}
