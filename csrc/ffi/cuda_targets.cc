// The GPU engine's FFI targets: the families (ffi/families.h) over cuSOLVERMp + cuBLASMp + NCCL,
// one target per routine of the list (routines/targets.h), and the C entry points of the context
// bootstrap (jaxmg/_core/gpu.py). The call's attributes carry `context`, the id of the
// NCCL/cuSOLVERMp context made for this mesh and device.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "common/config.h"
#include "common/scratch.h"
#include "engines/cusolvermp/cusolvermp.h"
#include "engines/cusolvermp/engine.h"
#include "ffi/dispatch.h"
#include "ffi/families.h"
#include "routines/targets.h"
#include "xla/ffi/api/ffi.h"

namespace jaxmg {
namespace {

namespace ffi = ::xla::ffi;
namespace mp = ::jaxmg::cusolvermp;

// XLA's scratch allocator as the engine's scratch source (common/scratch.h).
class XlaScratch final : public ScratchSource {
 public:
  explicit XlaScratch(ffi::ScratchAllocator& scratch) : scratch_(scratch) {}
  void* Allocate(size_t bytes, size_t align) override {
    auto p = scratch_.Allocate(bytes, align);
    return p.has_value() ? *p : nullptr;
  }

 private:
  ffi::ScratchAllocator& scratch_;
};

// The GPU engine's part of every handler (after the family's checks): this device's context of
// the mesh (call.context), the call agreement, the plan, the engine on XLA's stream and scratch
// memory, routine R. On GPUs the context's communicator fixes who is who; `ranks` is empty when
// the call was traced with only the abstract mesh, and then the shards' positions pick it.
struct GpuEngine {
  cudaStream_t stream;
  ffi::ScratchAllocator* scratch;
  int32_t device;

  template <class R>
  ffi::Error Run(const char* target, ffi::DataType dtype, ffi::Buffer<ffi::S32> position,
                 const ffi_util::FfiAttrs& call, CallAttrs& attrs, const CallBuffers<>& io) const {
    mp::Context* ctx = nullptr;
    Status s = mp::FindContext(call.context, device, &ctx);  // this device's of the mesh's
    if (!s.ok()) return ffi_util::ToFfi(s);
    if (ctx->mesh_rows != call.mesh_rows || ctx->mesh_cols != call.mesh_cols) {
      return ffi::Error::InvalidArgument(std::string(target) + ": context made for another mesh");
    }
    std::lock_guard<std::mutex> lock(ctx->mu);
    s = mp::CudaCheck(cudaSetDevice(ctx->device), "cudaSetDevice");
    if (s.ok()) {
      const CallFingerprint fp = Fingerprint(target, static_cast<int>(dtype), attrs);
      s = mp::AgreeOnCall(*ctx, fp.values, fp.names);
    }
    // Traced with only the abstract mesh (no `ranks`), the call's context assumed
    // jax.make_mesh's order of the devices: the shards' real positions pick the context of
    // their order.
    if (s.ok() && call.ranks.size() == 0) {
      s = mp::ContextOfPositions(*ctx, stream, position.typed_data(), R::kSymmetry,
                                 attrs.force_redistribute, &ctx);
    }
    attrs.u = ctx->mesh_u;  // checked against `position` in the first status agreement
    attrs.v = ctx->mesh_v;
    const mp::PlanState* state = nullptr;
    if (s.ok()) {
      s = ctx->GetPlan(R::kSymmetry, call.n, call.cols, call.tile, attrs.pad,
                       attrs.force_redistribute, &state);
    }
    if (!s.ok()) return ffi_util::ToFfi(s);
    XlaScratch source(*scratch);
    mp::Engine engine(*ctx, *state, stream, source, position.typed_data(), attrs.transposed,
                      attrs.config);
    return ffi_util::ToFfi(RunRoutine<R>(engine, dtype, target, attrs, io));
  }
};

}  // namespace
}  // namespace jaxmg

