// The CPU engine's FFI targets: the solve skeleton (ffi/solve.h) over ScaLAPACK + MPI, one target
// per routine, and the C entry points jaxmg/_core/native.py uses to start MPI.
#include <cstdio>
#include <utility>

#include "engines/scalapack/engine.h"
#include "ffi/dispatch.h"
#include "ffi/solve.h"
#include "routines/targets.h"
#include "xla/ffi/api/ffi.h"

namespace jaxmg {
namespace {

namespace ffi = ::xla::ffi;
namespace sl = ::jaxmg::scalapack;

template <class R>
ffi::Error Solve(const char* target, ffi::AnyBuffer a, ffi::AnyBuffer b,
                 ffi::Buffer<ffi::S32> position, ffi::Buffer<ffi::S32> pivots_in,
                 ffi::Result<ffi::AnyBuffer> a_work, ffi::Result<ffi::AnyBuffer> x,
                 ffi::Result<ffi::AnyBuffer> logdet, ffi::Result<ffi::Buffer<ffi::S32>> status,
                 ffi::Result<ffi::AnyBuffer> sign, ffi::Result<ffi::Buffer<ffi::S32>> pivots_out,
                 ffi_util::CallAttrs call) {
  SolveAttrs attrs;
  SolveIo io;
  Status s =
      ffi_util::CheckSolve(target, a, b, position, pivots_in, a_work, x, logdet, status, sign,
                           pivots_out, call, ReadsFactor<R>::value, Rectangular<R>::value,
                           OwnSolution<R>::value, SecondMatrix<R>::value, &attrs, &io);
  if (s.ok()) s = ffi_util::DecodeConfig(target, call.config, &attrs.config);
  if (!s.ok()) return ffi::Error::InvalidArgument(s.message());
  attrs.u = position.typed_data()[0];  // host memory on the CPU
  attrs.v = position.typed_data()[1];
  layout::Plan plan;
  s = layout::MakePlan(R::kSymmetry, call.n, call.cols, static_cast<int>(call.mesh_rows),
                       static_cast<int>(call.mesh_cols), call.tile, attrs.pad,
                       attrs.force_redistribute, &plan);
  if (!s.ok()) return ffi_util::ToFfi(s);
  auto lock = sl::EngineLock();
  sl::Engine engine;
  s = sl::Engine::Create(attrs, plan,
                         Fingerprint(target, static_cast<int>(a.element_type()), attrs), &engine);
  if (s.ok()) s = RunSolve<R>(engine, a.element_type(), target, attrs, io);
  return ffi_util::ToFfi(s);
}

}  // namespace
}  // namespace jaxmg

// One target per routine of the list (routines/targets.h): jaxmg_scalapack_<routine>.
#define JAXMG_CPU_SOLVE_TARGET(name, routine, family) \
  JAXMG_SOLVE_TARGET(jaxmg_scalapack_##name, routine, \
                     jaxmg::ffi_util::BindSolve(xla::ffi::Ffi::Bind()));
JAXMG_ROUTINES(JAXMG_CPU_SOLVE_TARGET)
#undef JAXMG_CPU_SOLVE_TARGET

extern "C" {
// The routines with a target here, "name family" lines (routines/targets.h), for
// jaxmg/_core/native.py.
__attribute__((visibility("default"))) const char* jaxmg_cpu_routines() {
  return JAXMG_ROUTINE_LIST;
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
