// The handler skeleton of the solve family (potrs, lu_solve, ...), written once over an engine.
//
// Every solve target binds the same operands, results and attributes (BindSolve), so the CPU and
// GPU targets take the same call from jaxmg/_core/routine.py. A handler:
//   1. checks every buffer against the attributes (a bad attribute is an out-of-bounds access)
//      and decodes the call's configuration (ffi/config.h: algorithm choices, tuning, test hooks);
//   2. makes the layout plan (relabel, pad or redistribute; symmetric or general);
//   3. builds the engine for this call (E, from the engine's own bindings: grid, stream, scratch);
//   4. dispatches the dtype and runs the routine R<E, T> (csrc/routines/), which calls only the
//      engine's typed steps (routines/contract.h): Prepare, factor (status agreed by every rank),
//      log-determinant, right-hand side in, solve, solution out.
#pragma once

#include <complex>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/deferred.h"
#include "ffi/config.h"
#include "ffi/dispatch.h"
#include "layout/layout.h"
#include "routines/contract.h"
#include "xla/ffi/api/ffi.h"

namespace jaxmg::ffi_util {

// The call's attributes, every target's the same, decoded as one struct from the keywords
// jaxmg/_core/routine.py's _local passes (XLA_FFI_REGISTER_STRUCT_ATTR_DECODING below).
struct CallAttrs {
  int64_t n;     // rows of the matrix handed (its order for square routines)
  int64_t cols;  // its columns (n for the square routines)
  int64_t mesh_rows, mesh_cols;
  int64_t tile;
  int64_t pad;
  int64_t force_redistribute;             // redistribute even where relabeling would do
  int64_t transposed;                     // the JAX matrix handed is aᵀ (aᴴ)
  ::xla::ffi::Span<const int64_t> ranks;  // MPI rank per mesh position, or empty
  int64_t thread;                         // the calling Python thread's tag
  int64_t check_symmetry;
  ::xla::ffi::Dictionary config;  // jaxmg.config (ffi/config.h DecodeConfig)
  int64_t variant;                // the routine's own (SolveAttrs::variant)
  int64_t context;                // GPUs: the id of the mesh's NCCL/cuSOLVERMp context; CPUs: 0
};

}  // namespace jaxmg::ffi_util

XLA_FFI_REGISTER_STRUCT_ATTR_DECODING(
    ::jaxmg::ffi_util::CallAttrs, ::xla::ffi::StructMember<int64_t>("n"),
    ::xla::ffi::StructMember<int64_t>("cols"), ::xla::ffi::StructMember<int64_t>("mesh_rows"),
    ::xla::ffi::StructMember<int64_t>("mesh_cols"), ::xla::ffi::StructMember<int64_t>("tile"),
    ::xla::ffi::StructMember<int64_t>("pad"),
    ::xla::ffi::StructMember<int64_t>("force_redistribute"),
    ::xla::ffi::StructMember<int64_t>("transposed"),
    ::xla::ffi::StructMember<::xla::ffi::Span<const int64_t>>("ranks"),
    ::xla::ffi::StructMember<int64_t>("thread"),
    ::xla::ffi::StructMember<int64_t>("check_symmetry"),
    ::xla::ffi::StructMember<::xla::ffi::Dictionary>("config"),
    ::xla::ffi::StructMember<int64_t>("variant"), ::xla::ffi::StructMember<int64_t>("context"));

