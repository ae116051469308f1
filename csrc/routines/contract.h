// The contract between the routines (csrc/routines/) and the engines: a call's attributes and
// buffers (CallAttrs, CallBuffers), what every rank agrees on before a collective
// (CallFingerprint), the matrix handle the steps pass (DistributedMatrix), and the engine steps
// (routines/steps.h). No XLA here: the FFI layer (ffi/families.h) fills these from its bindings,
// and the engines and routines see only them.
//
// Matrices are handles (MatrixOf<E, T>, a DistributedMatrix of element type T over the engine's
// descriptor): values that say where a distributed matrix's local part is, of which type, and how
// it is distributed. The engine makes them
// (Prepare, RhsIn, Identity, the inverses...) and owns what they point to for the call; a step
// reads and writes the matrices it is handed, and hands back the ones it makes, so that a routine
// shows which matrix goes where. A factorization's kind travels with its handle (factored), and a
// step takes its element type from the handles and buffers it is handed (no step is named with
// its type).
//
// The steps an engine provides, their parameters and meanings: routines/steps.h (EngineSteps).
// What a routine tells the FFI layer besides: RoutineTraits (below).
#pragma once

#include <cstdint>
#include <vector>

#include "common/config.h"
#include "common/scalar.h"
#include "common/status.h"
#include "layout/layout.h"

namespace jaxmg {

// Which axis of the plan maps the right-hand side's rows (engine rows or engine columns).
enum class Axis : int { kRows = 0, kCols = 1 };

// What a matrix holds besides its entries: the factorization a solve with it applies.
enum class Factorization : int {
  kNone = 0,      // the matrix itself
  kCholesky,      // L of B = L Lᴴ, in its lower triangle (Potrf)
  kLu,            // P B = L U as the engine's library leaves it, its pivots where the library
                  // keeps them (Getrf)
  kLuHostPivots,  // P B = L U as p?getrf stores it, with the global 1-based pivots on the host
                  // (the engines' own LU, or a kept factor's pivots: PivotsIn)
  kQr,            // the Householder QR of its leading cols.extent columns: R above the
                  // reflectors, their scalars kept by the engine (Geqrf, Gels)
};

// A distributed matrix as the steps pass it (SLATE's Matrix::fromScaLAPACK): a value that points at
// a local part of element type T that the engine owns for the call (or the caller's shard where
// the engine works in place), block-cyclic in tiles of `tile` over the engine's grid,
// column-major with leading dimension ld. Descriptor: the engine's (ScaLAPACK's int[9], a
// cuSOLVERMp descriptor), owned by the engine; copying the handle copies neither. A step takes
// its element type from the handles it is handed.
template <typename T, class Descriptor>
struct DistributedMatrix {
  T* data = nullptr;                 // the local part (host or device memory)
  const Descriptor* desc = nullptr;  // the engine's descriptor of the whole matrix
  int64_t rows = 0, cols = 0;        // global extents (engine order, padding included)
  int64_t local_rows = 0, local_cols = 0;
  int64_t ld = 1;  // local leading dimension, max(local_rows, 1)
  int64_t tile = 1;
  Factorization factored = Factorization::kNone;
  bool adjoint = false;  // holds the adjoint (conjugate transpose) of the matrix it stands for
  // Whole on every rank, row-major rows x cols, no descriptor (a least-squares solution
  // assembled on every rank).
  bool replicated = false;

  bool empty() const { return data == nullptr; }

