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
#include "routines/steps.h"

namespace jaxmg::scalapack {

class Engine {
 public:
  // A matrix the steps pass (routines/contract.h): host memory, ScaLAPACK's descriptor.
  using Matrix = DistributedMatrix<Descriptor>;

  // Agrees on the call with the other processes of the mesh (bounded wait, AgreeOnCall), then
  // joins (or creates, collectively) the grid of the plan for mesh position (attrs.u, attrs.v).
  // Callers hold EngineLock().
  static Status Create(const SolveAttrs& attrs, const layout::Plan& plan,
                       const CallFingerprint& fingerprint, Engine* out);

  const layout::Plan& plan() const { return *plan_; }

  // The steps (routines/steps.h).
  JAXMG_DECLARE_ENGINE_STEPS
  bool asymmetric() const { return asymmetric_; }

 private:
  bool asymmetric_ = false;
  // Getrf by the 1-D LU on 1 x P grids (config.cpu_lu = scalapack: p?getrf everywhere).
  bool UseOwnLu() const;
  // Geqrf and Orgqr by the 1-D QR on 1 x P grids (config.cpu_qr = scalapack: p?geqrf, p?orgqr).
  bool UseOwnQr() const;
  algorithms::Qr1DShape QrShapeOf() const;
  // CholeskyInverse (lu false) or InverseSolve (lu true) by the blocked inverses. Defaults:
  // CholeskyInverse blocked, InverseSolve p?getri; config.cpu_inverses = blocked: both blocked,
  // = scalapack: both ScaLAPACK's (p?potrs with the identity, p?getri).
  bool UseOwnInverses(bool lu) const;
  // An n x n matrix in the engine's tiles over its grid, ld local rows (algorithms/inverses.h).
  algorithms::Square SquareOf(int64_t n, int64_t ld) const;
  // The handle of the engine matrix that Prepare or Adopt set up (work_, desc_a_ and the local
  // extents): what they hand out. Every other step reads the matrices it is handed.
  Matrix EngineMatrix() const;
  // *out := a new zero matrix distributed like `like` (storage and descriptor owned by the
  // engine for the call).
  template <typename T>
  Status NewLike(const Matrix& like, Matrix* out);
  // The status of the factorization in `a` (Potrf, Getrf), agreed.
  template <typename T>
  Status Agree(const Matrix& a, int* info);
  // An error unless `lu` holds an LU factorization (step: the step's name).
  static Status CheckLu(const Matrix& lu, const char* step);
  // Eigh by the two stages on 1 x P and P x 1 grids (band_eigh.cc): config.cpu_eigh chooses;
  // "auto", eigenvalues alone take them (measured).
  bool UseTwoStage(bool vectors) const;
  // The band's width for tile t (config.eig_band: the widest tried; 0: the two stages do not
  // apply).
  int64_t EigBand(int64_t t) const;
  // w := the eigenvalues (ascending) of a (the engine matrix; overwritten) and, with vectors,
  // z := the eigenvectors (distributed as a); *info > 0 where the tridiagonal solve failed
  // (agreed).
  template <typename T>
  Status TwoStageEigh(const Matrix& a, bool vectors, RealOf<T>* w, const Matrix& z, int* info);
  // QDWH's buffers, allocated (a local outcome, for the caller's agreement), and its operands.
  template <typename T>
  Status PolarBuffers(const Matrix& u, bool keep_a);
  template <typename T>
  algorithms::QdwhWork<T> PolarWork(const Matrix& u);
  // The status of a QR factorization held: 1 + the first column with a non-finite entry or,
  // with rank_fails, an exactly zero diagonal entry of R; agreed (max).
  template <typename T>
  Status AgreeQr(const Matrix& a, bool rank_fails, int* info);
  template <typename T, typename Fn>
  void ForEachLocalDiagonal(const Matrix& a, Fn&& fn) const;
  template <typename T>
  int64_t FirstNonFiniteColumn(const Matrix& a) const;
  std::tuple<int64_t, int64_t, bool> RhsBlock() const;
  template <typename Fn>
  void ForEachRhsEntry(const Matrix& c, Axis axis, Fn&& fn) const;
  // x (row-major, row stride x_cols) := this shard's x_rows of the first cols.extent rows of the
  // local block-cyclic matrix `local` (ld rows, lc columns, `cols` global columns), in columns
  // 0..cols-1 (collective; see LeadingRowsOut).
  template <typename T>
  Status RowsOut(const T* local, int64_t ld, int64_t lc, int64_t cols, void* x, int64_t x_rows,
                 int64_t x_cols);
  // *out := a new zero rows x cols matrix in the engine's tiles over its grid (storage and
  // descriptor owned by the engine for the call).
  template <typename T>
  Status NewMatrix(int64_t rows, int64_t cols, Matrix* out);
  // The shard := engine matrix `from` (distributed as `desc`) in the JAX layout.
  template <typename T>
  Status MatrixOut(const void* from, const Descriptor& desc, void* shard);

  const layout::Plan* plan_ = nullptr;
  const Grid* grid_ = nullptr;
  Config config_;  // the call's (common/config.h)
  int u_ = 0, v_ = 0;
  bool rhs_by_cols_ = false;  // b and x split over the mesh's columns (matrix handed transposed)
  int64_t local_rows_ = 0, local_cols_ = 0;
  void* work_ = nullptr;     // the engine-local matrix (the shard itself, or owned_)
  std::vector<char> owned_;  // padded or redistributed copy
  Descriptor desc_a_{};
  std::vector<int> ipiv_;
  std::vector<char> tau_;             // the Householder scalars of a QR factorization
  std::unique_ptr<Backend> backend_;  // the own algorithms' buffers, kept between steps
  algorithms::Qr1DKept own_qr_;       // the 1-D QR's τ and T_k (in backend_'s buffers)
  int64_t input_nonfinite_ = 0;       // FirstNonFiniteColumn of the matrix before Getrf
  // QDWH's operands (algorithms/qdwh.h: A kept for H, W, Z, the stacked Y and its τ, the sums) in
  // backend_'s buffers, Z's descriptor (also PolarValues' Z) and local rows, and its steps so far.
  void *polar_a_ = nullptr, *polar_w_ = nullptr, *polar_z_ = nullptr, *polar_y_ = nullptr;
  void* polar_tau_ = nullptr;
  double* polar_sums_ = nullptr;
  int64_t polar_steps_ = 0;
  Descriptor desc_z_{};
  int64_t z_rows_ = 0;
  // The matrices the steps made for the call (NewLike) and their descriptors; a deque keeps
  // the handles' pointers valid as it grows.
  std::deque<std::vector<char>> matrices_;
  std::deque<Descriptor> descriptors_;
};

}  // namespace jaxmg::scalapack
