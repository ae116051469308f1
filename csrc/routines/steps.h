// The engine steps: the contract's half that the engines implement (routines/contract.h has the
// matrix handle and the call's attributes and buffers).
//
// EngineSteps below is the contract, written as a class: each step's declaration under its
// meaning. It is a reference, never defined or instantiated. Each engine's class
// (engines/*/engine.h) declares the same steps, in the same order and groups, each under a
// one-line meaning; explicit instantiations for the four element types (JAXMG_FOR_EACH_SCALAR)
// follow the definitions; and the engine's engine.cc asserts StepsMatch<Engine>() (end of this
// header), which holds each of its steps to EngineSteps' at compile time.
// Adding or changing a step: its declaration and meaning here and its line in StepsMatchFor;
// then in each engine its declaration, definition and instantiation (the compiler names
// whichever is missing or differs).
//
// Matrix<T> is the engine's handle (DistributedMatrix of element type T over its descriptor), and
// the buffers a step reads or writes are typed too: a step takes T from its arguments. Status
// values are returned, never thrown; a failing step returns before the next collective only on an
// engine error, which every rank meets in the same step. Every step is collective over the mesh
// unless it says it is local. A step is a template over the element type T (float, double,
// complex<float>, complex<double>), deduced from its handles and buffers, unless it needs none
// (WriteStatus, Finish).
#pragma once

#include <complex>
#include <cstdint>
#include <type_traits>

#include "common/status.h"
#include "layout/layout.h"
#include "routines/contract.h"

namespace jaxmg {

template <class Descriptor, class Pivots, class Reflectors, class QdwhOperands>
class EngineSteps {
 public:
  template <typename T>
  using Matrix = DistributedMatrix<T, Descriptor>;
  // Besides the steps, an engine provides its `Descriptor` and this `Matrix<T>` (the handle a
  // routine names MatrixOf<E, T>), its `Pivots` (an LU factorization's row interchanges, as Getrf
  // leaves them for the steps that read them) and `Reflectors` (what Geqrf leaves for Orgqr: the
  // Householder scalars, and the own QR's T_k) and `QdwhOperands` (QDWH's operands between its
  // steps, which PolarBegin makes): handles of their own, never engine state; its plan and
  // CheckSymmetry's verdict (agreed):
  const layout::Plan& plan() const;
  bool asymmetric() const;

  // ---- Checks on the input ----
  // *out := whether the matrix is not symmetric (Hermitian), from the shards (common/symmetry.h);
  // agreed by every rank.
  template <typename T>
  Status Asymmetric(const T* shard, bool* out);
  // Asymmetric's check, whose verdict comes with the next status agreement (Potrf's), as
  // asymmetric(): the GPU engine saves two host round trips, the CPU engine decides at once.
  template <typename T>
  Status CheckSymmetry(const T* shard);

  // ---- The engine matrix, right-hand sides and second matrices ----
  // *a := the engine matrix B from the shard (engine-local; in place where it can be: a->data is
  // then the shard).
  template <typename T>
  Status Prepare(T* shard, Matrix<T>* a);
  // *c := a new engine_rows x nrhs matrix with rows distributed like the engine matrix's:
  // c[i] = conj?(b[orig(i)]), orig from the plan's axis; b's rows are split over the mesh's rows,
  // or over its columns when attrs.transposed (the caller's layout).
  template <typename T>
  Status RhsIn(const T* b, int64_t nrhs, Axis axis, bool conj, Matrix<T>* c);
  // x[orig(i)] = conj?(z[i]) for this shard's rows (z as RhsIn makes it).
  template <typename T>
  Status RhsOut(const Matrix<T>& z, T* x, Axis axis, bool conj);
  // *out := a new identity distributed like `like` (square).
  template <typename T>
  Status Identity(const Matrix<T>& like, Matrix<T>* out);
  // (redistributed plans) *k := the second matrix (b, a shard of an n x n matrix sharded like a,
  // read column-major as a is) in the engine's tiles, distributed like the engine matrix.
  template <typename T>
  Status MatrixIn(const T* shard, Matrix<T>* k);
  // (redistributed plans) *c := Bᵀ, the rows x cols.extent matrix that the shards of b read
  // column-major are (b: cols.extent x rows, sharded like a), in the engine's tiles, its columns
  // distributed like the engine matrix's.
  template <typename T>
  Status RhsMatrixIn(const T* b, int64_t rows, Matrix<T>* c);
  // x (sharded as b) := c in the JAX layout (RhsMatrixIn's inverse).
  template <typename T>
  Status RhsMatrixOut(const Matrix<T>& c, T* x);

