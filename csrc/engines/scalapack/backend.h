// The CPU engine's backend for the algorithms written once over a backend (csrc/algorithms/):
// local steps with LAPACK and BLAS (the ones ScaLAPACK links), host loops where the GPU has
// kernels (row interchanges), buffers in host memory for the call's lifetime, collectives over
// the grid's MPI communicator, distributed products with PBLAS on the grid, agreement with
// AgreeOnFailure.
#pragma once

#include <algorithm>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "algorithms/inverses.h"
#include "algorithms/qdwh.h"
#include "common/scalar.h"
#include "common/status.h"
#include "engines/scalapack/scalapack.h"

namespace jaxmg::scalapack {

class Backend {
 public:
  // On `grid`; a 1 x P grid's column j is the process grid.comm_ranks[j].
  explicit Backend(const Grid& grid) : grid_(grid) {}

  template <typename U>
  Status Buffer(int64_t count, U** out) {
    // (new's alignment, 16 bytes, suits every scalar; zeroed). An allocation that fails is this
    // rank's local error, for the algorithm's agreement (never an exception past its peers).
    try {
      buffers_.emplace_back(sizeof(U) * static_cast<size_t>(count > 0 ? count : 1), '\0');
    } catch (const std::bad_alloc&) {
      return Status::Error("jaxmg: could not allocate " + std::to_string(sizeof(U) * count) +
                           " bytes of host memory for the algorithm's buffers");
    }
    *out = reinterpret_cast<U*>(buffers_.back().data());
    return Status();
  }

  template <typename T>
  Status PrepareGetrf(int64_t m, int64_t n, T* a, int64_t lda);
  template <typename T>
  Status Getrf(int64_t m, int64_t n, T* a, int64_t lda, int64_t* piv);
  template <typename T>
  Status Copy(T* dst, int64_t ldd, const T* src, int64_t lds, int64_t m, int64_t n);
  // a (na scalars) and b (nb entries: scalars, or int64_t pivots) from grid column root.
  template <typename T, typename U>
  Status Broadcast(T* a, int64_t na, U* b, int64_t nb, int root);
  template <typename T>
  Status RowSwaps(T* a, int64_t lda, int64_t cols, int64_t skip_begin, int64_t skip_end,
                  int64_t row0, const int64_t* piv, int64_t count);
  template <typename T>
  Status TrsmLowerUnit(int64_t m, int64_t n, const T* l, int64_t ldl, T* b, int64_t ldb);
  // c −= a op(b), op_b 'N' (b) or 'C' (bᴴ).
  template <typename T>
  Status GemmMinus(char op_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
                   int64_t ldb, T* c, int64_t ldc);
  Status PivotsOut(const int64_t* piv, int64_t count, int64_t* host);
  // The lanes of the 1-D Cholesky's and the 1-D QR's look-ahead: one, the calling thread (the
  // look-ahead runs in the same order, one step after the other).
  struct Lane {};
  Status MainLane(Lane*) { return Status(); }
  Status SideLane(Lane*) { return Status(); }
  Status Join(const Lane&, const Lane&, int) { return Status(); }

  // The 1-D Cholesky's local steps (algorithms/cholesky_1d.h).
  template <typename T>
  Status PreparePanel(int64_t, int64_t, T*, int64_t) {
    return Status();  // (LAPACK's potrf and trsm need no workspace)
  }
  template <typename T>
  Status Potrf(const Lane&, int64_t n, T* a, int64_t lda, int* info);
  template <typename T>
  Status TrsmRightLowerAdjoint(const Lane&, int64_t m, int64_t n, const T* l, int64_t ldl, T* b,
                               int64_t ldb);
  template <typename T>
  Status Copy(const Lane&, T* dst, int64_t ldd, const T* src, int64_t lds, int64_t m, int64_t n) {
    return Copy(dst, ldd, src, lds, m, n);
  }
  Status InfosOut(const int* infos, int64_t count, int* host) {
    std::copy_n(infos, count, host);
    return Status();
  }

  // The 1-D QR's local steps (algorithms/qr_1d.h).
  template <typename T>
  Status PrepareGeqrf(int64_t m, int64_t n, T* a, int64_t lda, T* tau);
  template <typename T>
  Status Geqrf(const Lane&, int64_t m, int64_t n, T* a, int64_t lda, T* tau);
  template <typename T>
  Status Gemm(const Lane&, bool adjoint_a, bool adjoint_b, int64_t m, int64_t n, int64_t k, T alpha,
              const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc);
  template <typename T>
  Status Trmm(const Lane&, bool adjoint, int64_t m, int64_t n, const T* f, int64_t ldf, const T* w,
              int64_t ldw, T* out, int64_t ldo);
  template <typename T>
  Status TrsmUpper(const Lane&, int64_t m, int64_t n, const T* s, int64_t lds, T* b, int64_t ldb);
  template <typename T>
  Status ReflectorBlock(const Lane&, const T* a, int64_t lda, int64_t rows, int64_t cols,
                        const T* tau, T* v, int64_t ldv);
  template <typename T>
  Status ReflectorDiagonal(const Lane&, T* s, int64_t ld, int64_t k, const T* tau);
  template <typename T>
  Status IdentityBlock(const Lane&, T* a, int64_t ld, int64_t rows, int64_t cols, int64_t row0);
  template <typename T>
  Status Adjoint(const Lane&, const T* src, int64_t lds, int64_t rows, int64_t cols, T* dst,
                 int64_t ldd);
  Status Agree(const char* algorithm, const Status& local) {
    return AgreeOnFailure(grid_, algorithm, local);
  }

