// The contract between the routines (csrc/routines/) and the engines: a call's attributes and
// buffers (SolveAttrs, SolveIo), what every rank agrees on before a collective
// (CallFingerprint), and the typed steps an engine provides. No XLA here: the FFI layer
// (ffi/families.h) fills these from its bindings, and the engines and routines see only them.
//
// An engine E provides, for T in float, double, complex<float>, complex<double>:
//   const layout::Plan& plan();
//   Status Asymmetric<T>(const void* shard, bool* out)
//   Status CheckSymmetry<T>(const void* shard) the same check, whose verdict comes with the next
//                                         status agreement (Potrf's): bool asymmetric(), agreed
//                                         by every rank (the GPU engine saves two host round
//                                         trips; the CPU engine decides at once)
//                                         whether the matrix is not symmetric (Hermitian), from
//                                         the shards (common/symmetry.h); agreed by every rank
//   Status Prepare<T>(void* shard)        engine-local matrix from the shard (in place if it can)
//   Status Potrf<T>(int* info)            lower Cholesky; info agreed by every rank (max)
//   Status Getrf<T>(int* info)            pivoted LU; info agreed by every rank (max)
//   Status Potrs<T>()                     solve with the factor on the right-hand side held
//   Status Getrs<T>(bool transpose)       op(B) z = c, op = transpose ? Bᵀ : B
//   Status LogAbsDiag<T>(double scale, bool ok, void* out)
//                                         out = scale * Σ log|diag| (collective), NaN if !ok
//   Status RhsIn<T>(const void* b, int64_t nrhs, Axis axis, bool conj)
//                                         c[i] = conj?(b[orig(i)]), orig from the plan's axis;
//                                         b's rows are split over the mesh's rows, or over its
//                                         columns when attrs.transposed (the caller's layout)
//   Status RhsOut<T>(void* x, Axis axis, bool conj)
//                                         x[orig(i)] = conj?(z[i]) (this shard's rows)
//   Status Identity<T>()                  the right-hand side := the identity, distributed like
//                                         the engine matrix (for the inverse)
//   Status InverseSolve<T>(bool transpose)
//                                         (after Getrf) the right-hand side := M⁻¹, or M⁻ᵀ with
//                                         transpose, distributed like the engine matrix
//   Status InverseOut<T>(void* shard)     the shard := its part of the solution of B Y = I, in
//                                         the JAX layout (undoing relabeling, padding or
//                                         redistribution)
//   Status FactorOut<T>(void* out, int64_t count)
//                                         out := the factored engine matrix, kept for later
//                                         solves: the engine-local matrix as it is (nothing to do
//                                         where the engine worked in the shard, a copy where it
//                                         padded), or the JAX layout where it redistributed
//   Status Adopt<T>(const void* factor, int64_t count)
//                                         the engine matrix := a factor FactorOut wrote (read,
//                                         never written; count checked)
//   Status PivotsOut(int32_t* out)        the LU pivots, global and 1-based (engine order),
//                                         the same on every rank
//   Status PivotsIn(const int32_t* in)    the pivots of a kept LU factor
//   Status SignLogDet<T>(void* sign, void* logabsdet)
//                                         after Getrf: det B's phase and log |det B| (collective);
//                                         sign 0 and -inf for an exactly singular B, NaN for a
//                                         non-finite factor; the relabeling's parity included
//   Status Geqrf<T>(int* info)            QR of the engine matrix's leading cols.extent columns
//                                         (all its rows); info: 1 + the first column holding a
//                                         non-finite entry, or 0, agreed by every rank
//   Status Orgqr<T>()                     the engine matrix := Q of that factorization (its
//                                         leading cols.extent columns)
//   Status Gels<T>(int* info)             least squares min ‖B z − c‖ with the right-hand side
//                                         held; info as Geqrf's, or 1 + the first exactly zero
//                                         diagonal entry of R (rank deficient), agreed
//   Status LeadingRowsOut<T>(bool from_matrix, void* x, int64_t x_rows)
//                                         x (row-major) := this shard's x_rows of the first
//                                         cols.extent rows, in engine order, of the engine
//                                         matrix's leading cols.extent columns (from_matrix: R)
//                                         or of the right-hand side (a least-squares solution);
//                                         x_rows is all of them or the block of the caller's
//                                         right-hand-side layout (collective)
//   Status Eigh<T>(bool vectors, void* x, int* info)
//                                         (a redistributed Hermitian engine matrix, lower
//                                         triangle) its eigenvalues, ascending, into the n
//                                         entries of x (real parts), the same on every rank; with
//                                         `vectors` the eigenvectors kept; info agreed: > 0 for no
//                                         convergence or a non-finite entry (then nothing solved)
//   Status VectorsOut<T>(void* shard)     the shard := its part of the eigenvector matrix in the
//                                         JAX layout (columns are eigenvectors)
//   Status MatrixIn<T>(const void* shard) (redistributed plans) the second matrix (b, a shard
//                                         of an n x n matrix sharded like a, read column-major
//                                         as a is) into the engine's tiles
//   Status Gemm<T>(char op_b, char op_a)  (redistributed plans) the engine matrix := op_b(K)
//                                         op_a(M) for the second matrix K and the engine
//                                         matrix M (op: 'N', 'T' or 'C')
//   Status Sygvd<T>(bool vectors, void* x, int* info)
//                                         the generalized problem M z = λ K z for the engine
//                                         matrix M (Hermitian, lower triangle) and the second
//                                         matrix K (positive definite, lower triangle): λ into
//                                         x as Eigh, the vectors kept for VectorsOut; info
//                                         agreed: n + i when K's leading minor of order i is
//                                         not positive definite, else as Eigh's
//   Status Gesvd<T>(bool vectors_u, bool vectors_vt, void* x, int64_t x_rows, int64_t x_cols,
//                   int* info)            (a redistributed m x n engine matrix, m >= n) its
//                                         singular values, descending, into the last of x's
//                                         x_cols columns for x's rows (row-major; x_rows of the
//                                         n, as for LeadingRowsOut); with vectors_u the engine
//                                         matrix := U (m x n), with vectors_vt Vᴴ (n x n) kept
//                                         as the square matrix; info agreed: > 0 for no
//                                         convergence or a non-finite entry (nothing solved)
//   QDWH's steps (routines/polar.h), on a redistributed m x n engine matrix, m >= n:
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
//   Status PolarEnd<T>(bool h, int* info) U := (3U − U UᴴU) / 2, the engine matrix := U; with
//                                         h, H := ½ (UᴴA + AᴴU) kept as the square matrix; info
//                                         agreed: > 0 for a non-finite entry of U
//   Status PolarValues<T>(void* x, int64_t x_rows, int64_t x_cols, int* info)
//                                         (after PolarEnd with h) H's eigenvalues, A's singular
//                                         values: descending, at least 0, into x's last column
//                                         for x's rows (as Gesvd's); info agreed
//   Status RhsMatrixIn<T>(const void* b, int64_t rows)
//                                         (redistributed plans) the right-hand side := Bᵀ, the
//                                         rows x cols.extent matrix that the shards of b read
//                                         column-major are (b: cols.extent x rows, sharded like
//                                         a: its rows over the mesh's rows, its columns over its
//                                         columns), in the engine's tiles, its columns
//                                         distributed like the engine matrix's
//   Status RhsMatrixOut<T>(void* x)       x (sharded as b) := the right-hand side in the JAX
//                                         layout (RhsMatrixIn's inverse)
//   Status Trsm<T>(char side, char uplo, char op, char diag, int* info)
//                                         (a redistributed engine matrix M) the right-hand side
//                                         c := op(M)⁻¹ c (side 'L') or c op(M)⁻¹ (side 'R'),
//                                         reading only the triangle `uplo` ('L' or 'U') of M;
//                                         op 'N', 'T' or 'C'; diag 'U': a unit diagonal (not
//                                         read), 'N': M's own. info, agreed by every rank
//                                         before the solve: 1 + the first diagonal entry of M
//                                         that is zero or not finite (diag 'N'), else 0;
//                                         nothing solved when info != 0
//   Status SquareRowsOut<T>(void* x, int64_t x_rows, int64_t x_cols)
//                                         columns 0..n-1 of x (row stride x_cols) := this
//                                         shard's x_rows of the square matrix kept (collective)
//   Status WorkOut<T>(void* shard)        the shard := the engine matrix in the JAX layout
//                                         (nothing to do where the engine worked in the shard)
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
#define JAXMG_INSTANTIATE_SOLVE_STEPS(Engine, T)                      \
  template Status Engine::Asymmetric<T>(const void*, bool*);          \
  template Status Engine::CheckSymmetry<T>(const void*);              \
  template Status Engine::Prepare<T>(void*);                          \
  template Status Engine::Potrf<T>(int*);                             \
  template Status Engine::Getrf<T>(int*);                             \
  template Status Engine::Potrs<T>();                                 \
  template Status Engine::Getrs<T>(bool);                             \
  template Status Engine::LogAbsDiag<T>(double, bool, void*);         \
  template Status Engine::RhsIn<T>(const void*, int64_t, Axis, bool); \
  template Status Engine::RhsOut<T>(void*, Axis, bool);               \
  template Status Engine::Identity<T>();                              \
  template Status Engine::InverseSolve<T>(bool);                      \
  template Status Engine::CholeskyInverse<T>();                       \
  template Status Engine::InverseOut<T>(void*);                       \
  template Status Engine::FactorOut<T>(void*, int64_t);               \
  template Status Engine::Adopt<T>(const void*, int64_t);             \
  template Status Engine::SignLogDet<T>(void*, void*);                \
  template Status Engine::Geqrf<T>(int*);                             \
  template Status Engine::Orgqr<T>();                                 \
  template Status Engine::Gels<T>(int*);                              \
  template Status Engine::LeadingRowsOut<T>(bool, void*, int64_t);    \
  template Status Engine::WorkOut<T>(void*);                          \
  template Status Engine::Eigh<T>(bool, void*, int*);                 \
  template Status Engine::VectorsOut<T>(void*);                       \
  template Status Engine::MatrixIn<T>(const void*);                   \
  template Status Engine::RhsMatrixIn<T>(const void*, int64_t);       \
  template Status Engine::RhsMatrixOut<T>(void*);                     \
  template Status Engine::Trsm<T>(char, char, char, char, int*);      \
  template Status Engine::Gemm<T>(char, char);                        \
  template Status Engine::Sygvd<T>(bool, void*, int*);                \
  template Status Engine::SquareRowsOut<T>(void*, int64_t, int64_t);  \
  template Status Engine::FillNan<T>(void*, int64_t);
#define JAXMG_INSTANTIATE_POLAR_STEPS(Engine, T)                               \
  template Status Engine::Gesvd<T>(bool, bool, void*, int64_t, int64_t, int*); \
  template Status Engine::PolarBegin<T>(bool, double*, int*);                  \
  template Status Engine::PolarQr<T>(double, double, double);                  \
  template Status Engine::PolarCholesky<T>(double, double, double, double*);   \
  template Status Engine::PolarEnd<T>(bool, int*);                             \
  template Status Engine::PolarValues<T>(void*, int64_t, int64_t, int*);
