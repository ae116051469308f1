// The GPU engine as the routines see it (csrc/routines/contract.h): one object per call, over a
// cached context (NCCL communicator, cuSOLVERMp and cuBLASMp handles and grids), on XLA's
// stream, with every device buffer taken from XLA's scratch allocator.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "algorithms/band_reduce.h"
#include "algorithms/inverses.h"
#include "algorithms/qdwh.h"
#include "algorithms/qr_1d.h"
#include "common/deferred.h"
#include "common/scratch.h"
#include "engines/cusolvermp/cusolvermp.h"
#include "engines/cusolvermp/local_blas.h"
#include "engines/cusolvermp/vendor_wrappers.h"
#include "layout/layout.h"
#include "routines/contract.h"

namespace jaxmg::cusolvermp {

// RAII cuSOLVERMp matrix descriptor (rsrc = csrc = 0, column-major local storage, ld lld).
class Descriptor {
 public:
  Descriptor() = default;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor();
  Status Create(Context& c, cudaDataType dt, int64_t m, int64_t n, int64_t mb, int64_t nb,
                int64_t lld);
  cusolverMpMatrixDescriptor_t get() const { return desc_; }

 private:
  cusolverMpMatrixDescriptor_t desc_ = nullptr;
};

using layout::AxisExchange;

class Engine {
 public:
  // A matrix the steps pass (routines/contract.h): device memory, a cuSOLVERMp descriptor.
  using Descriptor = cusolvermp::Descriptor;
  template <typename T>
  using Matrix = DistributedMatrix<T, Descriptor>;
  // The row interchanges of an LU factorization, as Getrf leaves them: cuSOLVERMp's Getrf's
  // (kLu: distributed with the columns, in the call's scratch memory), or the global 1-based
  // list of jaxmg's 1-D LU or of a kept factor (kLuHostPivots: on the host).
  struct Pivots {
    int64_t* device = nullptr;
    std::vector<int64_t> global;
  };
  // What a QR factorization (Geqrf) leaves for Orgqr: cuSOLVERMp's τ (in the call's scratch
  // memory), or the 1-D QR's τ, T_k and scratch (`own`).
  struct Reflectors {
    void* tau = nullptr;
    algorithms::Qr1DKept own;
  };
  // QDWH's operands between its steps (routines/polar.h), which PolarBegin makes in the call's
  // scratch memory: A kept for H, W (a copy of U), Z (n x n, z_rows local rows), the stacked Y
  // of the QR steps and its Householder scalars, the n column and m row sums of |A|; and the
  // steps so far (the test hook's step).
  struct QdwhOperands {
    void *a = nullptr, *w = nullptr, *z = nullptr, *y = nullptr, *tau = nullptr;
    int64_t z_rows = 0;
    double* norms = nullptr;
    int64_t steps = 0;
  };

  // position: this shard's (u, v) in device memory; checked against the context in the first
  // status agreement, so every rank learns of a mismatch together.
  // rhs_by_cols: b and x are split over the mesh's columns (the matrix was handed transposed).
  // config: the call's algorithm choices, tuning and test hooks.
  Engine(Context& ctx, const PlanState& state, cudaStream_t stream, ScratchSource& scratch,
         const int32_t* position, bool rhs_by_cols, const Config& config)
      : ctx_(ctx),
        state_(state),
        stream_(stream),
        scratch_(scratch),
        position_(position),
        rhs_by_cols_(rhs_by_cols),
        config_(config) {}

  const layout::Plan& plan() const { return state_.plan; }
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
  // a := its pivoted LU factors (a->factored := kLu or kLuHostPivots), *piv their row
  // interchanges; info agreed (max).
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
  // *piv := the pivots of a kept LU factor (lu->factored := kLuHostPivots).
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
  // subset's pairs first on grids of one process column (the own two stages compute those
  // alone; cuSOLVERMp's Syevd computes every pair, and the kept ones are moved first).
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
  // out[:, order[i]] = x[:, i] for the engine's columns (both distributed like the matrix).
  // Collective; local errors are kept in *failed.
  template <typename T>
  Status PermuteColumns(const void* x, void* out, const std::vector<int64_t>& order,
                        Deferred* failed);

