// The CPU engine's FFI targets: the families (ffi/families.h) over ScaLAPACK + MPI, one target
// per routine of the list (routines/targets.h), and the C entry points jaxmg/_core/native.py uses
// to start MPI.
#include <cstdio>
#include <utility>

#include "common/config.h"
#include "engines/scalapack/engine.h"
#include "ffi/dispatch.h"
#include "ffi/families.h"
#include "routines/targets.h"
#include "xla/ffi/api/ffi.h"

namespace jaxmg {
namespace {

namespace ffi = ::xla::ffi;
namespace sl = ::jaxmg::scalapack;

// The CPU engine's part of every handler (after the family's checks): the mesh position (host
// memory), the layout plan, the engine for this call (its MPI grid), routine R.
struct CpuEngine {
  template <class R>
  ffi::Error Run(const char* target, ffi::DataType dtype, ffi::Buffer<ffi::S32> position,
                 const ffi_util::FfiAttrs& call, CallAttrs& attrs, const CallBuffers<>& io) const {
    attrs.u = position.typed_data()[0];
    attrs.v = position.typed_data()[1];
    layout::Plan plan;
    Status s = layout::MakePlan(R::kSymmetry, call.n, call.cols, static_cast<int>(call.mesh_rows),
                                static_cast<int>(call.mesh_cols), call.tile, attrs.pad,
                                attrs.force_redistribute, &plan);
    if (!s.ok()) return ffi_util::ToFfi(s);
    auto lock = sl::EngineLock();
    sl::Engine engine;
    s = sl::Engine::Create(attrs, plan, Fingerprint(target, static_cast<int>(dtype), attrs),
                           &engine);
    if (s.ok()) s = RunRoutine<R>(engine, dtype, target, attrs, io);
    return ffi_util::ToFfi(s);
  }
};

}  // namespace
}  // namespace jaxmg

// One target per routine of the list (routines/targets.h): jaxmg_scalapack_<routine>, bound and
// checked as its family's (ffi/families.h); a C++ exception becomes the call's error.
#define JAXMG_CPU_TARGET(name, routine, family)                                         \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(                                                        \
      jaxmg_scalapack_##name,                                                           \
      [](auto&&... args) {                                                              \
        return ::jaxmg::ffi_util::NoThrow("jaxmg_scalapack_" #name, [&] {               \
          return ::jaxmg::ffi_util::families::family::Call<::jaxmg::routines::routine>( \
              "jaxmg_scalapack_" #name, ::jaxmg::CpuEngine{},                           \
              std::forward<decltype(args)>(args)...);                                   \
        });                                                                             \
      },                                                                                \
      ::jaxmg::ffi_util::families::family::Bind(::xla::ffi::Ffi::Bind()));
JAXMG_ROUTINES(JAXMG_CPU_TARGET)
#undef JAXMG_CPU_TARGET

extern "C" {
// The routines with a target here, a line each with its family and traits (routines/targets.h),
// for jaxmg/_core/native.py.
__attribute__((visibility("default"))) const char* jaxmg_cpu_routines() {
  return jaxmg::routines::RoutineListText();
}

// The configuration's fields, "name kind" lines (common/config.h kConfigFields), for
// jaxmg/_core/native.py.
__attribute__((visibility("default"))) const char* jaxmg_cpu_config_fields() {
  return jaxmg::ConfigFieldLines();
}
__attribute__((visibility("default"))) int jaxmg_mpi_init(char* err, int err_len) {
  auto lock = jaxmg::scalapack::EngineLock();
  jaxmg::Status s = jaxmg::scalapack::EnsureMpi();
  if (s.ok()) return 0;
  if (err && err_len > 0) {
    snprintf(err, err_len, "%s", s.message().c_str());
  }
  return 1;
}
__attribute__((visibility("default"))) int jaxmg_mpi_rank() {
  return jaxmg::scalapack::WorldRank();
}
__attribute__((visibility("default"))) int jaxmg_mpi_size() {
  return jaxmg::scalapack::WorldSize();
}
__attribute__((visibility("default"))) void jaxmg_mpi_finalize() {
  jaxmg::scalapack::FinalizeMpi();
}
}