  // The handle of a rows x cols matrix in tiles of `tile` whose local part, local_rows x
  // local_cols column-major with leading dimension max(local_rows, 1), is at data.
  static DistributedMatrix Of(T* data, const Descriptor* desc, int64_t rows, int64_t cols,
                              int64_t local_rows, int64_t local_cols, int64_t tile) {
    DistributedMatrix m;
    m.data = data;
    m.desc = desc;
    m.rows = rows;
    m.cols = cols;
    m.local_rows = local_rows;
    m.local_cols = local_cols;
    m.ld = local_rows > 1 ? local_rows : 1;
    m.tile = tile;
    return m;
  }
};

// Engine E's handle of a matrix of element type T (what a routine declares).
template <class E, typename T>
using MatrixOf = DistributedMatrix<T, typename E::Descriptor>;

// syevd's and sygvd's eigenpairs by index: lo <= i < hi of the ascending order (hi == 0: all).
struct EigenRange {
  int64_t lo = 0, hi = 0;
  bool all() const { return hi == 0; }
};

// The call's attributes, every target's (ffi/families.h decodes them), and what the family's
// checks derive (nrhs).
struct CallAttrs {
  int64_t n = 0, mesh_rows = 1, mesh_cols = 1, tile = 1;
  int64_t cols = 0;  // the columns of the matrix handed (n for the square routines)
  bool pad = true;
  bool force_redistribute = false;  // redistribute even where relabeling would do
  bool transposed = false;          // the JAX matrix handed is aᵀ (aᴴ): the engine holds a
  int u = 0, v = 0;                 // this shard's mesh position
  std::vector<int> ranks;           // process (MPI rank) of each mesh position, or empty
  int64_t thread = 0;               // the calling Python thread's tag (0 inside a user's jit)
  bool check_symmetry = false;      // symmetric routines: check the matrix first
  int64_t nrhs = 0;
  Config config;  // algorithm choices, tuning and test hooks (common/config.h)
  // solve_triangular's (routines/solve_triangular.h): which triangle of A it reads, op(A)
  // (0: A, 1: Aᵀ, 2: Aᴴ) and a unit diagonal; false and 0 for the other routines.
  bool lower = false;
  int64_t op = 0;
  bool unit_diagonal = false;
  // syevd's and sygvd's (routines/syevd.h): the eigenpairs wanted; all for the other routines.
  EigenRange subset;
};

// What every rank of a call must agree on before any engine collective (with the engine's own
// call counter in front): a difference names its field in the error every rank raises.
struct CallFingerprint {
  std::vector<int64_t> values;
  std::vector<const char*> names;
};

inline CallFingerprint Fingerprint(const char* target, int dtype, const CallAttrs& a) {
  uint64_t routine = 1469598103934665603ull;  // FNV-1a of the target name
  for (const char* c = target; *c; ++c)
    routine = (routine ^ static_cast<uint8_t>(*c)) * 1099511628211ull;
  return CallFingerprint{
      {static_cast<int64_t>(routine >> 1), dtype, a.n, a.cols, a.nrhs, a.mesh_rows, a.mesh_cols,
       a.tile, a.pad, a.force_redistribute, a.transposed, a.thread, a.check_symmetry, a.lower, a.op,
       a.unit_diagonal, a.subset.lo, a.subset.hi, ConfigHash(a.config)},
      {"routine", "dtype", "matrix rows", "matrix columns", "right-hand sides", "mesh rows",
       "mesh columns", "tile", "pad", "redistribution", "transposition",
       "calling thread (a jaxmg call made outside jit carries its Python "
       "thread's name; calls of several threads pair by that name)",
       "symmetry check", "triangle (lower)", "op", "unit diagonal",
       "first eigenpair (subset_by_index)", "end of the eigenpairs (subset_by_index)",
       "algorithm switches and tuning (jaxmg.config: compare it on the processes; its defaults "
       "come from their JAXMG_* environment variables, read at the first call)"}};
}

namespace detail {
template <typename T>
struct RealOrVoid {
  using type = RealOf<T>;
};
template <>
struct RealOrVoid<void> {
  using type = void;
};
}  // namespace detail

// The buffers of one call, for element type T: the FFI layer (ffi/families.h) fills
// CallBuffers<> (T = void) from XLA's buffers, and hands the routine CallBuffers<T> for the
// call's dtype (Typed). Every buffer but status, the pivots and logdet (real) holds a's dtype.
template <typename T = void>
struct CallBuffers {
  using Real = typename detail::RealOrVoid<T>::type;
  // The shard: the result a_work aliases it, or (a_work empty or of another size) it is an
  // input the engine only reads.
  T* a = nullptr;
  const T* a_in = nullptr;  // the same pointer, for routines that only read
  T* a_out = nullptr;       // a_work: == a when aliased; a factor's engine-local matrix
  int64_t a_out_count = 0;
  const T* b = nullptr;
  T* x = nullptr;
  Real* logdet = nullptr;
  int32_t* status = nullptr;
  int64_t nrhs = 0;
  int64_t x_count = 0;  // elements of this shard of x
  int64_t x_rows = 0;   // rows of this shard of x (b's, except for rectangular routines; the
                        // svd family: of s and vh)
  int64_t a_count = 0;  // elements of this shard of a
  T* sign = nullptr;    // scalar of a's dtype
  const int32_t* pivots_in = nullptr;
  int32_t* pivots_out = nullptr;
  int64_t pivots_in_count = 0, pivots_out_count = 0;
  // The singular value decomposition's (the svd family): s (x_rows of the n singular values)
  // and vh (x_rows of Vᴴ's rows, vh_count elements; one unused element without Vᴴ).
  T* s = nullptr;
  T* vh = nullptr;
  int64_t vh_count = 0;

  // These buffers as element type U's (the call's dtype).
  template <typename U>
  CallBuffers<U> Typed() const {
    using R = typename CallBuffers<U>::Real;
    CallBuffers<U> t;
    t.a = static_cast<U*>(a);
    t.a_in = static_cast<const U*>(a_in);
    t.a_out = static_cast<U*>(a_out);
    t.a_out_count = a_out_count;
    t.b = static_cast<const U*>(b);
    t.x = static_cast<U*>(x);
    t.logdet = static_cast<R*>(logdet);
    t.status = status;
    t.nrhs = nrhs;
    t.x_count = x_count;
    t.x_rows = x_rows;
    t.a_count = a_count;
    t.sign = static_cast<U*>(sign);
    t.pivots_in = pivots_in;
    t.pivots_out = pivots_out;
    t.pivots_in_count = pivots_in_count;
    t.pivots_out_count = pivots_out_count;
    t.s = static_cast<U*>(s);
    t.vh = static_cast<U*>(vh);
    t.vh_count = vh_count;
    return t;
  }
};

// What the FFI layer (ffi/families.h) needs to know of a routine besides its kSymmetry and Run:
// every routine struct derives from RoutineTraits and sets those that differ.
struct RoutineTraits {
  // a is a kept factor, read only (cho_solve, lu_solve with a kept factor).
  static constexpr bool kReadsFactor = false;
  // The matrix handed is n x cols (not square) and the results have n rows.
  static constexpr bool kRectangular = false;
  // x is the routine's own: n rows split like b's or whole on every device, not b's shape
  // (eigenvalues, products); a rectangular routine's x is its own too (R, least-squares
  // solutions), kOwnSolution or not.
  static constexpr bool kOwnSolution = false;
  // b is a second matrix: a shard of an n x cols matrix sharded like a (MatrixIn), not a
  // right-hand side.
  static constexpr bool kSecondMatrix = false;
};

}  // namespace jaxmg
