// The FFI surface, written once over the engines: the call's attributes (one struct), and the
// families of targets, each with its binding next to its handler.
//
// A target is one routine of the list (routines/targets.h) bound as its family binds. Its handler:
//   1. checks every buffer against the attributes (a bad attribute is an out-of-bounds access)
//      and decodes the call's configuration (ffi/config.h), filling the routine's CallAttrs and
//      CallBuffers (routines/contract.h, no XLA there);
//   2. hands them to the engine's part (Engine::Run in ffi/cpu_targets.cc and
//      ffi/cuda_targets.cc: the layout plan, the engine for this call, the dtype dispatch and
//      the routine R<E, T>).
// Errors are returned, never thrown (ffi_util::NoThrow catches what a host allocation throws).
// No buffer is zero-sized (XLA:GPU's compiler crashed on zero-sized custom-call buffers): an
// unused operand or result has one element.
//
// The families (operands -> results):
//   solve    a, b, position, pivots -> work, x, logdet, status, sign, pivots
//   eigen    a, b, position -> w, vectors, status
//   svd      a, position -> u, s, vh, status
//   polar    a, position -> u, h, status
//   product  a, b, position -> c
// `position` is this shard's (u, v) mesh position (int32[2]); `work`, `vectors`, `u` and `c`
// alias `a` (the routine overwrites it), except a solve family's kept factor (see solve).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "common/deferred.h"
#include "ffi/config.h"
#include "ffi/dispatch.h"
#include "layout/layout.h"
#include "routines/contract.h"
#include "xla/ffi/api/ffi.h"

namespace jaxmg::ffi_util {

// The call's attributes, every target's the same, decoded as one struct from the keywords
// jaxmg/_core/routine.py's _local passes (XLA_FFI_REGISTER_STRUCT_ATTR_DECODING below).
struct FfiAttrs {
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
  ::xla::ffi::Dictionary config;     // jaxmg.config (ffi/config.h DecodeConfig)
  int64_t lower, op, unit_diagonal;  // solve_triangular's (CallAttrs), else 0
  int64_t subset_lo, subset_hi;      // syevd's and sygvd's eigenpairs by index, else 0
  int64_t context;                   // GPUs: the id of the mesh's NCCL/cuSOLVERMp context; CPUs: 0
};

}  // namespace jaxmg::ffi_util

XLA_FFI_REGISTER_STRUCT_ATTR_DECODING(
    ::jaxmg::ffi_util::FfiAttrs, ::xla::ffi::StructMember<int64_t>("n"),
    ::xla::ffi::StructMember<int64_t>("cols"), ::xla::ffi::StructMember<int64_t>("mesh_rows"),
    ::xla::ffi::StructMember<int64_t>("mesh_cols"), ::xla::ffi::StructMember<int64_t>("tile"),
    ::xla::ffi::StructMember<int64_t>("pad"),
    ::xla::ffi::StructMember<int64_t>("force_redistribute"),
    ::xla::ffi::StructMember<int64_t>("transposed"),
    ::xla::ffi::StructMember<::xla::ffi::Span<const int64_t>>("ranks"),
    ::xla::ffi::StructMember<int64_t>("thread"),
    ::xla::ffi::StructMember<int64_t>("check_symmetry"),
    ::xla::ffi::StructMember<::xla::ffi::Dictionary>("config"),
    ::xla::ffi::StructMember<int64_t>("lower"), ::xla::ffi::StructMember<int64_t>("op"),
    ::xla::ffi::StructMember<int64_t>("unit_diagonal"),
    ::xla::ffi::StructMember<int64_t>("subset_lo"), ::xla::ffi::StructMember<int64_t>("subset_hi"),
    ::xla::ffi::StructMember<int64_t>("context"));

namespace jaxmg {

// Runs routine R (a struct deriving from RoutineTraits, with `static constexpr layout::Symmetry
// kSymmetry` and `template <class E, class T> static Status Run(E&, const CallAttrs&, const
// CallBuffers&)`) on engine E, for the dtype of the call.
template <class R, class E>
Status RunRoutine(E& engine, ::xla::ffi::DataType dtype, const char* routine,
                  const CallAttrs& attrs, const CallBuffers<>& io) {
  static_assert(std::is_base_of_v<RoutineTraits, R>, "a routine derives from RoutineTraits");
  const TestFailureScope hook(attrs.config.test_fail);  // the test hook, for this call's steps
  return engine.Finish(ffi_util::DispatchFloating(dtype, routine, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return R::template Run<E, T>(engine, attrs, io.Typed<T>());
  }));
}