  friend class Backend;  // the algorithms' backend (backend.h) uses the call's buffers and stream
  Status Scratch(size_t bytes, void** out);
  template <typename T>
  Status Scratch(size_t bytes, T** out) {
    void* p = nullptr;
    JAXMG_RETURN_IF_ERROR(Scratch(bytes, &p));
    *out = static_cast<T*>(p);
    return Status();
  }
  // The handle of the engine matrix that Prepare or Adopt set up (work_, desc_a_ and the local
  // extents): what they hand out. Every other step reads the matrices it is handed.
  template <typename T>
  Matrix<T> EngineMatrix() const;
  // *out := a new matrix (uninitialized scratch) distributed like `like`, with a descriptor of its
  // own (owned by the engine for the call).
  template <typename T>
  Status NewLike(const Matrix<T>& like, Matrix<T>* out);
  // An error unless `lu` holds an LU factorization (step: the step's name).
  static Status CheckLu(Factorization held, const char* step);
  // The call's small device buffer (small_), allocated and zeroed on first use.
  Status Small();
  // Between the JAX block layout and block-cyclic tiles (to_tiles) or back (Remap).
  // rows: the matrix's engine rows (its columns are the engine matrix's); < 0: the engine matrix.
  template <typename T>
  Status Redistribute(const void* from, bool to_tiles, void* to, const Status& allocated = Status(),
                      int64_t rows = -1);
  // A matrix's local part under a block-cyclic distribution over the grid: blocks of rows x cols,
  // local leading dimension ld.
  struct Blocked {
    int64_t rows, cols, ld;
  };
  // A copy of an m x n matrix from one distribution into the other (every rank of the grid takes
  // part), in two steps: the index lists and buffers (RemapPrepare; before the collectives, so
  // that an allocation failure can be agreed on), then the moves (RemapRun: device moves for what
  // stays, one NCCL send/recv group for the rest).
  struct RemapBuffers {
    Blocked f{}, d{};
    std::shared_ptr<const AxisExchange> rows, cols;
    std::vector<size_t> rs, rr, cs, cr;  // offsets of the lists in idx
    const int64_t* idx = nullptr;        // device
    void *packed = nullptr, *unpacked = nullptr;
    int64_t Sent(int qr, int qc) const;
    int64_t Received(int qr, int qc) const;
  };
  template <typename T>
  Status RemapPrepare(const Blocked& f, const Blocked& d, int64_t m, int64_t n, RemapBuffers* r);
  template <typename T>
  Status RemapRun(const void* from, void* to, const RemapBuffers& r);
  // The single-GPU cuBLAS table and the context's handle, on this call's stream.
  Status LocalHandle(const LocalBlas** lb, cublasHandle_t* handle);
  // config.gpu_math on a cuBLAS, cusolverDn or the cuSOLVERMp handle, where it changed
  // (ApplyMath, local_blas.h; applied: the Context's record for that handle).
  Status BlasMath(const LocalBlas* lb, cublasHandle_t h, int64_t* applied);
  Status SolverMath(const LocalBlas* lb, cusolverDnHandle_t h, int64_t* applied);
  Status LibraryMath();
  // The same and the context's cusolverDn handle and parameters, on this call's stream.
  Status LocalSolver(const LocalBlas** lb, cublasHandle_t* blas, cusolverDnHandle_t* dn,
                     cusolverDnParams_t* params);
  // A device workspace of at least `bytes` (reused across the steps of the call).
  Status Workspace(size_t bytes, size_t host_bytes, void** out);
  // The same, as a vendor call's workspace (vendor_wrappers.h).
  Status Workspace(size_t bytes, size_t host_bytes, vendor::Work* out);
  // A vendor call (vendor_wrappers.h) with its workspace: the size query, the workspace (agreed
  // for a collective call: AgreeOnBuffers), the call.
  template <class Op>
  Status Call(const Op& op) {
    size_t dev = 0, host = 0;
    vendor::Work work;
    Status ready = vendor::Size(op, &dev, &host);
    if (ready.ok()) ready = Workspace(dev, host, &work);
    // A collective call's workspace is agreed on first: a rank short of it gives the same error
    // on every rank instead of leaving its peers in the library's collectives.
    if constexpr (vendor::kCollective<Op>) ready = AgreeOnBuffers(ready);
    JAXMG_RETURN_IF_ERROR(ready);
    return vendor::Run(op, work);
  }
  bool UseOwnLu() const;
  // Potrf by the 1-D Cholesky (config.gpu_cholesky = blocked, 1 x P grids and one device).
  bool UseOwnCholesky() const;
  // One device (a 1 x 1 grid): the local array is the matrix, and the factorizations and solves
  // that cusolverDn has run there without cuSOLVERMp (vendor.cc).
  bool OneDevice() const;
  // c := op(B)⁻¹ c with the own LU's factors lu and global pivots on one device
  // (cusolverDnXgetrs).
  template <typename T>
  Status LocalGetrs(const Matrix<T>& lu, const std::vector<int64_t>& piv, const Matrix<T>& c,
                    bool transpose);
  // Householder QR of a's leading cols.extent columns (*tau), in place, no agreement.
  template <typename T>
  Status QrFactor(const Matrix<T>& a, Reflectors* tau);
  bool UseOwnQr() const;
  // Eigenvalues in two stages on 1 x P and P x 1 grids (algorithms/band_eigh.h over the
  // backend; band_eigh.cc): the band reduction over the devices, then the bulge chase and
  // bisection on rank 0. EigBand<T>: the band's width for tile t and order n, with or without
  // eigenvectors (0: the two stages do not apply).
  template <typename T>
  int64_t EigBand(int64_t t, int64_t n, bool vectors) const;
  bool UseTwoStage(Choice choice, int64_t t) const;
  bool UseBandEigenvalues(int64_t t) const;
  // The Hermitian matrix the two stages reduce: n x n in tiles of t on the grid (lr local rows),
  // overwritten.
  struct BandSource {
    void* a;
    int64_t n, t, lr;
  };
  template <typename T>
  Status BandEigenvalues(const BandSource& src, void* w);
  // With vectors (1 x P and P x 1 grids): the chase keeps its reflectors, Stedc finds the
  // tridiagonal matrix's eigenvectors, and both back-transformations follow (*z := the
  // eigenvectors of a, a new matrix, adjoint on a P x 1 grid; algorithms/band_eigh.h
  // TwoStageVectors). A subset's pairs alone, first: Q₂ and Q₁ on its k columns.
  bool UseBandEigh() const;
  template <typename T>
  Status BandEigh(const Matrix<T>& a, EigenRange subset, void* w, Matrix<T>* z);
  // The local columns [from, from + count) of a device matrix with column stride `stride` bytes
  // moved to [0, count) (pieces that never overlap).
  Status MoveColumnsFirst(void* base, int64_t stride, int64_t from, int64_t count);
  // The band reduction's shape (algorithms/band_reduce.h) for an n x n matrix in tiles of t with
  // lr local rows, band b, on this 1 x P or P x 1 grid.
  // dst := srcᴴ, both n x n in the engine's layout (cuBLASMp Geadd; U: any element type).
  template <typename U>
  Status GridAdjoint(const void* src, void* dst);
  // x's last column (x_rows rows of x_cols) := H's eigenvalues w (n reals, ascending) as
  // singular values: descending, at least 0.
  template <typename T>
  Status SingularValuesOut(const void* w, int64_t n, void* x, int64_t x_rows, int64_t x_cols);
  // cuSOLVERMp's Syevd on a (overwritten): w := the eigenvalues, *z := a new matrix for the
  // eigenvectors (written with vectors).
  template <typename T>
  Status LibraryEigh(const Matrix<T>& a, bool vectors, void* w, Matrix<T>* z);
  // The 1-D QR (1 x P grids) and its Q, formed in place (qr_1d.cc).
  template <typename T>
  Status Qr1D(const Matrix<T>& a, Reflectors* tau);
  template <typename T>
  Status Orgqr1D(const Matrix<T>& a, const Reflectors& tau);
  // A stream with the single-GPU handles that run on it: the call's (the context's handles) or
  // the look-ahead's side stream (handles of its own).
  struct Lane {
    const LocalBlas* lb = nullptr;
    cudaStream_t stream = nullptr;
    cublasHandle_t blas = nullptr;
    cusolverDnHandle_t dn = nullptr;
    cusolverDnParams_t params = nullptr;
  };
  // The 1-D QR's distribution: the engine matrix's rows and its leading cols.extent columns.
  algorithms::Distribution QrDistribution() const;
  Status MainLane(Lane* out);
  Status SideLane(Lane* out);
  // `to` waits for the work queued so far on `from` (the context's side event `event`).
  Status Join(cudaStream_t from, cudaStream_t to, int event);
  // A lane's scratch for the reflectors: w and w2 (tile x the columns updated), s (tile x tile,
  // S before its inversion).
  struct QrWork {
    void *w, *w2, *s;
  };
  static int64_t QrPanelBlock(int64_t t);
  // f (ld tile) := T of the compact WY form Q = I − V T Vᴴ of the rows x cols vectors v (ld
  // rows) and their τ: T = S⁻¹ for S = striu(VᴴV) + diag(1/τ) (in work.s).
  template <typename T>
  Status ReflectorFactorOf(const Lane& lane, const void* v, int64_t rows, int64_t cols,
                           const void* tau, void* f, void* s);
  // c (rows x cols, ld ldc) := op(Q_k) c for Q_k = I − V F Vᴴ (adjoint: I − V Fᴴ Vᴴ), F k x k
  // upper triangular (leading dimension ldf): two gemm and a trmm.
  template <typename T>
  Status ApplyReflectors(const Lane& lane, const void* v, int64_t rows, int64_t k, const void* f,
                         int64_t ldf, bool adjoint, void* c, int64_t cols, int64_t ldc,
                         const QrWork& work);
  template <typename T>
  Status QrSolve(const Matrix<T>& a, const Matrix<T>& rhs, int* info, T** solution);
  // *out (device, row-major) := the first cols.extent rows in engine order of the factored
  // matrix a's leading cols.extent columns (R), whole on every rank.
  template <typename T>
  Status LeadingRows(const Matrix<T>& a, void** out);
  template <typename T>
  Status Lu1D(Matrix<T>* a, Pivots* piv, int* info);
  // a := L, A = L Lᴴ, by the 1-D Cholesky (algorithms/cholesky_1d.h); *info agreed.
  template <typename T>
  Status Cholesky1D(Matrix<T>* a, int* info);
  // The global 1-based list of cuSOLVERMp's pivots piv.device (collective).
  Status EnginePivots(const Pivots& piv, std::vector<int64_t>* out);
  // The global 1-based pivots of the factorization lu (own LU or kept: on the host; cuSOLVERMp's).
  template <typename T>
  Status GlobalPivots(const Matrix<T>& lu, const Pivots& piv, std::vector<int64_t>* out);
  // x (row-major, row stride x_cols) := this shard's x_rows of the first cols.extent rows of the
  // local block-cyclic matrix `local` (ld rows, lc columns, `cols` global columns), in columns
  // 0..cols-1, gathered in chunks of rows (collective; see LeadingRowsOut).
  template <typename T>
  Status RowsOut(const void* local, int64_t ld, int64_t lc, int64_t cols, void* x, int64_t x_rows,
                 int64_t x_cols);
  // The status of a solver's real output values and info (status.cc), agreed.
  template <typename T>
  Status AgreeValues(const void* values, int64_t n, bool failed, int* info);
  // *out := a new rows x cols matrix (uninitialized scratch) in the engine's tiles over its grid,
  // with a descriptor of its own (owned by the engine for the call). A failure is local: the
  // caller agrees on it before the next collective.
  template <typename T>
  Status NewMatrix(int64_t rows, int64_t cols, Matrix<T>* out);
  // The first of x's rows this shard holds (x_rows of the cols.extent, or all of them).
  int64_t FirstRow(int64_t x_rows) const;
  // The shard := engine matrix `from` in the JAX layout (undoing relabeling, padding or
  // redistribution).
  template <typename T>
  Status MatrixOut(const void* from, void* shard);
  template <typename T>
  Status LuSolveWithPivots(const Matrix<T>& lu, const Matrix<T>& c, bool transpose,
                           const std::vector<int64_t>& piv);
  // c := op(U)⁻¹ op(L)⁻¹ c (L⁻ᵀ U⁻ᵀ with transpose), L unit lower and U upper in lu.
  template <typename T>
  Status TriangularSolves(const Matrix<T>& lu, const Matrix<T>& c, bool transpose,
                          Deferred* failed);
  template <typename T>
  Status PivotRhs(const Matrix<T>& c, const std::vector<int64_t>& piv, bool reverse,
                  Deferred* failed);
  // *column (device) := 1 + the first engine column with a non-finite entry of a's local part,
  // or kNoColumn.
  template <typename T>
  Status NonFinite(const Matrix<T>& a, int32_t* column);
  // Status agreement on the matrix a (see status.cc); returns the agreed info. The diagonal check
  // covers the global diagonal below diag_limit (-1: all of it; 0: none); scan: also the first
  // column with a non-finite entry anywhere in the local matrix (false: a triangular matrix,
  // whose other triangle may hold anything).
  template <typename T>
  Status Agree(const Matrix<T>& a, bool failed, int* info, int64_t diag_limit = -1,
               bool scan = true);
  // The symmetry check's products [A v, A u] of this shard, summed over the ranks into the 2n
  // device vector *y (common/symmetry.h), on the stream.
  template <typename T>
  Status SymmetryProducts(const void* shard, void** y);
  // *value := the largest of the ranks' values (non-negative or NaN), so that every rank takes
  // the same branch on it.
  Status AgreeOnValue(double* value);
  // The buffers a step allocated before its first collective (local: this rank's outcome),
  // agreed: an error on every rank where any rank failed, so that none waits for the others.
  // The test hook "buffers:<rank>:<k>" (common/deferred.h) fails rank's k-th agreement of the
  // call (counted from 0 over the call's steps).
  Status AgreeOnBuffers(const Status& local);
  // An algorithm's local outcome (common/deferred.h) agreed over the ranks at one of its
  // agreement points: ok on every rank, or on every rank the same error (the lowest failing
  // rank's message and rank).
  Status AgreeOnFailure(const char* algorithm, const Status& local);
  Status AgreeOnFailure(const char* algorithm, const Deferred& local) {
    return AgreeOnFailure(algorithm, local.status());
  }
  // Workspace, agreed: before a collective library call (cuSOLVERMp, cuBLASMp), whose workspace
  // may grow on one rank alone.
  Status AgreedWorkspace(size_t bytes, size_t host_bytes, void** out);
  // Every buffer of QDWH's steps and the workspace of its QR steps.
  template <typename T>
  Status PolarBuffers(const Matrix<T>& u, bool keep_a, QdwhOperands* q);
  // An n x n matrix in the engine's tiles over its grid, ld local rows (algorithms/inverses.h).
  // A rows x cols matrix in the engine's tiles over its grid, ld local rows (the algorithms'
  // distribution, algorithms/distribution.h).
  algorithms::Distribution DistributionOf(int64_t rows, int64_t cols, int64_t ld) const;
  // QDWH's operands (algorithms/qdwh.h) in this call's buffers (PolarBuffers).
  template <typename T>
  algorithms::QdwhWork<T> PolarWork(const Matrix<T>& u, QdwhOperands* q);
  Context& ctx_;
  const PlanState& state_;
  cudaStream_t stream_;
  ScratchSource& scratch_;
  const int32_t* position_;
  bool rhs_by_cols_;
  const Config config_;  // the call's (common/config.h)
  int64_t local_rows_ = 0, local_cols_ = 0;
  void* work_ = nullptr;  // the engine-local matrix (the shard itself, or scratch)
  Descriptor desc_a_;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  // The call's small device buffer: 16 int32 slots, zeroed on first use (Small()).
  int32_t* small_ = nullptr;
  // Its slots, by what they hold.
  struct Slots {
    static constexpr int kInfo = 0;             // a factorization's or solver's info
    static constexpr int kSolveInfo = 2;        // a solve's info
    static constexpr int kDiagonal = 3;         // the diagonal check's first bad entry
    static constexpr int kSum = 4;              // 16 bytes: a sum (slots 4 to 7)
    static constexpr int kFactorNonFinite = 8;  // the factor's first non-finite column
    static constexpr int kInputNonFinite = 9;   // the input's (Getrf)
    static constexpr int kAgreed = 10;          // 3 slots: the status agreement's all-reduce
  };
  int32_t* Slot(int slot) const { return small_ + slot; }
  void* full_ = nullptr;    // n x nrhs, row-major: the whole right-hand side
  int64_t symmetry_n_ = 0;  // > 0: CheckSymmetry's [A v, A u] (2 n) is coming to ctx_.probe_host
  bool asymmetric_ = false;
  std::deque<Descriptor> descriptors_;  // those of the matrices the steps made (NewLike, NewMatrix)
  int64_t buffer_agreements_ = 0;       // AgreeOnBuffers' calls so far (the test hook's step)
};

}  // namespace jaxmg::cusolvermp
