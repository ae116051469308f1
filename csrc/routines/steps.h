// The engine steps, declared once (the contract's half that the engines implement;
// routines/contract.h has the matrix handle and the call's attributes and buffers).
//
// JAXMG_ENGINE_STEPS(X) calls X(Name) for every step that is a template over the element type
// T (float, double, complex<float>, complex<double>), JAXMG_ENGINE_PLAIN_STEPS(X) for the few
// that are not, and JAXMG_STEP_<Name> is the step's parameter list. Everything else is generated
// from them:
//   - each engine's declarations: JAXMG_DECLARE_ENGINE_STEPS in its class body (engine.h);
//   - its explicit instantiations: JAXMG_INSTANTIATE_STEP(Name, T) next to each step's
//     definition, for every T (JAXMG_FOR_EACH_SCALAR);
//   - the check that routines use steps only through this list (tests/test_targets.py).
// Adding a step: its parameter list and meaning here, its name in the list, its definition and
// instantiation in each engine.
//
// In the parameter lists, Matrix is the engine's handle (DistributedMatrix over its descriptor).
// Status values are returned, never thrown; a failing step returns before the next collective
// only on an engine error, which every rank meets in the same step. Every step is collective
// over the mesh unless it says it is local.
//
// Besides the steps, an engine provides: using Matrix = DistributedMatrix<its descriptor>;
// const layout::Plan& plan(); bool asymmetric() (CheckSymmetry's verdict, agreed).
#pragma once

// ---- Checks on the input ----
// *out := whether the matrix is not symmetric (Hermitian), from the shards (common/symmetry.h);
// agreed by every rank.
#define JAXMG_STEP_Asymmetric (const void* shard, bool* out)
// Asymmetric's check, whose verdict comes with the next status agreement (Potrf's), as
// asymmetric(): the GPU engine saves two host round trips, the CPU engine decides at once.
#define JAXMG_STEP_CheckSymmetry (const void* shard)

// ---- The engine matrix, right-hand sides and second matrices ----
// *a := the engine matrix B from the shard (engine-local; in place where it can be: a->data is
// then the shard).
#define JAXMG_STEP_Prepare (void* shard, Matrix* a)
// *c := a new engine_rows x nrhs matrix with rows distributed like the engine matrix's:
// c[i] = conj?(b[orig(i)]), orig from the plan's axis; b's rows are split over the mesh's rows,
// or over its columns when attrs.transposed (the caller's layout).
#define JAXMG_STEP_RhsIn (const void* b, int64_t nrhs, Axis axis, bool conj, Matrix* c)
// x[orig(i)] = conj?(z[i]) for this shard's rows (z as RhsIn makes it).
#define JAXMG_STEP_RhsOut (const Matrix& z, void* x, Axis axis, bool conj)
// *out := a new identity distributed like `like` (square).
#define JAXMG_STEP_Identity (const Matrix& like, Matrix* out)
// (redistributed plans) *k := the second matrix (b, a shard of an n x n matrix sharded like a,
// read column-major as a is) in the engine's tiles, distributed like the engine matrix.
#define JAXMG_STEP_MatrixIn (const void* shard, Matrix* k)
// (redistributed plans) *c := Bᵀ, the rows x cols.extent matrix that the shards of b read
// column-major are (b: cols.extent x rows, sharded like a), in the engine's tiles, its columns
// distributed like the engine matrix's.
#define JAXMG_STEP_RhsMatrixIn (const void* b, int64_t rows, Matrix* c)
// x (sharded as b) := c in the JAX layout (RhsMatrixIn's inverse).
#define JAXMG_STEP_RhsMatrixOut (const Matrix& c, void* x)

// ---- Factorizations and solves ----
// a's lower triangle := L, a = L Lᴴ (a->factored := kCholesky); info agreed by every rank (max).
#define JAXMG_STEP_Potrf (Matrix * a, int* info)
// a := its pivoted LU factors (a->factored := kLu or kLuHostPivots, the pivots kept by the
// engine); info agreed by every rank (max).
#define JAXMG_STEP_Getrf (Matrix * a, int* info)
// c := B⁻¹ c for the Cholesky factor l of B.
#define JAXMG_STEP_Potrs (const Matrix& l, const Matrix& c)
// c := op(B)⁻¹ c for the LU factors lu of B, op = transpose ? Bᵀ : B.
#define JAXMG_STEP_Getrs (const Matrix& lu, const Matrix& c, bool transpose)
// (l from Potrf) *inverse := B⁻¹, a new matrix distributed like B.
#define JAXMG_STEP_CholeskyInverse (const Matrix& l, Matrix* inverse)
// (lu from Getrf) *inverse := M⁻¹, or M⁻ᵀ with transpose, a new matrix distributed like M (lu
// may be overwritten).
#define JAXMG_STEP_InverseSolve (const Matrix& lu, bool transpose, Matrix* inverse)
// (a redistributed engine matrix m, n x n; c from RhsIn or RhsMatrixIn) c := op(m)⁻¹ c (side
// 'L') or c op(m)⁻¹ (side 'R'), reading only the triangle `uplo` ('L' or 'U') of m; op 'N', 'T'
// or 'C'; diag 'U': a unit diagonal (not read), 'N': m's own. info, agreed by every rank before
// the solve: 1 + the first diagonal entry of m that is zero or not finite (diag 'N'), else 0;
// nothing solved when info != 0.
#define JAXMG_STEP_Trsm \
  (char side, char uplo, char op, char diag, const Matrix& m, const Matrix& c, int* info)