namespace ffi_util {

namespace ffi = ::xla::ffi;

// The call's attributes into attrs, checked (mesh, order, ranks), and its configuration decoded.
inline Status DecodeCall(const char* target, const FfiAttrs& c, bool rectangular,
                         CallAttrs* attrs) {
  attrs->n = c.n;
  attrs->cols = c.cols;
  attrs->mesh_rows = c.mesh_rows;
  attrs->mesh_cols = c.mesh_cols;
  attrs->tile = c.tile;
  attrs->pad = c.pad != 0;
  attrs->force_redistribute = c.force_redistribute != 0;
  attrs->transposed = c.transposed != 0;
  attrs->ranks.assign(c.ranks.begin(), c.ranks.end());
  attrs->thread = c.thread;
  attrs->check_symmetry = c.check_symmetry != 0;
  attrs->lower = c.lower != 0;
  attrs->op = c.op;
  attrs->unit_diagonal = c.unit_diagonal != 0;
  attrs->subset = EigenRange{c.subset_lo, c.subset_hi};
  const std::string name(target);
  if (c.op < 0 || c.op > 2) return Status::Error(name + ": op must be 0, 1 or 2");
  if (!(c.subset_lo == 0 && c.subset_hi == 0) &&
      !(0 <= c.subset_lo && c.subset_lo < c.subset_hi && c.subset_hi <= c.n)) {
    return Status::Error(name + ": subset_lo and subset_hi must satisfy 0 <= lo < hi <= n");
  }
  if (c.mesh_rows <= 0 || c.mesh_cols <= 0 || c.n < 0 || c.cols < 0 ||
      (!rectangular && c.cols != c.n)) {
    return Status::Error(name + ": bad mesh or order");
  }
  if (!attrs->ranks.empty() &&
      static_cast<int64_t>(attrs->ranks.size()) != c.mesh_rows * c.mesh_cols) {
    return Status::Error(name + ": ranks has the wrong size");
  }
  return DecodeConfig(target, c.config, &attrs->config);
}

// The checks every family makes: a is a shard of the matrix handed (unless `any_shape`: a kept
// factor, whose size the engine checks), the position holds (u, v) and the status is a scalar
// (status_count: its elements; 1 for a family without one).
inline Status CheckCommon(const std::string& name, const CallAttrs& attrs, ffi::AnyBuffer a,
                          ffi::Buffer<ffi::S32> position, size_t status_count, bool any_shape) {
  const auto dims = a.dimensions();
  if (dims.size() != 2 || (!any_shape && (dims[0] != attrs.n / attrs.mesh_rows ||
                                          dims[1] != attrs.cols / attrs.mesh_cols))) {
    return Status::Error(name + ": the shard of a is not (n/mesh_rows, cols/mesh_cols)");
  }
  if (position.element_count() != 2) return Status::Error(name + ": position must hold (u, v)");
  if (status_count != 1) return Status::Error(name + ": status must be a scalar");
  return Status();
}

// A result that overwrites a (`vectors`, `u`, `c`): a's dtype and shape; the engine works in it,
// from a's contents (aliased: XLA hands the same buffer).
inline Status BindWork(const std::string& name, const char* what, ffi::AnyBuffer a,
                       ffi::Result<ffi::AnyBuffer>& work, CallBuffers<>* io) {
  const auto a_dims = a.dimensions(), w_dims = work->dimensions();
  if (work->element_type() != a.element_type() || w_dims.size() != a_dims.size() ||
      w_dims[0] != a_dims[0] || w_dims[1] != a_dims[1]) {
    return Status::Error(name + ": " + what + " must have a's dtype and shape");
  }
  if (work->untyped_data() != a.untyped_data()) {
    return Status::Error(name + ": " + what + " must alias a");
  }
  io->a = io->a_out = work->untyped_data();
  io->a_in = io->a;
  io->a_count = io->a_out_count = static_cast<int64_t>(a.element_count());
  return Status();
}

// The rows of a result of n rows split like the caller's right-hand side (over the engine mesh's
// columns when the matrix was handed transposed), or whole on every device.
inline Status CheckSplitRows(const std::string& name, const char* what, const CallAttrs& attrs,
                             int64_t rows) {
  const int64_t split = attrs.n / (attrs.transposed ? attrs.mesh_cols : attrs.mesh_rows);
  if (rows != split && rows != attrs.n) {
    return Status::Error(name + ": " + what + " must have n/" +
                         (attrs.transposed ? "mesh_cols" : "mesh_rows") + " or n rows");
  }
  return Status();
}

inline ffi::Error Invalid(const Status& s) { return ffi::Error::InvalidArgument(s.message()); }

// The families. Each: Bind(binding) adds its operands, results and the attributes (in the
// handler's order), and Call<R>(target, engine, ...) checks the buffers and runs routine R
// through the engine's part, engine.Run<R>(target, dtype, position, call, attrs, io) (the
// engines' targets files: ffi/cpu_targets.cc, ffi/cuda_targets.cc), which builds the engine
// for the call and runs R<E, T> for its dtype (RunRoutine).
namespace families {

// Solves, factors, inverses, determinants, QR, least squares, triangular solves.
//   a: the shard (n/mesh_rows x cols/mesh_cols), or a kept factor (R::kReadsFactor: read only)
//   b: the right-hand side's rows (n/mesh_rows x nrhs, or cols/mesh_cols x nrhs when
//      transposed), or one element
//   pivots: a kept LU factor's pivots (else one element)
//   work: aliases a, or a buffer of its own (a padded kept factor; one element where unused)
//   x: like b, or (rectangular routines) n rows split like b's or whole, its own columns
//   logdet (real scalar), status (int32 scalar), sign (scalar of a's dtype), pivots out (LU
//   factor; else one element)
struct solve {
  template <class B>
  static auto Bind(B binding) {
    return std::move(binding)
        .template Arg<ffi::AnyBuffer>()         // a
        .template Arg<ffi::AnyBuffer>()         // b
        .template Arg<ffi::Buffer<ffi::S32>>()  // position
        .template Arg<ffi::Buffer<ffi::S32>>()  // pivots in
        .template Ret<ffi::AnyBuffer>()         // work
        .template Ret<ffi::AnyBuffer>()         // x
        .template Ret<ffi::AnyBuffer>()         // logdet
        .template Ret<ffi::Buffer<ffi::S32>>()  // status
        .template Ret<ffi::AnyBuffer>()         // sign
        .template Ret<ffi::Buffer<ffi::S32>>()  // pivots out
        .template Attrs<FfiAttrs>();
  }