  // The distributed products (algorithms/inverses.h): PBLAS, every operand distributed as g.
  // They need no workspace of the caller's (the size pass asks for none).
  template <typename T>
  Status PrepareSquare(const algorithms::Distribution& g) {
    square_g_ = g;
    return MakeDescriptor(grid_, g.rows, g.cols, g.tile(), g.tile(), g.ld, &square_);
  }
  template <typename T>
  Status PTrsm(algorithms::Pass pass, bool upper, bool unit, int64_t m, int64_t n, const T* a,
               int64_t ia, int64_t ja, T* b, int64_t ib, int64_t jb) {
    if (pass == algorithms::Pass::kSize) return Status();
    return TrsmAt<T>('L', upper ? 'U' : 'L', 'N', unit ? 'U' : 'N', m, n, T(1), a, ia, ja, square_,
                     b, ib, jb, square_);
  }
  template <typename T>
  Status PGemm(algorithms::Pass pass, bool adjoint_a, int64_t m, int64_t n, int64_t k, const T* a,
               int64_t ia, int64_t ja, const T* b, int64_t ib, int64_t jb, T* c, int64_t ic,
               int64_t jc) {
    if (pass == algorithms::Pass::kSize) return Status();
    // ('C' is the transpose for the real types)
    return GemmAt<T>(adjoint_a ? 'C' : 'N', 'N', m, n, k, T(1), a, ia, ja, square_, b, ib, jb,
                     square_, T(1), c, ic, jc, square_);
  }
  Status PWorkspace() { return Status(); }
  // Column i of x to column order[i] of out (both distributed as the square): within each
  // process row, one all-to-all over the grid's communicator.
  template <typename T>
  Status PMoveColumns(const T* x, T* out, const std::vector<int64_t>& order);

  // The band reduction's steps (algorithms/band_reduce.h): host loops, BLAS and MPI sums.
  template <typename T>
  Status TrmmRight(const Lane&, int64_t m, int64_t n, const T* f, int64_t ldf, const T* x,
                   int64_t ldx, T* out, int64_t ldo);
  template <typename T>
  Status Zero(const Lane&, T* p, int64_t count) {
    std::fill(p, p + count, T(0));
    return Status();
  }
  template <typename T>
  Status CyclicRows(const Lane&, bool to_global, T* local, int64_t ldl, int64_t count, int64_t cols,
                    int64_t first, int64_t t, int procs, int me, int64_t offset, T* global,
                    int64_t ldg, int64_t shift);
  template <typename T>
  Status BandFromColumns(const Lane&, const T* a, int64_t lda, int64_t row0, int64_t c0,
                         int64_t cols, int64_t n, int64_t b, T* band);
  template <typename T>
  Status AllreduceSum(T* x, int64_t count) {
    return scalapack::AllreduceSum<T>(grid_, x, count);
  }
  template <typename T>
  Status ReduceToRoot(T* x, int64_t count) {
    return scalapack::ReduceSum<T>(grid_, x, count, grid_.comm_ranks[0]);
  }