// (redistributed plans, n x n) *c := op_b(k) op_a(m), a new matrix distributed like m (op: 'N',
// 'T' or 'C').
#define JAXMG_STEP_Gemm (char op_b, const Matrix& k, char op_a, const Matrix& m, Matrix* c)

// ---- Determinants ----
// out = scale * Σ log|diag a|, NaN if !ok.
#define JAXMG_STEP_LogAbsDiag (const Matrix& a, double scale, bool ok, void* out)
// (lu from Getrf) det B's phase and log |det B|; sign 0 and -inf for an exactly singular B, NaN
// for a non-finite factor; the relabeling's parity included.
#define JAXMG_STEP_SignLogDet (const Matrix& lu, void* sign, void* logabsdet)

// ---- Kept factors ----
// out := the factored engine matrix f, kept for later solves: the engine-local matrix as it is
// (nothing to do where the engine worked in the shard, a copy where it padded), or the JAX
// layout where it redistributed.
#define JAXMG_STEP_FactorOut (const Matrix& f, void* out, int64_t count)
// *f := the engine matrix from a factor FactorOut wrote (read, never written; count checked),
// f->factored := holds.
#define JAXMG_STEP_Adopt (const void* factor, int64_t count, Factorization holds, Matrix* f)
// (plain) lu's pivots, global and 1-based (engine order), the same on every rank.
#define JAXMG_STEP_PivotsOut (const Matrix& lu, int32_t* out)
// (plain) the pivots of a kept LU factor (lu->factored := the kind whose pivots the engine now
// holds).
#define JAXMG_STEP_PivotsIn (const int32_t* in, Matrix* lu)

// ---- QR and least squares ----
// QR of the engine matrix a's leading cols.extent columns (all its rows), in place
// (a->factored := kQr); info: 1 + the first column holding a non-finite entry, or 0, agreed.
#define JAXMG_STEP_Geqrf (Matrix * a, int* info)
// (a from Geqrf) a := Q of that factorization (its leading cols.extent columns).
#define JAXMG_STEP_Orgqr (Matrix * a)
// Least squares min ‖B z − c‖ for the engine matrix a (factored in place: a->factored := kQr)
// and c from RhsIn (overwritten); *z := the solution, in its leading cols.extent rows (c's
// storage, or replicated); info as Geqrf's, or 1 + the first exactly zero diagonal entry of R
// (rank deficient), agreed.
#define JAXMG_STEP_Gels (Matrix * a, const Matrix& c, Matrix* z, int* info)

// ---- Eigenvalues and singular values ----
// (a redistributed Hermitian engine matrix a, lower triangle; overwritten) its eigenvalues,
// ascending, into the n entries of x (real parts), the same on every rank; with `vectors`
// *z := the eigenvectors Z (columns), a new matrix distributed like a (z->adjoint: it holds Zᴴ);
// info agreed: > 0 for no convergence or a non-finite entry (then nothing solved).
#define JAXMG_STEP_Eigh (const Matrix& a, bool vectors, void* x, Matrix* z, int* info)
// The generalized problem M z = λ K z for the engine matrix m (Hermitian, lower triangle) and
// the second matrix k (positive definite, lower triangle; both overwritten): λ into x as Eigh,
// the vectors into *z as Eigh's; info agreed: n + i when K's leading minor of order i is not
// positive definite, else as Eigh's.
#define JAXMG_STEP_Sygvd \
  (const Matrix& m, const Matrix& k, bool vectors, void* x, Matrix* z, int* info)
// (a redistributed m x n engine matrix a, m >= n; overwritten) its singular values, descending,
// into the last of x's x_cols columns for x's rows (row-major; x_rows of the n, as for
// LeadingRowsOut); with vectors_u *a := U (m x n, a's layout), with vectors_vt *vt := Vᴴ (n x n,
// a new matrix whose columns are distributed like a's); info agreed: > 0 for no convergence or
// a non-finite entry (nothing solved).
#define JAXMG_STEP_Gesvd                                                                 \
  (Matrix * a, bool vectors_u, bool vectors_vt, void* x, int64_t x_rows, int64_t x_cols, \
   Matrix* vt, int* info)