  template <class R, class Engine>
  static ffi::Error Call(const char* target, const Engine& engine, ffi::AnyBuffer a,
                         ffi::AnyBuffer b, ffi::Buffer<ffi::S32> position,
                         ffi::Buffer<ffi::S32> pivots_in, ffi::Result<ffi::AnyBuffer> work,
                         ffi::Result<ffi::AnyBuffer> x, ffi::Result<ffi::AnyBuffer> logdet,
                         ffi::Result<ffi::Buffer<ffi::S32>> status,
                         ffi::Result<ffi::AnyBuffer> sign,
                         ffi::Result<ffi::Buffer<ffi::S32>> pivots_out, FfiAttrs call) {
    CallAttrs attrs;
    CallBuffers<> io;
    const std::string name(target);
    // x is the routine's own, or a rectangular routine's (RoutineTraits).
    constexpr bool kOwnSolution = R::kOwnSolution || R::kRectangular;
    Status s = DecodeCall(target, call, R::kRectangular, &attrs);
    if (s.ok()) s = CheckCommon(name, attrs, a, position, status->element_count(), R::kReadsFactor);
    if (s.ok())
      s = Check(name, kOwnSolution, a, b, pivots_in, work, x, logdet, sign, pivots_out, &attrs,
                &io);
    if (!s.ok()) return Invalid(s);
    io.status = status->typed_data();
    return engine.template Run<R>(target, a.element_type(), position, call, attrs, io);
  }