  // The chase, the tridiagonal solve and Q₂ (algorithms/band_chase.h, band_eigh.h): host loops
  // where the GPU has kernels, BLAS, ?sterf on one process, p?stedc and p?tran on the grid
  // (band_chase.cc). solver_info: the largest ?sterf or p?stedc status so far (> 0: it did not
  // converge).
  struct NoTimer {
    ~NoTimer() {}
  };
  NoTimer Stage(const char*) { return NoTimer(); }
  template <typename T>
  Status ChaseBand(const Lane&, T* band, int64_t n, int64_t b, int* sync, T* v2, T* tau2);
  template <typename T>
  Status TridiagonalOf(const Lane&, const T* band, int64_t n, int64_t b, RealOf<T>* d, RealOf<T>* e,
                       T* phase);
  template <typename T>
  Status TridiagonalValues(const Lane&, const T* band, int64_t n, int64_t b, double* scratch,
                           RealOf<T>* w);
  template <typename T>
  Status PhaseRows(const Lane&, const RealOf<T>* q, int64_t ldq, const T* phase, int64_t rows,
                   int64_t cols, T* z, int64_t ldz);
  template <typename T>
  Status WaveBlocks(const Lane&, const T* v2, const T* tau2, int64_t n, int64_t b, int64_t ell,
                    int64_t g0, int64_t j0, int64_t count, int64_t ldv, T* vb, T* taub);
  template <typename T>
  Status WaveFactors(const Lane&, const T* s, const T* taub, int64_t ell, int64_t count, T* t);
  // Q₂'s fused wave (algorithms/band_chase.h): per block, W = Vᴴ Z, W = T W, Z −= V W over
  // column chunks that fit `w` (w_count elements: two ℓ x chunk halves).
  template <typename T>
  bool WaveApplies(int64_t, int64_t ell) const {
    return ell >= 1;
  }
  template <typename T>
  Status WaveApply(const Lane&, const T* vb, int64_t ldv, const T* t, int64_t b, int64_t ell,
                   int64_t count, T* z, int64_t ldz, int64_t stride, int64_t cols, T* w,
                   int64_t w_count);
  template <typename T>
  Status GemmStrided(const Lane&, bool adjoint_a, bool adjoint_b, int64_t m, int64_t n, int64_t k,
                     T alpha, const T* a, int64_t lda, int64_t stride_a, const T* b, int64_t ldb,
                     int64_t stride_b, T beta, T* c, int64_t ldc, int64_t stride_c, int64_t count);
  template <typename R>
  Status Stedc(int64_t n, int64_t t, R* d, R* e, R* q, int64_t ldq);
  // The pairs lo..lo+k-1 of the tridiagonal matrix (d, e) alone, on this rank (LAPACK's ?stemr:
  // MRRR, O(n k)): w := their eigenvalues, qk (n x k) := their eigenvectors.
  static constexpr bool kTridiagonalPairs = true;
  template <typename R>
  Status TridiagonalPairs(int64_t n, const R* d, const R* e, int64_t lo, int64_t k, R* w, R* qk);
  template <typename U>
  Status GridAdjoint(int64_t n, int64_t t, int64_t ld, const U* q, U* y);
  int64_t solver_info() const { return solver_info_; }

  // QDWH's steps (algorithms/qdwh.h): host loops, MPI sums, PBLAS and ScaLAPACK on the grid.
  // Gram fills Z whole (a p?gemm) and PSymmRight reads it whole.
  template <typename T>
  using Tiled = algorithms::Tiled<T>;
  template <typename T>
  Status AbsSums(const Tiled<T>& u, double* sums);
  Status SumOverGrid(double* sums, int64_t count, double* host);
  Status AgreeOnValue(double* value);
  Status MaxOverGrid(int64_t* value);
  template <typename T>
  Status Scale(const Tiled<T>& u, double s);
  template <typename T>
  Status SetIdentity(const Tiled<T>& z);
  template <typename T>
  Status SumSquares(const Tiled<T>& w, double* sum);
  template <typename T>
  Status AxpbyChange(const Tiled<T>& u, const Tiled<T>& w, double e, double coef, double* sum);
  template <typename T>
  Status QdwhStack(const Tiled<T>& u, double sqrt_c, const Tiled<T>& y, int64_t top);
  template <typename T>
  Status Gram(double c, const Tiled<T>& u, double beta, const Tiled<T>& z);
  template <typename T>
  Status PPotrf(const Tiled<T>& z, int64_t* info);
  template <typename T>
  Status PQr(const Tiled<T>& y, T* tau);
  template <typename T>
  Status PProduct(char op_a, char op_b, int64_t m, int64_t n, int64_t k, double alpha,
                  const Tiled<T>& a, const Tiled<T>& b, double beta, const Tiled<T>& c);
  template <typename T>
  Status PTrsmRight(bool adjoint, const Tiled<T>& l, const Tiled<T>& w);
  template <typename T>
  Status PSymmRight(double alpha, const Tiled<T>& g, const Tiled<T>& w, double beta,
                    const Tiled<T>& u);
  template <typename T>
  Status PHermitianPart(const Tiled<T>& z, const Tiled<T>& h);

 private:
  const Grid& grid_;
  Descriptor square_{};
  algorithms::Distribution square_g_;
  std::vector<int> ipiv_;  // getrf's 32-bit pivots
  // b := op(A)⁻¹ b, A m x m triangular (uplo, diag: BLAS's letters), left side.
  template <typename T>
  Status Describe(const Tiled<T>& m, Descriptor* out) const {
    return MakeDescriptor(grid_, m.rows(), m.cols(), m.t(), m.t(), m.ld(), out);
  }
  template <typename T>
  static Status LeftTrsm(const char* uplo, const char* diag, int64_t m, int64_t n, const T* a,
                         int64_t lda, T* b, int64_t ldb);
  std::vector<char> geqrf_work_;
  int geqrf_lwork_ = 0;
  std::vector<std::vector<char>> buffers_;
  int64_t solver_info_ = 0;
};

}  // namespace jaxmg::scalapack