// One target per routine of the list (routines/targets.h): jaxmg_cusolvermp_<routine>, bound and
// checked as its family's (ffi/families.h) after the GPU's context (stream, scratch memory,
// device); a C++ exception becomes the call's error.
#define JAXMG_CUDA_TARGET(name, routine, family)                                                   \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(                                                                   \
      jaxmg_cusolvermp_##name,                                                                     \
      [](cudaStream_t stream, xla::ffi::ScratchAllocator scratch, int32_t device,                  \
         auto&&... args) {                                                                         \
        return ::jaxmg::ffi_util::NoThrow("jaxmg_cusolvermp_" #name, [&] {                         \
          return ::jaxmg::ffi_util::families::family::Call<::jaxmg::routines::routine>(            \
              "jaxmg_cusolvermp_" #name, ::jaxmg::GpuEngine{stream, &scratch, device},             \
              std::forward<decltype(args)>(args)...);                                              \
        });                                                                                        \
      },                                                                                           \
      ::jaxmg::ffi_util::families::family::Bind(xla::ffi::Ffi::Bind()                              \
                                                    .Ctx<xla::ffi::PlatformStream<cudaStream_t>>() \
                                                    .Ctx<xla::ffi::ScratchAllocator>()             \
                                                    .Ctx<xla::ffi::DeviceOrdinal>()));
JAXMG_ROUTINES(JAXMG_CUDA_TARGET)
#undef JAXMG_CUDA_TARGET

namespace {
void WriteError(const jaxmg::Status& s, char* err, int err_len) {
  if (err && err_len > 0) snprintf(err, err_len, "%s", s.message().c_str());
}
}  // namespace

extern "C" {

// The routines with a target here, a line each with its family and traits (routines/targets.h),
// for jaxmg/_core/native.py.
__attribute__((visibility("default"))) const char* jaxmg_cuda_routines() {
  return jaxmg::routines::RoutineListText();
}

// The configuration's fields, "name kind" lines (common/config.h kConfigFields), for
// jaxmg/_core/native.py.
__attribute__((visibility("default"))) const char* jaxmg_cuda_config_fields() {
  return jaxmg::ConfigFieldLines();
}

// NCCL unique id of a new communicator (128 bytes). Returns 0 on success.
__attribute__((visibility("default"))) int jaxmg_nccl_get_unique_id(char* out) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  std::memcpy(out, id.internal, NCCL_UNIQUE_ID_BYTES);
  return 0;
}

// Engine grid shape and NCCL rank of mesh position (u, v) for routines of a kind (bit 0:
// general, else symmetric; bit 1: forced redistribution). Returns 0, or 1 with a message.
__attribute__((visibility("default"))) int jaxmg_cuda_rank_of_mesh_position(
    int kind, int mesh_rows, int mesh_cols, int u, int v, int* rank, int* nprow, int* npcol,
    char* err, int err_len) {
  const auto symmetry =
      (kind & 1) ? jaxmg::layout::Symmetry::kGeneral : jaxmg::layout::Symmetry::kSymmetric;
  jaxmg::Status s = jaxmg::cusolvermp::RankOfMeshPosition(symmetry, (kind & 2) != 0, mesh_rows,
                                                          mesh_cols, u, v, rank, nprow, npcol);
  if (s.ok()) return 0;
  WriteError(s, err, err_len);
  return 1;
}

// Creates the NCCL communicators, cuSOLVERMp/cuBLASMp handles and grids of this process's
// `count` devices of one mesh: device devices[i] at mesh position (us[i], vs[i]) with NCCL rank
// ranks[i] of nranks. Collective over every device of the mesh, in all its processes. Returns
// the id the contexts share (> 0; the FFI handler picks its device's), or -1 with a message.
__attribute__((visibility("default"))) int64_t
jaxmg_cuda_create_contexts(const char* unique_id, int nranks, int count, const int* ranks,
                           const int* devices, const int* us, const int* vs, int nprow, int npcol,
                           int mesh_rows, int mesh_cols, char* err, int err_len) {
  std::vector<jaxmg::cusolvermp::ContextParams> ps(count > 0 ? count : 0);
  for (int i = 0; i < count; ++i) {
    auto& p = ps[i];
    p.unique_id = unique_id;
    p.nranks = nranks;
    p.rank = ranks[i];
    p.device = devices[i];
    p.nprow = nprow;
    p.npcol = npcol;
    p.mesh_rows = mesh_rows;
    p.mesh_cols = mesh_cols;
    p.mesh_u = us[i];
    p.mesh_v = vs[i];
  }
  int64_t id = -1;
  jaxmg::Status s = jaxmg::cusolvermp::CreateContexts(ps, &id);
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