  static Status Check(const std::string& name, bool own_solution, ffi::AnyBuffer a,
                      ffi::AnyBuffer b, ffi::Buffer<ffi::S32> pivots_in,
                      ffi::Result<ffi::AnyBuffer>& work, ffi::Result<ffi::AnyBuffer>& x,
                      ffi::Result<ffi::AnyBuffer>& logdet, ffi::Result<ffi::AnyBuffer>& sign,
                      ffi::Result<ffi::Buffer<ffi::S32>>& pivots_out, CallAttrs* attrs,
                      CallBuffers<>* io) {
    auto fail = [&](const std::string& what) { return Status::Error(name + ": " + what); };
    const ffi::DataType dt = a.element_type();
    if (b.element_type() != dt || x->element_type() != dt || work->element_type() != dt ||
        sign->element_type() != dt) {
      return fail("a, b, x and sign must share a dtype");
    }
    if (sign->element_count() != 1) return fail("sign must be a scalar");
    if (logdet->element_count() != 1) return fail("logdet must be a scalar");
    const auto b_dims = b.dimensions(), x_dims = x->dimensions();
    // b and x keep the caller's row sharding: over the engine mesh's columns when the matrix
    // was handed transposed (no XLA collective moves them before the call).
    const int64_t rhs_rows =
        attrs->transposed ? attrs->cols / attrs->mesh_cols : attrs->n / attrs->mesh_rows;
    if (b_dims.size() != 2 || b_dims[0] != rhs_rows || x_dims.size() != 2) {
      return fail("b must be (n/mesh_rows, nrhs), or (cols/mesh_cols, nrhs) when transposed");
    }
    if (!own_solution && (x_dims[0] != b_dims[0] || x_dims[1] != b_dims[1])) {
      return fail("x must have b's shape");
    }
    // A rectangular routine's x has n rows (the matrix handed is n x cols, the engine's
    // cols x n): split like b's, or all of them on every device.
    if (own_solution) JAXMG_RETURN_IF_ERROR(CheckSplitRows(name, "x", *attrs, x_dims[0]));
    attrs->nrhs = b_dims[1];
    io->a_out = work->untyped_data();
    io->a_out_count = static_cast<int64_t>(work->element_count());
    // Aliased (XLA hands the same buffer), or an output of its own (a factor, or unused).
    const bool aliased = io->a_out == a.untyped_data();
    io->a = aliased ? io->a_out : const_cast<void*>(a.untyped_data());
    io->a_in = io->a;
    io->a_count = static_cast<int64_t>(a.element_count());
    io->sign = sign->untyped_data();
    io->pivots_in = pivots_in.typed_data();
    io->pivots_in_count = static_cast<int64_t>(pivots_in.element_count());
    io->pivots_out = pivots_out->typed_data();
    io->pivots_out_count = static_cast<int64_t>(pivots_out->element_count());
    io->b = b.untyped_data();
    io->x = x->untyped_data();
    io->logdet = logdet->untyped_data();
    io->nrhs = b_dims[1];
    io->x_rows = x_dims[0];
    io->x_count = x_dims[0] * x_dims[1];
    return Status();
  }
};

// Hermitian eigenproblems, standard (syevd, eigvalsh) and generalized (sygvd: b, the second
// matrix, sharded like a; else b has one element).
//   w: the n eigenvalues, ascending, whole on every device (a's dtype: real parts)
//   vectors: aliases a; the eigenvectors in columns (the routines with vectors)
//   status: int32 scalar
struct eigen {
  template <class B>
  static auto Bind(B binding) {
    return std::move(binding)
        .template Arg<ffi::AnyBuffer>()         // a
        .template Arg<ffi::AnyBuffer>()         // b
        .template Arg<ffi::Buffer<ffi::S32>>()  // position
        .template Ret<ffi::AnyBuffer>()         // w
        .template Ret<ffi::AnyBuffer>()         // vectors
        .template Ret<ffi::Buffer<ffi::S32>>()  // status
        .template Attrs<FfiAttrs>();
  }

