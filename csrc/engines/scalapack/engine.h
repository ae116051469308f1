// The CPU engine as the routines see it (csrc/routines/contract.h): one object per call, over a
// cached BLACS grid, holding the engine-local matrix, pivots and right-hand side of the call.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <tuple>
#include <vector>

#include "algorithms/band_reduce.h"
#include "algorithms/inverses.h"
#include "algorithms/qr_1d.h"
#include "common/scalar.h"
#include "engines/scalapack/backend.h"
#include "engines/scalapack/scalapack.h"
#include "layout/layout.h"
#include "routines/contract.h"

namespace jaxmg::scalapack {

class Engine {
 public:
  // A matrix the steps pass (routines/contract.h): host memory, ScaLAPACK's descriptor.
  using Descriptor = scalapack::Descriptor;
  template <typename T>
  using Matrix = DistributedMatrix<T, Descriptor>;
  // The row interchanges of an LU factorization, as Getrf leaves them: p?getrf's local pivot list
  // (the 1-D LU's global one on 1 x P grids, where every row is local), which p?getrs and
  // p?getri take; and the first column of the input that held a non-finite entry (pivoting can
  // keep it off the diagonal), for SignLogDet.
  struct Pivots {
    std::vector<int> local;
    int64_t input_nonfinite = 0;
  };
  // What a QR factorization (Geqrf) leaves for Orgqr: p?geqrf's τ, or the 1-D QR's τ and T_k
  // (`own`) in the buffers of its backend.
  struct Reflectors {
    std::vector<char> tau;
    std::unique_ptr<Backend> backend;
    algorithms::Qr1DKept own;
  };
  // QDWH's operands between its steps (routines/polar.h), which PolarBegin makes in the buffers
  // of their backend: A kept for H, W, Z (n x n, z_rows local rows, descriptor desc_z; also
  // PolarValues' workspace), the stacked Y of the QR steps and its Householder scalars, the sums;
  // and the steps so far (the test hook's step).
  struct QdwhOperands {
    std::unique_ptr<Backend> backend;
    void *a = nullptr, *w = nullptr, *z = nullptr, *y = nullptr, *tau = nullptr;
    double* sums = nullptr;
    int64_t steps = 0;
    Descriptor desc_z{};
    int64_t z_rows = 0;
  };

  // Agrees on the call with the other processes of the mesh (bounded wait, AgreeOnCall), then
  // joins (or creates, collectively) the grid of the plan for mesh position (attrs.u, attrs.v).
  // Callers hold EngineLock().
  static Status Create(const CallAttrs& attrs, const layout::Plan& plan,
                       const CallFingerprint& fingerprint, Engine* out);

  const layout::Plan& plan() const { return *plan_; }
  // CheckSymmetry's verdict, agreed.
  bool asymmetric() const { return asymmetric_; }

  // The steps, each under its meaning in short: routines/steps.h holds the contract (EngineSteps:
  // the same declarations, each under its full meaning), and engine.cc asserts these match it.

  // ---- Checks on the input ----
  // *out := whether the matrix is not symmetric (Hermitian), from the shards; agreed.
  template <typename T>
  Status Asymmetric(const T* shard, bool* out);
  // Asymmetric's check; its verdict comes with the next agreement (Potrf's), as asymmetric().
  template <typename T>
  Status CheckSymmetry(const T* shard);

  // ---- The engine matrix, right-hand sides and second matrices ----
  // *a := the engine matrix B from the shard (in place where it can be).
  template <typename T>
  Status Prepare(T* shard, Matrix<T>* a);
  // *c := a new engine_rows x nrhs matrix, rows like B's: c[i] = conj?(b[orig(i)]).
  template <typename T>
  Status RhsIn(const T* b, int64_t nrhs, Axis axis, bool conj, Matrix<T>* c);
  // x[orig(i)] = conj?(z[i]) for this shard's rows (z as RhsIn makes it).
  template <typename T>
  Status RhsOut(const Matrix<T>& z, T* x, Axis axis, bool conj);
  // *out := a new identity distributed like `like` (square).
  template <typename T>
  Status Identity(const Matrix<T>& like, Matrix<T>* out);
  // (redistributed plans) *k := the second matrix b in the engine's tiles, like B.
  template <typename T>
  Status MatrixIn(const T* shard, Matrix<T>* k);
  // (redistributed plans) *c := Bᵀ, b's shards read column-major, in the engine's tiles.
  template <typename T>
  Status RhsMatrixIn(const T* b, int64_t rows, Matrix<T>* c);
  // x (sharded as b) := c in the JAX layout (RhsMatrixIn's inverse).
  template <typename T>
  Status RhsMatrixOut(const Matrix<T>& c, T* x);

