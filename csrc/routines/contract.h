// The contract between the routines (csrc/routines/) and the engines: a call's attributes and
// buffers (SolveAttrs, SolveIo), what every rank agrees on before a collective
// (CallFingerprint), the matrix handle the steps pass (DistributedMatrix), and the typed steps an
// engine provides. No XLA here: the FFI layer (ffi/families.h) fills these from its bindings, and
// the engines and routines see only them.
//
// Matrices are handles (E::Matrix, a DistributedMatrix over the engine's descriptor): values that
// say where a distributed matrix's local part is and how it is distributed. The engine makes them
// (Prepare, RhsIn, Identity, the inverses...) and owns what they point to for the call; a step
// reads and writes the matrices it is handed, and hands back the ones it makes, so that a routine
// shows which matrix goes where. A factorization's kind travels with its handle (factored).
//
// An engine E provides, for T in float, double, complex<float>, complex<double>:
//   using Matrix = DistributedMatrix<its descriptor>;
//   const layout::Plan& plan();
//   Status Asymmetric<T>(const void* shard, bool* out)
//   Status CheckSymmetry<T>(const void* shard) the same check, whose verdict comes with the next
//                                         status agreement (Potrf's): bool asymmetric(), agreed
//                                         by every rank (the GPU engine saves two host round
//                                         trips; the CPU engine decides at once)
//                                         whether the matrix is not symmetric (Hermitian), from
//                                         the shards (common/symmetry.h); agreed by every rank
//   Status Prepare<T>(void* shard, Matrix* a)
//                                         *a := the engine matrix B from the shard (engine-local,
//                                         in place if it can: a->data is then the shard)
//   Status Potrf<T>(Matrix* a, int* info) a's lower triangle := L, a = L Lᴴ (a->factored :=
//                                         kCholesky); info agreed by every rank (max)
//   Status Getrf<T>(Matrix* a, int* info) a := its pivoted LU factors (a->factored := kLu or
//                                         kLuHostPivots, the pivots kept by the engine); info
//                                         agreed by every rank (max)
//   Status Potrs<T>(const Matrix& l, const Matrix& c)
//                                         c := B⁻¹ c for the Cholesky factor l of B
//   Status Getrs<T>(const Matrix& lu, const Matrix& c, bool transpose)
//                                         c := op(B)⁻¹ c for the LU factors lu of B, op =
//                                         transpose ? Bᵀ : B
//   Status LogAbsDiag<T>(const Matrix& a, double scale, bool ok, void* out)
//                                         out = scale * Σ log|diag a| (collective), NaN if !ok
//   Status RhsIn<T>(const void* b, int64_t nrhs, Axis axis, bool conj, Matrix* c)
//                                         *c := a new engine_rows x nrhs matrix with rows
//                                         distributed like the engine matrix's: c[i] =
//                                         conj?(b[orig(i)]), orig from the plan's axis; b's rows
//                                         are split over the mesh's rows, or over its columns when
//                                         attrs.transposed (the caller's layout)
//   Status RhsOut<T>(const Matrix& z, void* x, Axis axis, bool conj)
//                                         x[orig(i)] = conj?(z[i]) (this shard's rows; z as RhsIn
//                                         makes it)
//   Status Identity<T>(const Matrix& like, Matrix* out)
//                                         *out := a new identity distributed like `like` (square)
//   Status CholeskyInverse<T>(const Matrix& l, Matrix* inverse)
//                                         (l from Potrf) *inverse := B⁻¹, a new matrix
//                                         distributed like B
//   Status InverseSolve<T>(const Matrix& lu, bool transpose, Matrix* inverse)
//                                         (lu from Getrf) *inverse := M⁻¹, or M⁻ᵀ with
//                                         transpose, a new matrix distributed like M (lu may be
//                                         overwritten)
//   Status ShardOut<T>(const Matrix& y, void* shard)
//                                         the shard := its part of y (distributed like the engine
//                                         matrix: an inverse, a product) in the JAX layout
//                                         (undoing relabeling, padding or redistribution; nothing
//                                         to do where y is the shard itself)
//   Status FactorOut<T>(const Matrix& f, void* out, int64_t count)
//                                         out := the factored engine matrix f, kept for later
//                                         solves: the engine-local matrix as it is (nothing to do
//                                         where the engine worked in the shard, a copy where it
//                                         padded), or the JAX layout where it redistributed
//   Status Adopt<T>(const void* factor, int64_t count, Factorization holds, Matrix* f)
//                                         *f := the engine matrix from a factor FactorOut wrote
//                                         (read, never written; count checked), f->factored :=
//                                         holds
//   Status PivotsOut(const Matrix& lu, int32_t* out)
//                                         lu's pivots, global and 1-based (engine order), the
//                                         same on every rank
//   Status PivotsIn(const int32_t* in, Matrix* lu)
//                                         the pivots of a kept LU factor (lu->factored := the
//                                         kind whose pivots the engine now holds)
//   Status SignLogDet<T>(const Matrix& lu, void* sign, void* logabsdet)
//                                         lu from Getrf: det B's phase and log |det B|
//                                         (collective); sign 0 and -inf for an exactly singular
//                                         B, NaN for a non-finite factor; the relabeling's parity
//                                         included
//   Status Geqrf<T>(Matrix* a, int* info) QR of the engine matrix a's leading cols.extent columns
//                                         (all its rows), in place (a->factored := kQr); info: 1
//                                         + the first column holding a non-finite entry, or 0,
//                                         agreed by every rank
//   Status Orgqr<T>(Matrix* a)            (a from Geqrf) a := Q of that factorization (its
//                                         leading cols.extent columns)
//   Status Gels<T>(Matrix* a, const Matrix& c, Matrix* z, int* info)
//                                         least squares min ‖B z − c‖ for the engine matrix a
//                                         (factored in place: a->factored := kQr) and c from
//                                         RhsIn (overwritten); *z := the solution, in its leading
//                                         cols.extent rows (c's storage, or replicated); info as
//                                         Geqrf's, or 1 + the first exactly zero diagonal entry of
//                                         R (rank deficient), agreed
//   Status LeadingRowsOut<T>(const Matrix& y, void* x, int64_t x_rows)
//                                         x (row-major) := this shard's x_rows of the first
//                                         cols.extent rows, in engine order, of R (y from Geqrf:
//                                         its leading cols.extent columns) or of a least-squares
//                                         solution (y from Gels: all its columns); x_rows is all
//                                         of them or the block of the caller's right-hand-side
//                                         layout (collective)
//   Status Eigh<T>(const Matrix& a, bool vectors, void* x, Matrix* z, int* info)
//                                         (a redistributed Hermitian engine matrix a, lower
//                                         triangle; overwritten) its eigenvalues, ascending, into
//                                         the n entries of x (real parts), the same on every rank;
//                                         with `vectors` *z := the eigenvectors Z (columns), a new
//                                         matrix distributed like a (z->adjoint: it holds Zᴴ);
//                                         info agreed: > 0 for no convergence or a non-finite entry
//                                         (then nothing solved)
//   Status VectorsOut<T>(const Matrix& z, const Matrix& work, void* shard)
//                                         the shard := its part of the eigenvector matrix z in the
//                                         JAX layout (columns are eigenvectors); work (distributed
//                                         like z, e.g. the solver's spent input) is overwritten
//   Status MatrixIn<T>(const void* shard, Matrix* k)
//                                         (redistributed plans) *k := the second matrix (b, a
//                                         shard of an n x n matrix sharded like a, read
//                                         column-major as a is) in the engine's tiles, distributed
//                                         like the engine matrix
//   Status Gemm<T>(char op_b, const Matrix& k, char op_a, const Matrix& m, Matrix* c)
//                                         (redistributed plans, n x n) *c := op_b(k) op_a(m), a
//                                         new matrix distributed like m (op: 'N', 'T' or 'C')
//   Status Sygvd<T>(const Matrix& m, const Matrix& k, bool vectors, void* x, Matrix* z,
//                   int* info)            the generalized problem M z = λ K z for the engine
//                                         matrix m (Hermitian, lower triangle) and the second
//                                         matrix k (positive definite, lower triangle; both
//                                         overwritten): λ into x as Eigh, the vectors into *z as
//                                         Eigh's; info agreed: n + i when K's leading minor of
//                                         order i is not positive definite, else as Eigh's
//   Status Gesvd<T>(Matrix* a, bool vectors_u, bool vectors_vt, void* x, int64_t x_rows,
//                   int64_t x_cols, Matrix* vt, int* info)
//                                         (a redistributed m x n engine matrix a, m >= n;
//                                         overwritten) its singular values, descending, into the
//                                         last of x's x_cols columns for x's rows (row-major;
//                                         x_rows of the n, as for LeadingRowsOut); with vectors_u
//                                         *a := U (m x n, a's layout), with vectors_vt *vt := Vᴴ
//                                         (n x n, a new matrix whose columns are distributed like
//                                         a's); info agreed: > 0 for no convergence or a
//                                         non-finite entry (nothing solved)
//   QDWH's steps (routines/polar.h), on a redistributed m x n engine matrix, m >= n, which holds
//   U in place throughout (its handle from Prepare stays valid); the iteration's other operands
//   are the engine's own:
//   Status PolarBegin<T>(bool keep_a, double* lower, int* info)
//                                         info agreed: > 0 for a non-finite entry (nothing
//                                         more to do); else U := A / (‖A‖₁ ‖A‖∞)^½ (A kept,
//                                         keep_a) and *lower := 1 / ‖L⁻¹‖_F for UᴴU = L Lᴴ, or
//                                         0 where the factorization fails; the same on every rank
//   Status PolarQr<T>(double sqrt_c, double coef, double e)
//                                         U := e U + coef Q₁ Q₂ᴴ, [sqrt_c U; I] = [Q₁; Q₂] R
//   Status PolarCholesky<T>(double c, double coef, double e, double* change)
//                                         U := e U + coef U Z⁻¹, Z = I + c UᴴU; *change :=
//                                         ‖U − U_prev‖_F, the same on every rank
//   Status PolarEnd<T>(bool h, Matrix* hm, int* info)
//                                         U := (3U − U UᴴU) / 2, the engine matrix := U; with h,
//                                         *hm := H = ½ (UᴴA + AᴴU), a new n x n matrix (columns
//                                         distributed like the engine matrix's); info agreed: > 0
//                                         for a non-finite entry of U
//   Status PolarValues<T>(const Matrix& hm, void* x, int64_t x_rows, int64_t x_cols, int* info)
//                                         (hm from PolarEnd; overwritten) H's eigenvalues, A's
//                                         singular values: descending, at least 0, into x's last
//                                         column for x's rows (as Gesvd's); info agreed
//   Status RhsMatrixIn<T>(const void* b, int64_t rows, Matrix* c)
//                                         (redistributed plans) *c := Bᵀ, the rows x cols.extent
//                                         matrix that the shards of b read column-major are (b:
//                                         cols.extent x rows, sharded like a: its rows over the
//                                         mesh's rows, its columns over its columns), in the
//                                         engine's tiles, its columns distributed like the engine
//                                         matrix's
//   Status RhsMatrixOut<T>(const Matrix& c, void* x)
//                                         x (sharded as b) := c in the JAX layout (RhsMatrixIn's
//                                         inverse)
//   Status Trsm<T>(char side, char uplo, char op, char diag, const Matrix& m, const Matrix& c,
//                  int* info)             (a redistributed engine matrix m, n x n; c from RhsIn or
//                                         RhsMatrixIn) c := op(m)⁻¹ c (side 'L') or c op(m)⁻¹
//                                         (side 'R'), reading only the triangle `uplo` ('L' or
//                                         'U') of m; op 'N', 'T' or 'C'; diag 'U': a unit
//                                         diagonal (not read), 'N': m's own. info, agreed by
//                                         every rank before the solve: 1 + the first diagonal
//                                         entry of m that is zero or not finite (diag 'N'), else
//                                         0; nothing solved when info != 0
//   Status SquareRowsOut<T>(const Matrix& s, void* x, int64_t x_rows, int64_t x_cols)
//                                         columns 0..n-1 of x (row stride x_cols) := this
//                                         shard's x_rows of the n x n matrix s (Vᴴ, H;
//                                         collective)
//   Status FillNan<T>(void* x, int64_t count)
//   Status WriteStatus(int info, int32_t* status)
//   Status Finish(const Status& result)   the end of every call, reached by every rank that ran
//                                         it: the CPU engine keeps MPI progressing until all have
//                                         finished and agrees on a local failure
// Status values are returned, never thrown; a failing step returns before the next collective
// only on an engine error, which every rank meets in the same step.
#pragma once