  template <class R, class Engine>
  static ffi::Error Call(const char* target, const Engine& engine, ffi::AnyBuffer a,
                         ffi::AnyBuffer b, ffi::Buffer<ffi::S32> position,
                         ffi::Result<ffi::AnyBuffer> w, ffi::Result<ffi::AnyBuffer> vectors,
                         ffi::Result<ffi::Buffer<ffi::S32>> status, FfiAttrs call) {
    CallAttrs attrs;
    CallBuffers<> io;
    const std::string name(target);
    Status s = DecodeCall(target, call, /*rectangular=*/false, &attrs);
    if (s.ok())
      s = CheckCommon(name, attrs, a, position, status->element_count(), /*any_shape=*/false);
    if (s.ok()) s = BindWork(name, "vectors", a, vectors, &io);
    if (s.ok() && (b.element_type() != a.element_type() || w->element_type() != a.element_type()))
      s = Status::Error(name + ": a, b and w must share a dtype");
    if (s.ok() &&
        (w->dimensions().size() != 1 || static_cast<int64_t>(w->element_count()) != attrs.n))
      s = Status::Error(name + ": w must be (n,)");
    const auto a_dims = a.dimensions(), b_dims = b.dimensions();
    if (s.ok() && R::kSecondMatrix &&
        (b_dims.size() != 2 || b_dims[0] != a_dims[0] || b_dims[1] != a_dims[1]))
      s = Status::Error(name + ": b must be a second matrix shard, (n/mesh_rows, n/mesh_cols)");
    if (s.ok() && !R::kSecondMatrix && b.element_count() != 1)
      s = Status::Error(name + ": b must have one element (unused)");
    if (!s.ok()) return Invalid(s);
    attrs.nrhs = R::kSecondMatrix ? b_dims[1] : 0;
    io.b = b.untyped_data();
    io.x = w->untyped_data();  // the routines write the eigenvalues into x
    io.x_rows = io.x_count = attrs.n;
    io.status = status->typed_data();
    return engine.template Run<R>(target, a.element_type(), position, call, attrs, io);
  }
};

// The singular value decomposition of the (rectangular, handed transposed) matrix: A = U
// diag(s) Vᴴ.
//   u: aliases a; U (the routines with U)
//   s: the n singular values, descending, n rows split like a right-hand side's or whole (a's
//      dtype: real parts)
//   vh: Vᴴ's rows, s's rows x n (the routines with Vᴴ; else one element)
//   status: int32 scalar
struct svd {
  template <class B>
  static auto Bind(B binding) {
    return std::move(binding)
        .template Arg<ffi::AnyBuffer>()         // a
        .template Arg<ffi::Buffer<ffi::S32>>()  // position
        .template Ret<ffi::AnyBuffer>()         // u
        .template Ret<ffi::AnyBuffer>()         // s
        .template Ret<ffi::AnyBuffer>()         // vh
        .template Ret<ffi::Buffer<ffi::S32>>()  // status
        .template Attrs<FfiAttrs>();
  }

  template <class R, class Engine>
  static ffi::Error Call(const char* target, const Engine& engine, ffi::AnyBuffer a,
                         ffi::Buffer<ffi::S32> position, ffi::Result<ffi::AnyBuffer> u,
                         ffi::Result<ffi::AnyBuffer> sv, ffi::Result<ffi::AnyBuffer> vh,
                         ffi::Result<ffi::Buffer<ffi::S32>> status, FfiAttrs call) {
    CallAttrs attrs;
    CallBuffers<> io;
    const std::string name(target);
    Status s = DecodeCall(target, call, /*rectangular=*/true, &attrs);
    if (s.ok())
      s = CheckCommon(name, attrs, a, position, status->element_count(), /*any_shape=*/false);
    if (s.ok()) s = BindWork(name, "u", a, u, &io);
    if (s.ok() &&
        (sv->element_type() != a.element_type() || vh->element_type() != a.element_type()))
      s = Status::Error(name + ": a, s and vh must share a dtype");
    const auto s_dims = sv->dimensions(), vh_dims = vh->dimensions();
    if (s.ok() && s_dims.size() != 1) s = Status::Error(name + ": s must be 1-D");
    if (s.ok()) s = CheckSplitRows(name, "s", attrs, s_dims[0]);
    if (s.ok() && R::kWantsVh &&
        (vh_dims.size() != 2 || vh_dims[0] != s_dims[0] || vh_dims[1] != attrs.n))
      s = Status::Error(name + ": vh must have s's rows and n columns");
    if (s.ok() && !R::kWantsVh && vh->element_count() != 1)
      s = Status::Error(name + ": vh must have one element (unused)");
    if (!s.ok()) return Invalid(s);
    io.s = sv->untyped_data();
    io.x_rows = s_dims[0];
    io.vh = vh->untyped_data();
    io.vh_count = static_cast<int64_t>(vh->element_count());
    io.status = status->typed_data();
    return engine.template Run<R>(target, a.element_type(), position, call, attrs, io);
  }
};

// The polar decomposition A = Up H of the (rectangular, handed transposed) matrix.
//   u: aliases a; Up
//   h: H's rows, n rows split like a right-hand side's or whole, n columns (the routines with
//      H; else one element)
//   status: int32 scalar
struct polar {
  template <class B>
  static auto Bind(B binding) {
    return std::move(binding)
        .template Arg<ffi::AnyBuffer>()         // a
        .template Arg<ffi::Buffer<ffi::S32>>()  // position
        .template Ret<ffi::AnyBuffer>()         // u
        .template Ret<ffi::AnyBuffer>()         // h
        .template Ret<ffi::Buffer<ffi::S32>>()  // status
        .template Attrs<FfiAttrs>();
  }