  // ---- Factorizations and solves ----
  // a's lower triangle := L, a = L Lᴴ (a->factored := kCholesky); info agreed by every rank (max).
  template <typename T>
  Status Potrf(Matrix<T>* a, int* info);
  // a := its pivoted LU factors (a->factored := kLu or kLuHostPivots), *piv := their row
  // interchanges; info agreed by every rank (max).
  template <typename T>
  Status Getrf(Matrix<T>* a, Pivots* piv, int* info);
  // c := B⁻¹ c for the Cholesky factor l of B.
  template <typename T>
  Status Potrs(const Matrix<T>& l, const Matrix<T>& c);
  // c := op(B)⁻¹ c for the LU factors lu of B and their pivots, op = transpose ? Bᵀ : B.
  template <typename T>
  Status Getrs(const Matrix<T>& lu, const Pivots& piv, const Matrix<T>& c, bool transpose);
  // (l from Potrf) *inverse := B⁻¹, a new matrix distributed like B.
  template <typename T>
  Status CholeskyInverse(const Matrix<T>& l, Matrix<T>* inverse);
  // (lu, piv from Getrf) *inverse := M⁻¹, or M⁻ᵀ with transpose, a new matrix distributed like
  // M (lu may be overwritten).
  template <typename T>
  Status InverseSolve(const Matrix<T>& lu, const Pivots& piv, bool transpose, Matrix<T>* inverse);
  // (a redistributed engine matrix m, n x n; c from RhsIn or RhsMatrixIn) c := op(m)⁻¹ c (side
  // 'L') or c op(m)⁻¹ (side 'R'), reading only the triangle `uplo` ('L' or 'U') of m; op 'N', 'T'
  // or 'C'; diag 'U': a unit diagonal (not read), 'N': m's own. info, agreed by every rank before
  // the solve: 1 + the first diagonal entry of m that is zero or not finite (diag 'N'), else 0;
  // nothing solved when info != 0.
  template <typename T>
  Status Trsm(char side, char uplo, char op, char diag, const Matrix<T>& m, const Matrix<T>& c,
              int* info);
  // (redistributed plans, n x n) *c := op_b(k) op_a(m), a new matrix distributed like m (op: 'N',
  // 'T' or 'C').
  template <typename T>
  Status Gemm(char op_b, const Matrix<T>& k, char op_a, const Matrix<T>& m, Matrix<T>* c);

  // ---- Determinants ----
  // out = scale * Σ log|diag a|, NaN if !ok.
  template <typename T>
  Status LogAbsDiag(const Matrix<T>& a, double scale, bool ok, RealOf<T>* out);
  // (lu, piv from Getrf) det B's phase and log |det B|; sign 0 and -inf for an exactly singular
  // B, NaN for a non-finite factor; the relabeling's parity included.
  template <typename T>
  Status SignLogDet(const Matrix<T>& lu, const Pivots& piv, T* sign, RealOf<T>* logabsdet);

  // ---- Kept factors ----
  // out := the factored engine matrix f, kept for later solves: the engine-local matrix as it is
  // (nothing to do where the engine worked in the shard, a copy where it padded), or the JAX
  // layout where it redistributed.
  template <typename T>
  Status FactorOut(const Matrix<T>& f, T* out, int64_t count);
  // *f := the engine matrix from a factor FactorOut wrote (read, never written; count checked),
  // f->factored := holds.
  template <typename T>
  Status Adopt(const T* factor, int64_t count, Factorization holds, Matrix<T>* f);
  // lu's pivots piv, global and 1-based (engine order), the same on every rank.
  template <typename T>
  Status PivotsOut(const Matrix<T>& lu, const Pivots& piv, int32_t* out);
  // *piv := the pivots of a kept LU factor (lu->factored := the kind of pivots *piv holds).
  template <typename T>
  Status PivotsIn(const int32_t* in, Matrix<T>* lu, Pivots* piv);

