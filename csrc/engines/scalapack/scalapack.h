// CPU engine: typed wrappers over ScaLAPACK/BLACS and the MPI calls the algorithms need.
// Every function returns a Status; nothing throws.
#pragma once

#include <mpi.h>

#include <complex>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/scalar.h"
#include "common/status.h"

namespace jaxmg::scalapack {

// Initializes MPI once per process (MPI_THREAD_SERIALIZED; callers hold EngineLock()).
Status EnsureMpi();
// Finalizes MPI if this library initialized it. Called at interpreter exit.
void FinalizeMpi();
int WorldRank();
int WorldSize();
// One engine call at a time per process: MPI is initialized SERIALIZED.
std::unique_lock<std::mutex> EngineLock();

// Before any collective of a call: the processes `members` (world ranks) exchange `values`
// (prefixed with a per-member-set call counter) through the first member, with every wait bounded
// by JAXMG_CALL_TIMEOUT seconds (default 600). A difference is the same error on every member,
// naming the field (names[i] for values[i]); a member that does not come in time is an error on
// the others, and every later call refuses (the job must be restarted).
Status AgreeOnCall(const std::vector<int>& members, const std::vector<int64_t>& values,
                   const std::vector<const char*>& names);

// ranks[position] = world rank of the process at each mesh position, gathered over
// MPI_COMM_WORLD (the mesh must span every process).
Status GatherMeshRanks(int my_position, int positions, std::vector<int>* ranks);

// A BLACS process grid over a communicator that holds exactly the participating processes.
struct Grid {
  MPI_Comm comm = MPI_COMM_NULL;
  int context = -1;
  int nprow = 1, npcol = 1;
  int myrow = -1, mycol = -1;
  std::vector<int> comm_ranks;  // the rank in comm of grid position (i, j), at i * npcol + j
};

// An error naming `what` when an MPI call returned rc != MPI_SUCCESS.
Status MpiCheck(int rc, const char* what);

// The grid where grid position (i, j) is world rank world_ranks[i * npcol + j]. Created on first
// use (collectively, by the participating processes only) and cached for the life of the process.
Status GetGrid(const std::vector<int>& world_ranks, int nprow, int npcol, const Grid** grid);

struct Descriptor {
  int desc[9];
};
Status MakeDescriptor(const Grid& grid, int64_t m, int64_t n, int64_t mb, int64_t nb, int64_t lld,
                      Descriptor* out);

template <typename T>
Status Potrf(int64_t n, T* a, const Descriptor& desc, int* info);
template <typename T>
Status Potrs(int64_t n, int64_t nrhs, const T* a, const Descriptor& desc_a, T* b,
             const Descriptor& desc_b, int* info);
template <typename T>
Status Getrf(int64_t n, T* a, const Descriptor& desc, int* ipiv, int* info);
// trans: 'N' or 'T'.
template <typename T>
Status Getrs(char trans, int64_t n, int64_t nrhs, const T* a, const Descriptor& desc_a,
             const int* ipiv, T* b, const Descriptor& desc_b, int* info);
// A⁻¹ in place of its LU factors (p?getri; local_rows x local_cols: this process's part).
template <typename T>
Status Getri(int64_t n, int64_t local_rows, int64_t local_cols, T* a, const Descriptor& desc,
             const int* ipiv, int* info);
// QR of the m x n matrix (tau: LOCc(n) entries); Q's first n columns from it (k = n
// reflectors); least squares min ‖A x − b‖ for m >= n (x in b's first n rows; A is left
// holding its QR factors).
template <typename T>
Status Geqrf(int64_t m, int64_t n, T* a, const Descriptor& desc, T* tau, int* info);
template <typename T>
Status Orgqr(int64_t m, int64_t n, T* a, const Descriptor& desc, const T* tau, int* info);
template <typename T>
Status Gels(int64_t m, int64_t n, int64_t nrhs, T* a, const Descriptor& desc_a, T* b,
            const Descriptor& desc_b, int* info);
// Eigenvalues (ascending, replicated: w) and, with `vectors`, eigenvectors (z) of the
// Hermitian n x n matrix held in a's lower triangle (a is overwritten); local_rows/cols: this
// process's extents (for the workspace: p?syevd's query answers less than it needs for some
// tiles, which ends in an illegal-argument message from p?ormtr and wrong vectors).
template <typename T>
Status Eigh(bool vectors, int64_t n, int64_t local_rows, int64_t local_cols, T* a,
            const Descriptor& desc, RealOf<T>* w, T* z, const Descriptor& descz, int* info);
// The workspace a LAPACK-style query (lwork = -1) asked for: its first entry's real part, as an
// int (*lwork) and a vector of that many entries.
template <typename T>
Status QueriedWork(const T& query, std::vector<T>* work, int* lwork) {
  const double size = static_cast<double>(std::real(query));
  JAXMG_RETURN_IF_ERROR(CheckedInt(static_cast<int64_t>(size) + 1, "workspace", lwork));
  work->assign(static_cast<size_t>(*lwork), T(0));
  return Status();
}
// The eigenvalues lo <= i < hi of the same problem (p?syevr / p?heevr, MRRR) into w's first
// k = hi - lo entries (w holds n), with `vectors` their eigenvectors into z's first k columns;
// info > 0 when fewer pairs were found (lo + 1 + the number found). The workspaces are agreed
// over the grid before the collective solve.
template <typename T>
Status EighSubset(const Grid& grid, bool vectors, int64_t n, int64_t lo, int64_t hi, T* a,
                  const Descriptor& desc, RealOf<T>* w, T* z, const Descriptor& descz, int* info);
// Singular values (descending, replicated: s) of the m x n matrix a (m >= n; a is destroyed) and,
// with `vectors_u` / `vectors_vt`, the thin U (m x n, distributed like a) and Vᴴ (n x n).
template <typename T>
Status Gesvd(bool vectors_u, bool vectors_vt, int64_t m, int64_t n, T* a, const Descriptor& desc,
             RealOf<T>* s, T* u, const Descriptor& descu, T* vt, const Descriptor& descvt,
             int* info);
// The reduction of the generalized problem A x = λ B x to C y = λ y (p?sygst / p?hegst, type
// 1, lower): a := L⁻¹ A L⁻ᴴ for B's Cholesky factor L held in b's lower triangle; *scale: the
// factor the eigenvalues take.
template <typename T>
Status Sygst(int64_t n, T* a, const Descriptor& desca, const T* b, const Descriptor& descb,
             RealOf<T>* scale, int* info);
// b := alpha op(a)⁻¹ b (side 'L') or alpha b op(a)⁻¹ ('R'), a triangular (uplo 'L'/'U',
// op 'N'/'T'/'C', diag 'N'/'U'), b m x n.
template <typename T>
Status Trsm(char side, char uplo, char trans, char diag, int64_t m, int64_t n, T alpha, const T* a,
            const Descriptor& desca, T* b, const Descriptor& descb);
// Trsm on submatrices: a's from global (ia, ja), b's from (ib, jb) (1-based, as PBLAS).
template <typename T>
Status TrsmAt(char side, char uplo, char trans, char diag, int64_t m, int64_t n, T alpha,
              const T* a, int64_t ia, int64_t ja, const Descriptor& desca, T* b, int64_t ib,
              int64_t jb, const Descriptor& descb);
// Gemm on submatrices: a's from global (ia, ja), b's from (ib, jb), c's from (ic, jc).
template <typename T>
Status GemmAt(char transa, char transb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
              int64_t ia, int64_t ja, const Descriptor& desca, const T* b, int64_t ib, int64_t jb,
              const Descriptor& descb, T beta, T* c, int64_t ic, int64_t jc,
              const Descriptor& descc);
// c := alpha op(a) op(b) + beta c (op: 'N', 'T' or 'C'), c m x n, k the inner extent.
template <typename T>
Status Gemm(char transa, char transb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
            const Descriptor& desca, const T* b, const Descriptor& descb, T beta, T* c,
            const Descriptor& descc);
// c := aᴴ (aᵀ for real types), n x n.
template <typename T>
Status Adjoint(int64_t n, const T* a, const Descriptor& desca, T* c, const Descriptor& descc);
template <typename T>
Status Gemr2d(int64_t m, int64_t n, const T* a, const Descriptor& desc_a, T* b,
              const Descriptor& desc_b, const Grid& grid);

// MPI type of the real parts of T.
template <typename T>
MPI_Datatype RealMpiType() {
  return sizeof(RealOf<T>) == 4 ? MPI_FLOAT : MPI_DOUBLE;
}

// In-place sums over the grid's communicator (count elements of T): on every rank, or on the
// communicator's rank root.
template <typename T>
Status AllreduceSum(const Grid& grid, T* data, int64_t count);
template <typename T>
Status ReduceSum(const Grid& grid, T* data, int64_t count, int root);
Status AllreduceMax(const Grid& grid, int* value);
Status AllreduceIntSum(const Grid& grid, int* data, int64_t count);

// Every rank's outcome of an algorithm at its agreement point (collective over the grid): the
// lowest failing rank's error on every rank, naming that rank, or ok.
Status AgreeOnFailure(const Grid& grid, const char* algorithm, const Status& local);

}  // namespace jaxmg::scalapack