  template <class R, class Engine>
  static ffi::Error Call(const char* target, const Engine& engine, ffi::AnyBuffer a,
                         ffi::Buffer<ffi::S32> position, ffi::Result<ffi::AnyBuffer> u,
                         ffi::Result<ffi::AnyBuffer> h, ffi::Result<ffi::Buffer<ffi::S32>> status,
                         FfiAttrs call) {
    CallAttrs attrs;
    CallBuffers<> io;
    const std::string name(target);
    Status s = DecodeCall(target, call, /*rectangular=*/true, &attrs);
    if (s.ok())
      s = CheckCommon(name, attrs, a, position, status->element_count(), /*any_shape=*/false);
    if (s.ok()) s = BindWork(name, "u", a, u, &io);
    if (s.ok() && h->element_type() != a.element_type())
      s = Status::Error(name + ": a and h must share a dtype");
    const auto h_dims = h->dimensions();
    if (s.ok() && R::kWantsH) {
      s = h_dims.size() == 2 && h_dims[1] == attrs.n
              ? CheckSplitRows(name, "h", attrs, h_dims[0])
              : Status::Error(name + ": h must have n columns");
    }
    if (s.ok() && !R::kWantsH && h->element_count() != 1)
      s = Status::Error(name + ": h must have one element (unused)");
    if (!s.ok()) return Invalid(s);
    io.x = h->untyped_data();  // the routines write H's rows into x
    io.x_count = static_cast<int64_t>(h->element_count());
    io.x_rows = R::kWantsH ? h_dims[0] : 1;
    io.status = status->typed_data();
    return engine.template Run<R>(target, a.element_type(), position, call, attrs, io);
  }
};

// Products of two n x n matrices sharded alike: c := op_a(A) op_b(B).
//   b: the second matrix's shard, like a's
//   c: aliases a
struct product {
  template <class B>
  static auto Bind(B binding) {
    return std::move(binding)
        .template Arg<ffi::AnyBuffer>()         // a
        .template Arg<ffi::AnyBuffer>()         // b
        .template Arg<ffi::Buffer<ffi::S32>>()  // position
        .template Ret<ffi::AnyBuffer>()         // c
        .template Attrs<FfiAttrs>();
  }

  template <class R, class Engine>
  static ffi::Error Call(const char* target, const Engine& engine, ffi::AnyBuffer a,
                         ffi::AnyBuffer b, ffi::Buffer<ffi::S32> position,
                         ffi::Result<ffi::AnyBuffer> c, FfiAttrs call) {
    CallAttrs attrs;
    CallBuffers<> io;
    const std::string name(target);
    Status s = DecodeCall(target, call, /*rectangular=*/false, &attrs);
    if (s.ok()) s = CheckCommon(name, attrs, a, position, /*status_count=*/1, /*any_shape=*/false);
    if (s.ok()) s = BindWork(name, "c", a, c, &io);
    const auto a_dims = a.dimensions(), b_dims = b.dimensions();
    if (s.ok() && (b.element_type() != a.element_type() || b_dims.size() != 2 ||
                   b_dims[0] != a_dims[0] || b_dims[1] != a_dims[1]))
      s = Status::Error(name + ": b must be a shard like a's, of its dtype");
    if (!s.ok()) return Invalid(s);
    attrs.nrhs = b_dims[1];
    io.b = b.untyped_data();
    return engine.template Run<R>(target, a.element_type(), position, call, attrs, io);
  }
};

}  // namespace families
}  // namespace ffi_util
}  // namespace jaxmg