  // ---- QR and least squares ----
  // QR of the engine matrix a's leading cols.extent columns (all its rows), in place
  // (a->factored := kQr), *tau its reflectors' scalars; info: 1 + the first column holding a
  // non-finite entry, or 0, agreed.
  template <typename T>
  Status Geqrf(Matrix<T>* a, Reflectors* tau, int* info);
  // (a, tau from Geqrf) a := Q of that factorization (its leading cols.extent columns).
  template <typename T>
  Status Orgqr(Matrix<T>* a, const Reflectors& tau);
  // Least squares min ‖B z − c‖ for the engine matrix a (factored in place: a->factored := kQr)
  // and c from RhsIn (overwritten); *z := the solution, in its leading cols.extent rows (c's
  // storage, or replicated); info as Geqrf's, or 1 + the first exactly zero diagonal entry of R
  // (rank deficient), agreed.
  template <typename T>
  Status Gels(Matrix<T>* a, const Matrix<T>& c, Matrix<T>* z, int* info);

  // ---- Eigenvalues and singular values ----
  // (a redistributed Hermitian engine matrix a, lower triangle; overwritten) its eigenvalues,
  // ascending, into the n entries of x (real parts), the same on every rank; with `vectors`
  // *z := the eigenvectors Z (columns), a new matrix distributed like a (z->adjoint: it holds Zᴴ);
  // info agreed: > 0 for no convergence or a non-finite entry (then nothing solved). With a
  // subset (lo, hi) only the eigenvalues lo..hi-1 into x's first k = hi - lo entries and their
  // vectors into z's first k columns (the rest undefined); an engine without that path refuses it.
  template <typename T>
  Status Eigh(const Matrix<T>& a, bool vectors, EigenRange subset, T* x, Matrix<T>* z, int* info);
  // The generalized problem M z = λ K z for the engine matrix m (Hermitian, lower triangle) and
  // the second matrix k (positive definite, lower triangle; both overwritten): λ into x as Eigh,
  // the vectors into *z as Eigh's; info agreed: n + i when K's leading minor of order i is not
  // positive definite, else as Eigh's; the subset as Eigh's.
  template <typename T>
  Status Sygvd(const Matrix<T>& m, const Matrix<T>& k, bool vectors, EigenRange subset, T* x,
               Matrix<T>* z, int* info);
  // (a redistributed m x n engine matrix a, m >= n; overwritten) its singular values, descending,
  // into the last of x's x_cols columns for x's rows (row-major; x_rows of the n, as for
  // LeadingRowsOut); with vectors_u *a := U (m x n, a's layout), with vectors_vt *vt := Vᴴ (n x n,
  // a new matrix whose columns are distributed like a's); info agreed: > 0 for no convergence or
  // a non-finite entry (nothing solved).
  template <typename T>
  Status Gesvd(Matrix<T>* a, bool vectors_u, bool vectors_vt, T* x, int64_t x_rows, int64_t x_cols,
               Matrix<T>* vt, int* info);

  // ---- QDWH (routines/polar.h), on a redistributed m x n engine matrix u, m >= n, which holds U
  // in place throughout (the handle from Prepare, passed to each step); the iteration's other
  // operands (A kept, W, Z, the stacked Y) are *q, which PolarBegin makes and each step takes
  // ----
  // info agreed: > 0 for a non-finite entry (nothing more to do); else U := A / (‖A‖₁ ‖A‖∞)^½
  // (A kept, keep_a) and *lower := 1 / ‖L⁻¹‖_F for UᴴU = L Lᴴ, or 0 where the factorization
  // fails; the same on every rank.
  template <typename T>
  Status PolarBegin(const Matrix<T>& u, bool keep_a, QdwhOperands* q, double* lower, int* info);
  // U := e U + coef Q₁ Q₂ᴴ, [sqrt_c U; I] = [Q₁; Q₂] R.
  template <typename T>
  Status PolarQr(const Matrix<T>& u, QdwhOperands* q, double sqrt_c, double coef, double e);
  // U := e U + coef U Z⁻¹, Z = I + c UᴴU; *change := ‖U − U_prev‖_F, the same on every rank.
  template <typename T>
  Status PolarCholesky(const Matrix<T>& u, QdwhOperands* q, double c, double coef, double e,
                       double* change);
  // U := (3U − U UᴴU) / 2 (in u); with h, *hm := H = ½ (UᴴA + AᴴU), a new n x n
  // matrix (columns distributed like the engine matrix's); info agreed: > 0 for a non-finite
  // entry of U.
  template <typename T>
  Status PolarEnd(const Matrix<T>& u, QdwhOperands* q, bool h, Matrix<T>* hm, int* info);
  // (hm from PolarEnd; overwritten) H's eigenvalues, A's singular values: descending, at least 0,
  // into x's last column for x's rows (as Gesvd's); info agreed.
  template <typename T>
  Status PolarValues(const Matrix<T>& hm, QdwhOperands* q, T* x, int64_t x_rows, int64_t x_cols,
                     int* info);