  // ---- Factorizations and solves ----
  // a's lower triangle := L, a = L Lᴴ (a->factored := kCholesky); info agreed (max).
  template <typename T>
  Status Potrf(Matrix<T>* a, int* info);
  // a := its pivoted LU factors (a->factored := kLu), *piv their row interchanges; info agreed.
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
  // (lu, piv from Getrf) *inverse := M⁻¹, or M⁻ᵀ with transpose, a new matrix like M.
  template <typename T>
  Status InverseSolve(const Matrix<T>& lu, const Pivots& piv, bool transpose, Matrix<T>* inverse);
  // c := op(m)⁻¹ c ('L') or c op(m)⁻¹ ('R'), m's triangle uplo; info agreed first.
  template <typename T>
  Status Trsm(char side, char uplo, char op, char diag, const Matrix<T>& m, const Matrix<T>& c,
              int* info);
  // (redistributed plans, n x n) *c := op_b(k) op_a(m), a new matrix distributed like m.
  template <typename T>
  Status Gemm(char op_b, const Matrix<T>& k, char op_a, const Matrix<T>& m, Matrix<T>* c);

  // ---- Determinants ----
  // out = scale * Σ log|diag a|, NaN if !ok.
  template <typename T>
  Status LogAbsDiag(const Matrix<T>& a, double scale, bool ok, RealOf<T>* out);
  // (lu, piv from Getrf) det B's phase and log |det B|, the relabeling's parity included.
  template <typename T>
  Status SignLogDet(const Matrix<T>& lu, const Pivots& piv, T* sign, RealOf<T>* logabsdet);

  // ---- Kept factors ----
  // out := the factored engine matrix f, kept for later solves.
  template <typename T>
  Status FactorOut(const Matrix<T>& f, T* out, int64_t count);
  // *f := the engine matrix from a factor FactorOut wrote (read only; count checked).
  template <typename T>
  Status Adopt(const T* factor, int64_t count, Factorization holds, Matrix<T>* f);
  // lu's pivots piv, global and 1-based (engine order), the same on every rank.
  template <typename T>
  Status PivotsOut(const Matrix<T>& lu, const Pivots& piv, int32_t* out);
  // *piv := the pivots of a kept LU factor (lu->factored := kLu).
  template <typename T>
  Status PivotsIn(const int32_t* in, Matrix<T>* lu, Pivots* piv);

  // ---- QR and least squares ----
  // QR of a's leading cols.extent columns, in place (a->factored := kQr), *tau its reflectors;
  // info agreed.
  template <typename T>
  Status Geqrf(Matrix<T>* a, Reflectors* tau, int* info);
  // (a, tau from Geqrf) a := Q of that factorization (its leading cols.extent columns).
  template <typename T>
  Status Orgqr(Matrix<T>* a, const Reflectors& tau);
  // Least squares min ‖B z − c‖ (a factored in place, c overwritten); *z := the solution.
  template <typename T>
  Status Gels(Matrix<T>* a, const Matrix<T>& c, Matrix<T>* z, int* info);

  // ---- Eigenvalues and singular values ----
  // (Hermitian a; overwritten) its eigenvalues, ascending, into x; *z := its eigenvectors; a
  // subset's pairs first (p?syevr / p?heevr).
  template <typename T>
  Status Eigh(const Matrix<T>& a, bool vectors, EigenRange subset, T* x, Matrix<T>* z, int* info);
  // M z = λ K z for m (Hermitian) and k (positive definite), both overwritten; as Eigh.
  template <typename T>
  Status Sygvd(const Matrix<T>& m, const Matrix<T>& k, bool vectors, EigenRange subset, T* x,
               Matrix<T>* z, int* info);
  // (m x n a, m >= n; overwritten) singular values, descending, into x; *a := U, *vt := Vᴴ.
  template <typename T>
  Status Gesvd(Matrix<T>* a, bool vectors_u, bool vectors_vt, T* x, int64_t x_rows, int64_t x_cols,
               Matrix<T>* vt, int* info);