namespace jaxmg {

namespace ffi_util {

template <typename Binding>
auto BindSolve(Binding binding) {
  namespace ffi = ::xla::ffi;
  return std::move(binding)
      .template Arg<ffi::AnyBuffer>()         // a: local shard (n/Pr x n/Pc)
      .template Arg<ffi::AnyBuffer>()         // b: local rows (n/Pr x nrhs)
      .template Arg<ffi::Buffer<ffi::S32>>()  // (u, v): this shard's mesh position
      .template Arg<ffi::Buffer<ffi::S32>>()  // pivots of a kept LU factor (else one unused)
      .template Ret<ffi::AnyBuffer>()         // a_work: aliases a, or a buffer of its own
      .template Ret<ffi::AnyBuffer>()         // x: like b
      .template Ret<ffi::AnyBuffer>()         // logdet (log |det| for LU): real scalar
      .template Ret<ffi::Buffer<ffi::S32>>()  // status
      .template Ret<ffi::AnyBuffer>()         // sign of det (LU routines): scalar of a's dtype
      .template Ret<ffi::Buffer<ffi::S32>>()  // pivots out (LU factor; else one unused)
      .template Attrs<CallAttrs>();           // the call's attributes, as one struct
}

// Reads the attributes, checks the buffers against them and fills attrs/io (the mesh position
// is read by the caller: on the CPU it is host memory, on the GPU device memory).
inline Status CheckSolve(const char* target, ::xla::ffi::AnyBuffer a, ::xla::ffi::AnyBuffer b,
                         ::xla::ffi::Buffer<::xla::ffi::S32> position,
                         ::xla::ffi::Buffer<::xla::ffi::S32> pivots_in,
                         ::xla::ffi::Result<::xla::ffi::AnyBuffer> a_work,
                         ::xla::ffi::Result<::xla::ffi::AnyBuffer> x,
                         ::xla::ffi::Result<::xla::ffi::AnyBuffer> logdet,
                         ::xla::ffi::Result<::xla::ffi::Buffer<::xla::ffi::S32>> status,
                         ::xla::ffi::Result<::xla::ffi::AnyBuffer> sign,
                         ::xla::ffi::Result<::xla::ffi::Buffer<::xla::ffi::S32>> pivots_out,
                         const CallAttrs& call, bool reads_factor, bool rectangular,
                         bool own_solution, bool second_matrix, SolveAttrs* attrs, SolveIo* io) {
  namespace ffi = ::xla::ffi;
  const std::string name(target);
  attrs->n = call.n;
  attrs->cols = call.cols;
  attrs->mesh_rows = call.mesh_rows;
  attrs->mesh_cols = call.mesh_cols;
  attrs->tile = call.tile;
  attrs->pad = call.pad != 0;
  attrs->force_redistribute = call.force_redistribute != 0;
  attrs->transposed = call.transposed != 0;
  attrs->ranks.assign(call.ranks.begin(), call.ranks.end());
  attrs->thread = call.thread;
  attrs->check_symmetry = call.check_symmetry != 0;
  attrs->variant = call.variant;
  auto fail = [&](const std::string& what) { return Status::Error(name + ": " + what); };
  if (attrs->mesh_rows <= 0 || attrs->mesh_cols <= 0 || attrs->n < 0 || attrs->cols < 0 ||
      (!rectangular && attrs->cols != attrs->n)) {
    return fail("bad mesh or order");
  }
  if (!attrs->ranks.empty() &&
      static_cast<int64_t>(attrs->ranks.size()) != attrs->mesh_rows * attrs->mesh_cols) {
    return fail("ranks has the wrong size");
  }
  if (a.element_type() != b.element_type() || a.element_type() != x->element_type() ||
      a.element_type() != a_work->element_type() || a.element_type() != sign->element_type()) {
    return fail("a, b, x and sign must share a dtype");
  }
  if (sign->element_count() != 1) return fail("sign must be a scalar");
  const auto a_dims = a.dimensions(), b_dims = b.dimensions(), x_dims = x->dimensions();
  const int64_t shard_rows = attrs->n / attrs->mesh_rows;
  const int64_t shard_cols = attrs->cols / attrs->mesh_cols;
  // A kept factor may be a padded engine matrix: the engine checks its size (Adopt).
  if (a_dims.size() != 2 ||
      (!reads_factor && (a_dims[0] != shard_rows || a_dims[1] != shard_cols))) {
    return fail("the shard of a is not (n/mesh_rows, cols/mesh_cols)");
  }
  // b and x keep the caller's row sharding: over the engine mesh's columns when the matrix was
  // handed transposed (no XLA collective moves them before the call).
  const int64_t rhs_rows = attrs->transposed ? shard_cols : shard_rows;
  if (second_matrix) {  // b: a second matrix, sharded like a
    if (b_dims.size() != 2 || b_dims[0] != shard_rows || b_dims[1] != shard_cols ||
        x_dims.size() != 2) {
      return fail("b must be a second matrix shard, (n/mesh_rows, cols/mesh_cols)");
    }
  } else if (b_dims.size() != 2 || b_dims[0] != rhs_rows || x_dims.size() != 2) {
    return fail("b must be (n/mesh_rows, nrhs), or (cols/mesh_cols, nrhs) when transposed");
  }
  if (!own_solution && (x_dims[0] != b_dims[0] || x_dims[1] != b_dims[1])) {
    return fail("x must have b's shape");
  }
  // A rectangular routine's x has n rows (the matrix handed is n x cols, the engine's cols x n):
  // split like b's, or all of them on every device.
  const int64_t x_split = attrs->n / (attrs->transposed ? attrs->mesh_cols : attrs->mesh_rows);
  if (own_solution && x_dims[0] != x_split && x_dims[0] != attrs->n) {
    return fail("x must have n/" + std::string(attrs->transposed ? "mesh_cols" : "mesh_rows") +
                " or n rows");
  }
  if (position.element_count() != 2) return fail("position must hold (u, v)");
  if (logdet->element_count() != 1 || status->element_count() != 1) {
    return fail("logdet and status must be scalars");
  }
  attrs->nrhs = b_dims[1];
  io->a_out = a_work->untyped_data();
  io->a_out_count = static_cast<int64_t>(a_work->element_count());
  // Aliased (XLA hands the same buffer), or an output of its own (a factor, or unused).
  const bool aliased = io->a_out == a.untyped_data();
  io->a = aliased ? io->a_out : const_cast<void*>(a.untyped_data());
  io->a_in = io->a;
  io->sign = sign->untyped_data();
  io->pivots_in = pivots_in.typed_data();
  io->pivots_in_count = static_cast<int64_t>(pivots_in.element_count());
  io->pivots_out = pivots_out->typed_data();
  io->pivots_out_count = static_cast<int64_t>(pivots_out->element_count());
  io->b = b.untyped_data();
  io->x = x->untyped_data();
  io->logdet = logdet->untyped_data();
  io->status = status->typed_data();
  io->nrhs = b_dims[1];
  io->x_rows = x_dims[0];
  io->x_count = x_dims[0] * x_dims[1];
  io->a_count = static_cast<int64_t>(a.element_count());
  return Status();
}

}  // namespace ffi_util

// Whether routine R reads a kept factor as `a` (R::kReadsFactor, false when absent).
template <class R, class = void>
struct ReadsFactor : std::false_type {};
template <class R>
struct ReadsFactor<R, std::void_t<decltype(R::kReadsFactor)>>
    : std::bool_constant<R::kReadsFactor> {};

// Whether routine R takes a rectangular matrix (R::kRectangular, false when absent): the matrix
// handed is n x cols and x has n rows (see CheckSolve).
template <class R, class = void>
struct Rectangular : std::false_type {};
template <class R>
struct Rectangular<R, std::void_t<decltype(R::kRectangular)>>
    : std::bool_constant<R::kRectangular> {};

// Whether routine R's x is its own (R::kOwnSolution, or a rectangular routine): n rows split
// like b's or whole on every device, not b's shape (eigenvalues, R, least-squares solutions).
template <class R, class = void>
struct OwnSolution : Rectangular<R> {};
template <class R>
struct OwnSolution<R, std::void_t<decltype(R::kOwnSolution)>>
    : std::bool_constant<R::kOwnSolution || Rectangular<R>::value> {};

// Whether routine R takes a second matrix as b (R::kSecondMatrix, false when absent): b is a
// shard of an n x cols matrix sharded like a (MatrixIn), not a right-hand side.
template <class R, class = void>
struct SecondMatrix : std::false_type {};
template <class R>
struct SecondMatrix<R, std::void_t<decltype(R::kSecondMatrix)>>
    : std::bool_constant<R::kSecondMatrix> {};

// Runs routine R (a struct with `static constexpr layout::Symmetry kSymmetry` and
// `template <class E, class T> static Status Run(E&, const SolveAttrs&, const SolveIo&)`) on
// engine E, for the dtype of the call.
template <class R, class E>
Status RunSolve(E& engine, ::xla::ffi::DataType dtype, const char* routine, const SolveAttrs& attrs,
                const SolveIo& io) {
  const TestFailureScope hook(attrs.config.test_fail);  // the test hook, for this call's steps
  return engine.Finish(ffi_util::DispatchFloating(dtype, routine, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return R::template Run<E, T>(engine, attrs, io);
  }));
}

}  // namespace jaxmg

// One FFI target of routine R::routine over the file's own `Solve<R>` handler function, with the
// file's engine binding; a C++ exception becomes the call's error (ffi_util::NoThrow).
#define JAXMG_SOLVE_TARGET(name, routine, binding)           \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(                             \
      name,                                                  \
      [](auto&&... args) {                                   \
        return ::jaxmg::ffi_util::NoThrow(#name, [&] {       \
          return ::jaxmg::Solve<::jaxmg::routines::routine>( \
              #name, std::forward<decltype(args)>(args)...); \
        });                                                  \
      },                                                     \
      binding)