  // ---- Results ----
  // The shard := its part of y (distributed like the engine matrix: an inverse, a product) in the
  // JAX layout (undoing relabeling, padding or redistribution; nothing to do where y is the shard
  // itself).
  template <typename T>
  Status ShardOut(const Matrix<T>& y, T* shard);
  // x (row-major) := this shard's x_rows of the first cols.extent rows, in engine order, of R (y
  // from Geqrf: its leading cols.extent columns) or of a least-squares solution (y from Gels: all
  // its columns); x_rows is all of them or the block of the caller's right-hand-side layout.
  template <typename T>
  Status LeadingRowsOut(const Matrix<T>& y, T* x, int64_t x_rows);
  // The shard := its part of the eigenvector matrix z in the JAX layout (columns are
  // eigenvectors); work (distributed like z, e.g. the solver's spent input) is overwritten.
  template <typename T>
  Status VectorsOut(const Matrix<T>& z, const Matrix<T>& work, T* shard);
  // Columns 0..n-1 of x (row stride x_cols) := this shard's x_rows of the n x n matrix s (Vᴴ, H).
  template <typename T>
  Status SquareRowsOut(const Matrix<T>& s, T* x, int64_t x_rows, int64_t x_cols);
  // (local) x[0..count) := NaN.
  template <typename T>
  Status FillNan(T* x, int64_t count);
  // (local) *status := info.
  Status WriteStatus(int info, int32_t* status);
  // The end of every call, reached by every rank that ran it: the CPU engine keeps MPI
  // progressing until all have finished and agrees on a local failure.
  Status Finish(const Status& result);
};

namespace steps_check {

// A member function's type without its class: R(A...), or R(A...) const.
template <class P>
struct Unbound;
template <class C, class F>
struct Unbound<F C::*> {
  using type = F;
};
// Whether two member functions (of different classes) have the same type.
template <class P, class Q>
constexpr bool kSame = std::is_same_v<typename Unbound<P>::type, typename Unbound<Q>::type>;

}  // namespace steps_check

// Holds engine E to EngineSteps for element type T: each step of E has the type of EngineSteps'
// step (the same return and parameter types), and there is one of it (no overload). A step that
// is missing, overloaded or of another type stops the build at its line here.
template <class E, class T>
constexpr bool StepsMatchFor() {
  using S = EngineSteps<typename E::Descriptor, typename E::Pivots, typename E::Reflectors,
                        typename E::QdwhOperands>;
  using steps_check::kSame;
  static_assert(kSame<decltype(&E::plan), decltype(&S::plan)>);
  static_assert(kSame<decltype(&E::asymmetric), decltype(&S::asymmetric)>);
  static_assert(kSame<decltype(&E::template Asymmetric<T>), decltype(&S::template Asymmetric<T>)>);
  static_assert(
      kSame<decltype(&E::template CheckSymmetry<T>), decltype(&S::template CheckSymmetry<T>)>);
  static_assert(kSame<decltype(&E::template Prepare<T>), decltype(&S::template Prepare<T>)>);
  static_assert(kSame<decltype(&E::template RhsIn<T>), decltype(&S::template RhsIn<T>)>);
  static_assert(kSame<decltype(&E::template RhsOut<T>), decltype(&S::template RhsOut<T>)>);
  static_assert(kSame<decltype(&E::template Identity<T>), decltype(&S::template Identity<T>)>);
  static_assert(kSame<decltype(&E::template MatrixIn<T>), decltype(&S::template MatrixIn<T>)>);
  static_assert(
      kSame<decltype(&E::template RhsMatrixIn<T>), decltype(&S::template RhsMatrixIn<T>)>);
  static_assert(
      kSame<decltype(&E::template RhsMatrixOut<T>), decltype(&S::template RhsMatrixOut<T>)>);
  static_assert(kSame<decltype(&E::template Potrf<T>), decltype(&S::template Potrf<T>)>);
  static_assert(kSame<decltype(&E::template Getrf<T>), decltype(&S::template Getrf<T>)>);
  static_assert(kSame<decltype(&E::template Potrs<T>), decltype(&S::template Potrs<T>)>);
  static_assert(kSame<decltype(&E::template Getrs<T>), decltype(&S::template Getrs<T>)>);
  static_assert(
      kSame<decltype(&E::template CholeskyInverse<T>), decltype(&S::template CholeskyInverse<T>)>);
  static_assert(
      kSame<decltype(&E::template InverseSolve<T>), decltype(&S::template InverseSolve<T>)>);
  static_assert(kSame<decltype(&E::template Trsm<T>), decltype(&S::template Trsm<T>)>);
  static_assert(kSame<decltype(&E::template Gemm<T>), decltype(&S::template Gemm<T>)>);
  static_assert(kSame<decltype(&E::template LogAbsDiag<T>), decltype(&S::template LogAbsDiag<T>)>);
  static_assert(kSame<decltype(&E::template SignLogDet<T>), decltype(&S::template SignLogDet<T>)>);
  static_assert(kSame<decltype(&E::template FactorOut<T>), decltype(&S::template FactorOut<T>)>);
  static_assert(kSame<decltype(&E::template Adopt<T>), decltype(&S::template Adopt<T>)>);
  static_assert(kSame<decltype(&E::template PivotsOut<T>), decltype(&S::template PivotsOut<T>)>);
  static_assert(kSame<decltype(&E::template PivotsIn<T>), decltype(&S::template PivotsIn<T>)>);
  static_assert(kSame<decltype(&E::template Geqrf<T>), decltype(&S::template Geqrf<T>)>);
  static_assert(kSame<decltype(&E::template Orgqr<T>), decltype(&S::template Orgqr<T>)>);
  static_assert(kSame<decltype(&E::template Gels<T>), decltype(&S::template Gels<T>)>);
  static_assert(kSame<decltype(&E::template Eigh<T>), decltype(&S::template Eigh<T>)>);
  static_assert(kSame<decltype(&E::template Sygvd<T>), decltype(&S::template Sygvd<T>)>);
  static_assert(kSame<decltype(&E::template Gesvd<T>), decltype(&S::template Gesvd<T>)>);
  static_assert(kSame<decltype(&E::template PolarBegin<T>), decltype(&S::template PolarBegin<T>)>);
  static_assert(kSame<decltype(&E::template PolarQr<T>), decltype(&S::template PolarQr<T>)>);
  static_assert(
      kSame<decltype(&E::template PolarCholesky<T>), decltype(&S::template PolarCholesky<T>)>);
  static_assert(kSame<decltype(&E::template PolarEnd<T>), decltype(&S::template PolarEnd<T>)>);
  static_assert(
      kSame<decltype(&E::template PolarValues<T>), decltype(&S::template PolarValues<T>)>);
  static_assert(kSame<decltype(&E::template ShardOut<T>), decltype(&S::template ShardOut<T>)>);
  static_assert(
      kSame<decltype(&E::template LeadingRowsOut<T>), decltype(&S::template LeadingRowsOut<T>)>);
  static_assert(kSame<decltype(&E::template VectorsOut<T>), decltype(&S::template VectorsOut<T>)>);
  static_assert(
      kSame<decltype(&E::template SquareRowsOut<T>), decltype(&S::template SquareRowsOut<T>)>);
  static_assert(kSame<decltype(&E::template FillNan<T>), decltype(&S::template FillNan<T>)>);
  static_assert(kSame<decltype(&E::WriteStatus), decltype(&S::WriteStatus)>);
  static_assert(kSame<decltype(&E::Finish), decltype(&S::Finish)>);
  return true;
}

// In each engine's engine.cc: static_assert(StepsMatch<Engine>());
template <class E>
constexpr bool StepsMatch() {
  return StepsMatchFor<E, float>() && StepsMatchFor<E, double>() &&
         StepsMatchFor<E, std::complex<float>>() && StepsMatchFor<E, std::complex<double>>();
}

}  // namespace jaxmg