// ---- QDWH (routines/polar.h), on a redistributed m x n engine matrix u, m >= n, which holds U
// in place throughout (the handle from Prepare, passed to each step); the iteration's other
// operands (A kept, W, Z, the stacked Y) are the engine's own ----
// info agreed: > 0 for a non-finite entry (nothing more to do); else U := A / (‖A‖₁ ‖A‖∞)^½
// (A kept, keep_a) and *lower := 1 / ‖L⁻¹‖_F for UᴴU = L Lᴴ, or 0 where the factorization
// fails; the same on every rank.
#define JAXMG_STEP_PolarBegin (const Matrix& u, bool keep_a, double* lower, int* info)
// U := e U + coef Q₁ Q₂ᴴ, [sqrt_c U; I] = [Q₁; Q₂] R.
#define JAXMG_STEP_PolarQr (const Matrix& u, double sqrt_c, double coef, double e)
// U := e U + coef U Z⁻¹, Z = I + c UᴴU; *change := ‖U − U_prev‖_F, the same on every rank.
#define JAXMG_STEP_PolarCholesky (const Matrix& u, double c, double coef, double e, double* change)
// U := (3U − U UᴴU) / 2 (in u); with h, *hm := H = ½ (UᴴA + AᴴU), a new n x n
// matrix (columns distributed like the engine matrix's); info agreed: > 0 for a non-finite
// entry of U.
#define JAXMG_STEP_PolarEnd (const Matrix& u, bool h, Matrix* hm, int* info)
// (hm from PolarEnd; overwritten) H's eigenvalues, A's singular values: descending, at least 0,
// into x's last column for x's rows (as Gesvd's); info agreed.
#define JAXMG_STEP_PolarValues \
  (const Matrix& hm, void* x, int64_t x_rows, int64_t x_cols, int* info)

// ---- Results ----
// The shard := its part of y (distributed like the engine matrix: an inverse, a product) in the
// JAX layout (undoing relabeling, padding or redistribution; nothing to do where y is the shard
// itself).
#define JAXMG_STEP_ShardOut (const Matrix& y, void* shard)
// x (row-major) := this shard's x_rows of the first cols.extent rows, in engine order, of R (y
// from Geqrf: its leading cols.extent columns) or of a least-squares solution (y from Gels: all
// its columns); x_rows is all of them or the block of the caller's right-hand-side layout.
#define JAXMG_STEP_LeadingRowsOut (const Matrix& y, void* x, int64_t x_rows)
// The shard := its part of the eigenvector matrix z in the JAX layout (columns are
// eigenvectors); work (distributed like z, e.g. the solver's spent input) is overwritten.
#define JAXMG_STEP_VectorsOut (const Matrix& z, const Matrix& work, void* shard)
// Columns 0..n-1 of x (row stride x_cols) := this shard's x_rows of the n x n matrix s (Vᴴ, H).
#define JAXMG_STEP_SquareRowsOut (const Matrix& s, void* x, int64_t x_rows, int64_t x_cols)
// (local) x[0..count) := NaN.
#define JAXMG_STEP_FillNan (void* x, int64_t count)
// (plain, local) *status := info.
#define JAXMG_STEP_WriteStatus (int info, int32_t* status)
// (plain) The end of every call, reached by every rank that ran it: the CPU engine keeps MPI
// progressing until all have finished and agrees on a local failure.
#define JAXMG_STEP_Finish (const Status& result)

// clang-format off
#define JAXMG_ENGINE_STEPS(X)                                                                   \
  X(Asymmetric) X(CheckSymmetry)                                                               \
  X(Prepare) X(RhsIn) X(RhsOut) X(Identity) X(MatrixIn) X(RhsMatrixIn) X(RhsMatrixOut)         \
  X(Potrf) X(Getrf) X(Potrs) X(Getrs) X(CholeskyInverse) X(InverseSolve) X(Trsm) X(Gemm)       \
  X(LogAbsDiag) X(SignLogDet)                                                                  \
  X(FactorOut) X(Adopt)                                                                        \
  X(Geqrf) X(Orgqr) X(Gels)                                                                    \
  X(Eigh) X(Sygvd) X(Gesvd)                                                                    \
  X(PolarBegin) X(PolarQr) X(PolarCholesky) X(PolarEnd) X(PolarValues)                         \
  X(ShardOut) X(LeadingRowsOut) X(VectorsOut) X(SquareRowsOut) X(FillNan)
#define JAXMG_ENGINE_PLAIN_STEPS(X) X(PivotsOut) X(PivotsIn) X(WriteStatus) X(Finish)
// clang-format on

#define JAXMG_DECLARE_STEP_(Name) \
  template <typename T>           \
  Status Name JAXMG_STEP_##Name;
#define JAXMG_DECLARE_PLAIN_STEP_(Name) Status Name JAXMG_STEP_##Name;
// Inside an engine's class body (public): every step's declaration.
#define JAXMG_DECLARE_ENGINE_STEPS        \
  JAXMG_ENGINE_STEPS(JAXMG_DECLARE_STEP_) \
  JAXMG_ENGINE_PLAIN_STEPS(JAXMG_DECLARE_PLAIN_STEP_)

// Next to a step's definition (in namespace scope of the engine's class Engine): its explicit
// instantiation for T.
#define JAXMG_INSTANTIATE_STEP(Name, T) template Status Engine::Name<T> JAXMG_STEP_##Name;