  // ---- QDWH (routines/polar.h), on u, which holds U in place throughout ----
  // info agreed; U := A / (‖A‖₁ ‖A‖∞)^½ and *lower := 1 / ‖L⁻¹‖_F for UᴴU = L Lᴴ.
  template <typename T>
  Status PolarBegin(const Matrix<T>& u, bool keep_a, QdwhOperands* q, double* lower, int* info);
  // U := e U + coef Q₁ Q₂ᴴ, [sqrt_c U; I] = [Q₁; Q₂] R.
  template <typename T>
  Status PolarQr(const Matrix<T>& u, QdwhOperands* q, double sqrt_c, double coef, double e);
  // U := e U + coef U Z⁻¹, Z = I + c UᴴU; *change := ‖U − U_prev‖_F, agreed.
  template <typename T>
  Status PolarCholesky(const Matrix<T>& u, QdwhOperands* q, double c, double coef, double e,
                       double* change);
  // U := (3U − U UᴴU) / 2; with h, *hm := H = ½ (UᴴA + AᴴU), a new n x n matrix; info agreed.
  template <typename T>
  Status PolarEnd(const Matrix<T>& u, QdwhOperands* q, bool h, Matrix<T>* hm, int* info);
  // (hm from PolarEnd; overwritten) H's eigenvalues, descending, >= 0, into x.
  template <typename T>
  Status PolarValues(const Matrix<T>& hm, QdwhOperands* q, T* x, int64_t x_rows, int64_t x_cols,
                     int* info);

  // ---- Results ----
  // The shard := its part of y (distributed like the engine matrix) in the JAX layout.
  template <typename T>
  Status ShardOut(const Matrix<T>& y, T* shard);
  // x (row-major) := this shard's x_rows of the first cols.extent rows of R (Geqrf) or z (Gels).
  template <typename T>
  Status LeadingRowsOut(const Matrix<T>& y, T* x, int64_t x_rows);
  // The shard := its part of the eigenvector matrix z in the JAX layout (work overwritten).
  template <typename T>
  Status VectorsOut(const Matrix<T>& z, const Matrix<T>& work, T* shard);
  // Columns 0..n-1 of x := this shard's x_rows of the n x n matrix s (Vᴴ, H).
  template <typename T>
  Status SquareRowsOut(const Matrix<T>& s, T* x, int64_t x_rows, int64_t x_cols);
  // (local) x[0..count) := NaN.
  template <typename T>
  Status FillNan(T* x, int64_t count);
  // (local) *status := info.
  Status WriteStatus(int info, int32_t* status);
  // The end of every call, reached by every rank that ran it (agrees on a local failure).
  Status Finish(const Status& result);