#include <cstdint>
#include <vector>

#include "common/config.h"
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
// a local part the engine owns for the call (or the caller's shard where the engine works in
// place), block-cyclic in tiles of `tile` over the engine's grid, column-major with leading
// dimension ld. Descriptor: the engine's (ScaLAPACK's int[9], a cuSOLVERMp descriptor), owned by
// the engine; copying the handle copies neither.
template <class Descriptor>
struct DistributedMatrix {
  void* data = nullptr;              // the local part (host or device memory)
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

  template <typename T>
  T* As() const {
    return static_cast<T*>(data);
  }
  bool empty() const { return data == nullptr; }

  // The handle of a rows x cols matrix in tiles of `tile` whose local part, local_rows x
  // local_cols column-major with leading dimension max(local_rows, 1), is at data.
  static DistributedMatrix Of(void* data, const Descriptor* desc, int64_t rows, int64_t cols,
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

// The call's attributes, every target's (ffi/families.h decodes them), and what the family's
// checks derive (nrhs).
struct SolveAttrs {
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
  // The routine's own variant (its meaning is the routine's: routines/solve_triangular.h's
  // triangle, op and diagonal).
  int64_t variant = 0;
};

// What every rank of a call must agree on before any engine collective (with the engine's own
// call counter in front): a difference names its field in the error every rank raises.
struct CallFingerprint {
  std::vector<int64_t> values;
  std::vector<const char*> names;
};

inline CallFingerprint Fingerprint(const char* target, int dtype, const SolveAttrs& a) {
  uint64_t routine = 1469598103934665603ull;  // FNV-1a of the target name
  for (const char* c = target; *c; ++c)
    routine = (routine ^ static_cast<uint8_t>(*c)) * 1099511628211ull;
  return CallFingerprint{
      {static_cast<int64_t>(routine >> 1), dtype, a.n, a.cols, a.nrhs, a.mesh_rows, a.mesh_cols,
       a.tile, a.pad, a.force_redistribute, a.transposed, a.thread, a.check_symmetry, a.variant,
       ConfigHash(a.config)},
      {"routine", "dtype", "matrix rows", "matrix columns", "right-hand sides", "mesh rows",
       "mesh columns", "tile", "pad", "redistribution", "transposition",
       "calling thread (a jaxmg call made outside jit carries its Python "
       "thread's name; calls of several threads pair by that name)",
       "symmetry check", "routine variant",
       "algorithm switches and tuning (jaxmg.config: compare it on the processes; its defaults "
       "come from their JAXMG_* environment variables, read at the first call)"}};
}

// The buffers of one call.
struct SolveIo {
  // The shard: the result a_work aliases it, or (a_work empty or of another size) it is an
  // input the engine only reads.
  void* a = nullptr;
  const void* a_in = nullptr;  // the same pointer, for routines that only read
  void* a_out = nullptr;       // a_work: == a when aliased; a factor's engine-local matrix
  int64_t a_out_count = 0;
  const void* b = nullptr;
  void* x = nullptr;
  void* logdet = nullptr;
  int32_t* status = nullptr;
  int64_t nrhs = 0;
  int64_t x_count = 0;   // elements of this shard of x
  int64_t x_rows = 0;    // rows of this shard of x (b's, except for rectangular routines; the
                         // svd family: of s and vh)
  int64_t a_count = 0;   // elements of this shard of a
  void* sign = nullptr;  // scalar of a's dtype
  const int32_t* pivots_in = nullptr;
  int32_t* pivots_out = nullptr;
  int64_t pivots_in_count = 0, pivots_out_count = 0;
  // The singular value decomposition's (the svd family): s (x_rows of the n singular values)
  // and vh (x_rows of Vᴴ's rows, vh_count elements; one unused element without Vᴴ).
  void* s = nullptr;
  void* vh = nullptr;
  int64_t vh_count = 0;
};

}  // namespace jaxmg

// Explicit instantiation of an engine's steps for one element type, in two families: the
// steps of the solve, factor, QR, eigen and product routines, and those of gesvd and polar
// (each in the engine file that defines them).
#define JAXMG_INSTANTIATE_SOLVE_STEPS(Engine, T)                                                  \
  template Status Engine::Asymmetric<T>(const void*, bool*);                                      \
  template Status Engine::CheckSymmetry<T>(const void*);                                          \
  template Status Engine::Prepare<T>(void*, Engine::Matrix*);                                     \
  template Status Engine::Potrf<T>(Engine::Matrix*, int*);                                        \
  template Status Engine::Getrf<T>(Engine::Matrix*, int*);                                        \
  template Status Engine::Potrs<T>(const Engine::Matrix&, const Engine::Matrix&);                 \
  template Status Engine::Getrs<T>(const Engine::Matrix&, const Engine::Matrix&, bool);           \
  template Status Engine::LogAbsDiag<T>(const Engine::Matrix&, double, bool, void*);              \
  template Status Engine::RhsIn<T>(const void*, int64_t, Axis, bool, Engine::Matrix*);            \
  template Status Engine::RhsOut<T>(const Engine::Matrix&, void*, Axis, bool);                    \
  template Status Engine::Identity<T>(const Engine::Matrix&, Engine::Matrix*);                    \
  template Status Engine::InverseSolve<T>(const Engine::Matrix&, bool, Engine::Matrix*);          \
  template Status Engine::CholeskyInverse<T>(const Engine::Matrix&, Engine::Matrix*);             \
  template Status Engine::ShardOut<T>(const Engine::Matrix&, void*);                              \
  template Status Engine::FactorOut<T>(const Engine::Matrix&, void*, int64_t);                    \
  template Status Engine::Adopt<T>(const void*, int64_t, Factorization, Engine::Matrix*);         \
  template Status Engine::SignLogDet<T>(const Engine::Matrix&, void*, void*);                     \
  template Status Engine::Geqrf<T>(Engine::Matrix*, int*);                                        \
  template Status Engine::Orgqr<T>(Engine::Matrix*);                                              \
  template Status Engine::Gels<T>(Engine::Matrix*, const Engine::Matrix&, Engine::Matrix*, int*); \
  template Status Engine::LeadingRowsOut<T>(const Engine::Matrix&, void*, int64_t);               \
  template Status Engine::Eigh<T>(const Engine::Matrix&, bool, void*, Engine::Matrix*, int*);     \
  template Status Engine::VectorsOut<T>(const Engine::Matrix&, const Engine::Matrix&, void*);     \
  template Status Engine::MatrixIn<T>(const void*, Engine::Matrix*);                              \
  template Status Engine::RhsMatrixIn<T>(const void*, int64_t, Engine::Matrix*);                  \
  template Status Engine::RhsMatrixOut<T>(const Engine::Matrix&, void*);                          \
  template Status Engine::Trsm<T>(char, char, char, char, const Engine::Matrix&,                  \
                                  const Engine::Matrix&, int*);                                   \
  template Status Engine::Gemm<T>(char, const Engine::Matrix&, char, const Engine::Matrix&,       \
                                  Engine::Matrix*);                                               \
  template Status Engine::Sygvd<T>(const Engine::Matrix&, const Engine::Matrix&, bool, void*,     \
                                   Engine::Matrix*, int*);                                        \
  template Status Engine::SquareRowsOut<T>(const Engine::Matrix&, void*, int64_t, int64_t);       \
  template Status Engine::FillNan<T>(void*, int64_t);
#define JAXMG_INSTANTIATE_POLAR_STEPS(Engine, T)                                         \
  template Status Engine::Gesvd<T>(Engine::Matrix*, bool, bool, void*, int64_t, int64_t, \
                                   Engine::Matrix*, int*);                               \
  template Status Engine::PolarBegin<T>(bool, double*, int*);                            \
  template Status Engine::PolarQr<T>(double, double, double);                            \
  template Status Engine::PolarCholesky<T>(double, double, double, double*);             \
  template Status Engine::PolarEnd<T>(bool, Engine::Matrix*, int*);                      \
  template Status Engine::PolarValues<T>(const Engine::Matrix&, void*, int64_t, int64_t, int*);