 private:
  bool asymmetric_ = false;
  // Getrf by the 1-D LU on 1 x P grids (config.cpu_lu = scalapack: p?getrf everywhere).
  bool UseOwnLu() const;
  // Potrf by the 1-D Cholesky on 1 x P grids (config.cpu_cholesky = blocked; else p?potrf).
  bool UseOwnCholesky() const;
  // Geqrf and Orgqr by the 1-D QR on 1 x P grids (config.cpu_qr = scalapack: p?geqrf, p?orgqr).
  bool UseOwnQr() const;
  // The 1-D QR's distribution: the engine matrix's rows and its leading cols.extent columns.
  algorithms::Distribution QrDistribution() const;
  // CholeskyInverse (lu false) or InverseSolve (lu true) by the blocked inverses. Defaults:
  // CholeskyInverse blocked, InverseSolve p?getri; config.cpu_inverses = blocked: both blocked,
  // = scalapack: both ScaLAPACK's (p?potrs with the identity, p?getri).
  bool UseOwnInverses(bool lu) const;
  // A rows x cols matrix in the engine's tiles over its grid, ld local rows (the algorithms'
  // distribution, algorithms/distribution.h).
  algorithms::Distribution DistributionOf(int64_t rows, int64_t cols, int64_t ld) const;
  // The handle of the engine matrix that Prepare or Adopt set up (work_, desc_a_ and the local
  // extents): what they hand out. Every other step reads the matrices it is handed.
  template <typename T>
  Matrix<T> EngineMatrix() const;
  // *out := a new zero matrix distributed like `like` (storage and descriptor owned by the
  // engine for the call).
  template <typename T>
  Status NewLike(const Matrix<T>& like, Matrix<T>* out);
  // The status of the factorization in `a` (Potrf, Getrf), agreed; input_nonfinite: the first
  // column of the input that held a non-finite entry (Getrf's scan), or 0.
  template <typename T>
  Status Agree(const Matrix<T>& a, int* info, int64_t input_nonfinite = 0);
  // An error unless `lu` holds an LU factorization (step: the step's name).
  static Status CheckLu(Factorization held, const char* step);
  // Eigh by the two stages on 1 x P and P x 1 grids (band_eigh.cc): config.cpu_eigh chooses;
  // "auto", eigenvalues alone take them (measured).
  bool UseTwoStage(bool vectors, bool subset = false) const;
  // The band's width for tile t (config.eig_band: the widest tried; 0: the two stages do not
  // apply).
  int64_t EigBand(int64_t t) const;
  // w := the eigenvalues (ascending) of a (the engine matrix; overwritten) and, with vectors,
  // z := the eigenvectors (distributed as a); a subset's pairs alone, first (Q₂ and Q₁ on its
  // k columns); *info > 0 where the tridiagonal solve failed (agreed).
  template <typename T>
  Status TwoStageEigh(const Matrix<T>& a, bool vectors, EigenRange subset, RealOf<T>* w,
                      const Matrix<T>& z, int* info);
  // QDWH's buffers, allocated (a local outcome, for the caller's agreement), and its operands.
  template <typename T>
  Status PolarBuffers(const Matrix<T>& u, bool keep_a, QdwhOperands* q);
  template <typename T>
  algorithms::QdwhWork<T> PolarWork(const Matrix<T>& u, QdwhOperands* q);
  // The status of a QR factorization held: 1 + the first column with a non-finite entry or,
  // with rank_fails, an exactly zero diagonal entry of R; agreed (max).
  template <typename T>
  Status AgreeQr(const Matrix<T>& a, bool rank_fails, int* info);
  template <typename T, typename Fn>
  void ForEachLocalDiagonal(const Matrix<T>& a, Fn&& fn) const;
  template <typename T>
  int64_t FirstNonFiniteColumn(const Matrix<T>& a) const;
  std::tuple<int64_t, int64_t, bool> RhsBlock() const;
  template <typename T, typename Fn>
  void ForEachRhsEntry(const Matrix<T>& c, Axis axis, Fn&& fn) const;
  // x (row-major, row stride x_cols) := this shard's x_rows of the first cols.extent rows of the
  // local block-cyclic matrix `local` (ld rows, lc columns, `cols` global columns), in columns
  // 0..cols-1 (collective; see LeadingRowsOut).
  template <typename T>
  Status RowsOut(const T* local, int64_t ld, int64_t lc, int64_t cols, T* x, int64_t x_rows,
                 int64_t x_cols);
  // *out := a new zero rows x cols matrix in the engine's tiles over its grid (storage and
  // descriptor owned by the engine for the call).
  template <typename T>
  Status NewMatrix(int64_t rows, int64_t cols, Matrix<T>* out);
  // The shard := engine matrix `from` (distributed as `desc`) in the JAX layout.
  template <typename T>
  Status MatrixOut(const T* from, const Descriptor& desc, T* shard);

  const layout::Plan* plan_ = nullptr;
  const Grid* grid_ = nullptr;
  Config config_;  // the call's (common/config.h)
  int u_ = 0, v_ = 0;
  bool rhs_by_cols_ = false;  // b and x split over the mesh's columns (matrix handed transposed)
  int64_t local_rows_ = 0, local_cols_ = 0;
  void* work_ = nullptr;     // the engine-local matrix (the shard itself, or owned_)
  std::vector<char> owned_;  // padded or redistributed copy
  Descriptor desc_a_{};
  // The matrices the steps made for the call (NewLike) and their descriptors; a deque keeps
  // the handles' pointers valid as it grows.
  std::deque<std::vector<char>> matrices_;
  std::deque<Descriptor> descriptors_;
};

}  // namespace jaxmg::scalapack
