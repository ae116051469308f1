// Typed wrappers over the vendor libraries' bufferSize-and-call pairs: cuSOLVERMp, cuBLASMp and
// (through the run-time table LocalBlas) cusolverDn. One struct per pair holds the call's
// operands once, so that the size query and the call cannot disagree:
//   vendor::Size(op, &dev, &host)   the workspace the call needs (the library's bufferSize);
//   vendor::Run(op, work)           the call, with the workspace provided;
//   op.Raw(work)                    the call's own status, for the callers that read a
//                                   numerical failure in it (cuSOLVERMp's Potrf and Sygvd).
// Both check the library's status and name the call in the error. The element type T fills in
// the data and compute types; operands are typed T* (const where the library only reads them).
// The engine gets the workspace between the two (Engine::Workspace); a collective call's
// workspace is agreed on first by its caller.
#pragma once

#include <cublas_v2.h>
#include <cublasmp.h>
#include <cusolverDn.h>
#include <cusolverMp.h>

#include <cstddef>
#include <cstdint>

#include "common/scalar.h"
#include "common/status.h"
#include "engines/cusolvermp/cusolvermp.h"
#include "engines/cusolvermp/local_blas.h"

namespace jaxmg::cusolvermp::vendor {

// A call's workspace: device and host, with their sizes.
struct Work {
  void* dev = nullptr;
  size_t dev_bytes = 0;
  void* host = nullptr;
  size_t host_bytes = 0;
};

// A submatrix operand: the local array of a block-cyclic matrix, the global (1-based) row and
// column where the submatrix starts, and the matrix's descriptor.
template <typename T, typename D>
struct At {
  T* p = nullptr;
  int64_t i = 1, j = 1;
  D d = nullptr;
};
template <typename T>
using SolverAt = At<T, cusolverMpMatrixDescriptor_t>;
template <typename T>
using BlasAt = At<T, cublasMpMatrixDescriptor_t>;

// cuBLAS compute type of an element type (by Scalar<T>::kIndex).
template <typename T>
constexpr cublasComputeType_t ComputeOf() {
  constexpr cublasComputeType_t kTypes[] = {CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_64F,
                                            CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_64F};
  return kTypes[Scalar<T>::kIndex];
}

inline Status Check(cusolverStatus_t s, const char* what) { return SolverCheck(s, what); }
inline Status Check(cublasMpStatus_t s, const char* what) { return BlasMpCheck(s, what); }

constexpr bool StartsWith(const char* s, const char* prefix) {
  for (; *prefix != '\0'; ++s, ++prefix) {
    if (*s != *prefix) return false;
  }
  return true;
}

// A call of cuSOLVERMp or cuBLASMp: collective over the grid, so that its workspace is agreed on
// before it (Engine::Call); cusolverDn's calls are one device's.
template <class Op>
inline constexpr bool kCollective =
    StartsWith(Op::kCall, "cusolverMp") || StartsWith(Op::kCall, "cublasMp");

template <class Op>
Status Size(const Op& op, size_t* dev, size_t* host) {
  *dev = 0, *host = 0;
  return Check(op.Query(dev, host), Op::kQuery);
}

template <class Op>
Status Run(const Op& op, const Work& w) {
  return Check(op.Raw(w), Op::kCall);
}

// --- cuSOLVERMp ---------------------------------------------------------------------------

template <typename T>
struct MpPotrf {  // lower (or upper) Cholesky in place
  static constexpr const char* kQuery = "cusolverMpPotrf_bufferSize";
  static constexpr const char* kCall = "cusolverMpPotrf";
  cusolverMpHandle_t h;
  cublasFillMode_t uplo;
  int64_t n;
  SolverAt<T> a;
  int* info;  // device
  cusolverStatus_t Query(size_t* dev, size_t* host) const {
    return cusolverMpPotrf_bufferSize(h, uplo, n, a.p, a.i, a.j, a.d, DataTypeOf<T>(), dev, host);
  }
  cusolverStatus_t Raw(const Work& w) const {
    return cusolverMpPotrf(h, uplo, n, a.p, a.i, a.j, a.d, DataTypeOf<T>(), w.dev, w.dev_bytes,
                           w.host, w.host_bytes, info);
  }
};

template <typename T>
struct MpGetrf {  // pivoted LU in place
  static constexpr const char* kQuery = "cusolverMpGetrf_bufferSize";
  static constexpr const char* kCall = "cusolverMpGetrf";
  cusolverMpHandle_t h;
  int64_t m, n;
  SolverAt<T> a;
  int64_t* pivots;  // device
  int* info;
  cusolverStatus_t Query(size_t* dev, size_t* host) const {
    return cusolverMpGetrf_bufferSize(h, m, n, a.p, a.i, a.j, a.d, pivots, DataTypeOf<T>(), dev,
                                      host);
  }
  cusolverStatus_t Raw(const Work& w) const {
    return cusolverMpGetrf(h, m, n, a.p, a.i, a.j, a.d, pivots, DataTypeOf<T>(), w.dev, w.dev_bytes,
                           w.host, w.host_bytes, info);
  }
};

template <typename T>
struct MpPotrs {  // solve with a Cholesky factor
  static constexpr const char* kQuery = "cusolverMpPotrs_bufferSize";
  static constexpr const char* kCall = "cusolverMpPotrs";
  cusolverMpHandle_t h;
  cublasFillMode_t uplo;
  int64_t n, nrhs;
  SolverAt<const T> a;
  SolverAt<T> b;
  int* info;
  cusolverStatus_t Query(size_t* dev, size_t* host) const {
    return cusolverMpPotrs_bufferSize(h, uplo, n, nrhs, a.p, a.i, a.j, a.d, b.p, b.i, b.j, b.d,
                                      DataTypeOf<T>(), dev, host);
  }
  cusolverStatus_t Raw(const Work& w) const {
    return cusolverMpPotrs(h, uplo, n, nrhs, a.p, a.i, a.j, a.d, b.p, b.i, b.j, b.d,
                           DataTypeOf<T>(), w.dev, w.dev_bytes, w.host, w.host_bytes, info);
  }
};

template <typename T>
struct MpGetrs {  // solve with LU factors
  static constexpr const char* kQuery = "cusolverMpGetrs_bufferSize";
  static constexpr const char* kCall = "cusolverMpGetrs";
  cusolverMpHandle_t h;
  cublasOperation_t op;
  int64_t n, nrhs;
  SolverAt<const T> a;
  const int64_t* pivots;  // device
  SolverAt<T> b;
  int* info;
  cusolverStatus_t Query(size_t* dev, size_t* host) const {
    return cusolverMpGetrs_bufferSize(h, op, n, nrhs, a.p, a.i, a.j, a.d, pivots, b.p, b.i, b.j,
                                      b.d, DataTypeOf<T>(), dev, host);
  }
  cusolverStatus_t Raw(const Work& w) const {
    return cusolverMpGetrs(h, op, n, nrhs, a.p, a.i, a.j, a.d, pivots, b.p, b.i, b.j, b.d,
                           DataTypeOf<T>(), w.dev, w.dev_bytes, w.host, w.host_bytes, info);
  }
};

template <typename T>
struct MpGeqrf {  // Householder QR in place, τ out
  static constexpr const char* kQuery = "cusolverMpGeqrf_bufferSize";
  static constexpr const char* kCall = "cusolverMpGeqrf";
  cusolverMpHandle_t h;
  int64_t m, n;
  SolverAt<T> a;
  T* tau;
  int* info;
  cusolverStatus_t Query(size_t* dev, size_t* host) const {
    return cusolverMpGeqrf_bufferSize(h, m, n, a.p, a.i, a.j, a.d, DataTypeOf<T>(), dev, host);
  }
  cusolverStatus_t Raw(const Work& w) const {
    return cusolverMpGeqrf(h, m, n, a.p, a.i, a.j, a.d, tau, DataTypeOf<T>(), w.dev, w.dev_bytes,
                           w.host, w.host_bytes, info);
  }
};

template <typename T>
struct MpOrgqr {  // Q of a Householder QR in place
  static constexpr const char* kQuery = "cusolverMpOrgqr_bufferSize";
  static constexpr const char* kCall = "cusolverMpOrgqr";
  cusolverMpHandle_t h;
  int64_t m, n, k;
  SolverAt<T> a;
  const T* tau;
  int* info;
  cusolverStatus_t Query(size_t* dev, size_t* host) const {
    return cusolverMpOrgqr_bufferSize(h, m, n, k, a.p, a.i, a.j, a.d, tau, DataTypeOf<T>(), dev,
                                      host);
  }
  cusolverStatus_t Raw(const Work& w) const {
    return cusolverMpOrgqr(h, m, n, k, a.p, a.i, a.j, a.d, tau, DataTypeOf<T>(), w.dev, w.dev_bytes,
                           w.host, w.host_bytes, info);
  }
};

template <typename T>
struct MpGels {  // least squares by QR
  static constexpr const char* kQuery = "cusolverMpGels_bufferSize";
  static constexpr const char* kCall = "cusolverMpGels";
  cusolverMpHandle_t h;
  cublasOperation_t op;
  int64_t m, n, nrhs;
  SolverAt<T> a, b;
  int* info;
  cusolverStatus_t Query(size_t* dev, size_t* host) const {
    return cusolverMpGels_bufferSize(h, op, m, n, nrhs, a.p, a.i, a.j, a.d, b.p, b.i, b.j, b.d,
                                     DataTypeOf<T>(), dev, host);
  }
  cusolverStatus_t Raw(const Work& w) const {
    return cusolverMpGels(h, op, m, n, nrhs, a.p, a.i, a.j, a.d, b.p, b.i, b.j, b.d,
                          DataTypeOf<T>(), w.dev, w.dev_bytes, w.host, w.host_bytes, info);
  }
};

template <typename T>
struct MpSyevd {  // Hermitian eigenvalues (w, real) and, with jobz "V", eigenvectors (q)
  static constexpr const char* kQuery = "cusolverMpSyevd_bufferSize";
  static constexpr const char* kCall = "cusolverMpSyevd";
  cusolverMpHandle_t h;
  bool vectors;
  cublasFillMode_t uplo;
  int64_t n;
  SolverAt<T> a;
  RealOf<T>* w;
  SolverAt<T> q;
  int* info;
  cusolverStatus_t Query(size_t* dev, size_t* host) const {
    char jobz[2] = {vectors ? 'V' : 'N', 0};
    return cusolverMpSyevd_bufferSize(h, jobz, uplo, n, a.p, a.i, a.j, a.d, w, q.p, q.i, q.j, q.d,
                                      DataTypeOf<T>(), dev, host);
  }
  cusolverStatus_t Raw(const Work& w_) const {
    char jobz[2] = {vectors ? 'V' : 'N', 0};
    return cusolverMpSyevd(h, jobz, uplo, n, a.p, a.i, a.j, a.d, w, q.p, q.i, q.j, q.d,
                           DataTypeOf<T>(), w_.dev, w_.dev_bytes, w_.host, w_.host_bytes, info);
  }
};

template <typename T>
struct MpSygvd {  // generalized Hermitian-definite eigenproblem A z = λ B z (type 1)
  static constexpr const char* kQuery = "cusolverMpSygvd_bufferSize";
  static constexpr const char* kCall = "cusolverMpSygvd";
  cusolverMpHandle_t h;
  cusolverEigMode_t jobz;
  cublasFillMode_t uplo;
  int64_t n;
  SolverAt<T> a, b;
  RealOf<T>* w;
  SolverAt<T> z;
  int* info;
  cusolverStatus_t Query(size_t* dev, size_t* host) const {
    return cusolverMpSygvd_bufferSize(h, CUSOLVER_EIG_TYPE_1, jobz, uplo, n, a.i, a.j, a.d, b.i,
                                      b.j, b.d, z.i, z.j, z.d, DataTypeOf<T>(), dev, host);
  }
  cusolverStatus_t Raw(const Work& w_) const {
    return cusolverMpSygvd(h, CUSOLVER_EIG_TYPE_1, jobz, uplo, n, a.p, a.i, a.j, a.d, b.p, b.i, b.j,
                           b.d, w, z.p, z.i, z.j, z.d, DataTypeOf<T>(), w_.dev, w_.dev_bytes,
                           w_.host, w_.host_bytes, info);
  }
};

template <typename T>
struct MpGesvd {  // singular values s and, by jobu / jobvt, U and Vᴴ
  static constexpr const char* kQuery = "cusolverMpGesvd_bufferSize";
  static constexpr const char* kCall = "cusolverMpGesvd";
  cusolverMpHandle_t h;
  cusolverMpGesvdDescriptor_t options;
  cusolverEigMode_t jobu, jobvt;
  int64_t m, n;
  SolverAt<T> a;
  RealOf<T>* s;
  SolverAt<T> u, vt;
  int* info;
  cusolverStatus_t Query(size_t* dev, size_t* host) const {
    return cusolverMpGesvd_bufferSize(h, options, jobu, jobvt, m, n, a.p, a.i, a.j, a.d, s, u.p,
                                      u.i, u.j, u.d, vt.p, vt.i, vt.j, vt.d, DataTypeOf<T>(), dev,
                                      host);
  }
  cusolverStatus_t Raw(const Work& w) const {
    return cusolverMpGesvd(h, options, jobu, jobvt, m, n, a.p, a.i, a.j, a.d, s, u.p, u.i, u.j, u.d,
                           vt.p, vt.i, vt.j, vt.d, DataTypeOf<T>(), w.dev, w.dev_bytes, w.host,
                           w.host_bytes, info);
  }
};

template <typename R>
struct MpStedc {  // real symmetric tridiagonal (d, e) eigenvalues into d, eigenvectors into q
  static constexpr const char* kQuery = "cusolverMpStedc_bufferSize";
  static constexpr const char* kCall = "cusolverMpStedc";
  cusolverMpHandle_t h;
  int64_t n;
  R *d, *e;
  SolverAt<R> q;
  int* iwork;  // host, max(n, 2 * processes + 1) entries (the size query's)
  int* info;
  cusolverStatus_t Query(size_t* dev, size_t* host) const {
    char compz[2] = {'I', 0};
    return cusolverMpStedc_bufferSize(h, compz, n, d, e, q.p, q.i, q.j, q.d, DataTypeOf<R>(), dev,
                                      host, iwork);
  }
  cusolverStatus_t Raw(const Work& w) const {
    char compz[2] = {'I', 0};
    return cusolverMpStedc(h, compz, n, d, e, q.p, q.i, q.j, q.d, DataTypeOf<R>(), w.dev,
                           w.dev_bytes, w.host, w.host_bytes, info);
  }
};

// --- cuBLASMp ----------------------------------------------------------------------------

template <typename T>
struct BlasMpGemm {  // c := alpha op_a(a) op_b(b) + beta c
  static constexpr const char* kQuery = "cublasMpGemm_bufferSize";
  static constexpr const char* kCall = "cublasMpGemm";
  cublasMpHandle_t h;
  cublasOperation_t op_a, op_b;
  int64_t m, n, k;
  T alpha;
  BlasAt<const T> a, b;
  T beta;
  BlasAt<T> c;
  cublasMpStatus_t Query(size_t* dev, size_t* host) const {
    return cublasMpGemm_bufferSize(h, op_a, op_b, m, n, k, &alpha, a.p, a.i, a.j, a.d, b.p, b.i,
                                   b.j, b.d, &beta, c.p, c.i, c.j, c.d, ComputeOf<T>(), dev, host);
  }
  cublasMpStatus_t Raw(const Work& w) const {
    return cublasMpGemm(h, op_a, op_b, m, n, k, &alpha, a.p, a.i, a.j, a.d, b.p, b.i, b.j, b.d,
                        &beta, c.p, c.i, c.j, c.d, ComputeOf<T>(), w.dev, w.dev_bytes, w.host,
                        w.host_bytes);
  }
};

template <typename T>
struct BlasMpTrsm {  // b := alpha op(a)⁻¹ b (side left) or alpha b op(a)⁻¹ (right)
  static constexpr const char* kQuery = "cublasMpTrsm_bufferSize";
  static constexpr const char* kCall = "cublasMpTrsm";
  cublasMpHandle_t h;
  cublasSideMode_t side;
  cublasFillMode_t uplo;
  cublasOperation_t op;
  cublasDiagType_t diag;
  int64_t m, n;
  T alpha;
  BlasAt<const T> a;
  BlasAt<T> b;
  cublasMpStatus_t Query(size_t* dev, size_t* host) const {
    return cublasMpTrsm_bufferSize(h, side, uplo, op, diag, m, n, &alpha, a.p, a.i, a.j, a.d, b.p,
                                   b.i, b.j, b.d, ComputeOf<T>(), dev, host);
  }
  cublasMpStatus_t Raw(const Work& w) const {
    return cublasMpTrsm(h, side, uplo, op, diag, m, n, &alpha, a.p, a.i, a.j, a.d, b.p, b.i, b.j,
                        b.d, ComputeOf<T>(), w.dev, w.dev_bytes, w.host, w.host_bytes);
  }
};

template <typename T>
struct BlasMpGeadd {  // c := alpha op(a) + beta c
  static constexpr const char* kQuery = "cublasMpGeadd_bufferSize";
  static constexpr const char* kCall = "cublasMpGeadd";
  cublasMpHandle_t h;
  cublasOperation_t op;
  int64_t m, n;
  T alpha;
  BlasAt<const T> a;
  T beta;
  BlasAt<T> c;
  cublasMpStatus_t Query(size_t* dev, size_t* host) const {
    return cublasMpGeadd_bufferSize(h, op, m, n, &alpha, a.p, a.i, a.j, a.d, &beta, c.p, c.i, c.j,
                                    c.d, dev, host);
  }
  cublasMpStatus_t Raw(const Work& w) const {
    return cublasMpGeadd(h, op, m, n, &alpha, a.p, a.i, a.j, a.d, &beta, c.p, c.i, c.j, c.d, w.dev,
                         w.dev_bytes, w.host, w.host_bytes);
  }
};

// c := alpha op(a) op(a)ᴴ + beta c, lower or upper triangle: Herk for complex T (real alpha and
// beta), Syrk for real T; op is N, or C (Herk) / T (Syrk).
template <typename T>
struct BlasMpRankK {
  static constexpr const char* kQuery =
      Scalar<T>::kParts == 2 ? "cublasMpHerk_bufferSize" : "cublasMpSyrk_bufferSize";
  static constexpr const char* kCall = Scalar<T>::kParts == 2 ? "cublasMpHerk" : "cublasMpSyrk";
  cublasMpHandle_t h;
  cublasFillMode_t uplo;
  bool adjoint;  // op(a) = aᴴ
  int64_t n, k;
  RealOf<T> alpha;
  BlasAt<const T> a;
  RealOf<T> beta;
  BlasAt<T> c;
  cublasMpStatus_t Query(size_t* dev, size_t* host) const {
    if constexpr (Scalar<T>::kParts == 2) {
      return cublasMpHerk_bufferSize(h, uplo, adjoint ? CUBLAS_OP_C : CUBLAS_OP_N, n, k, &alpha,
                                     a.p, a.i, a.j, a.d, &beta, c.p, c.i, c.j, c.d, ComputeOf<T>(),
                                     dev, host);
    } else {
      return cublasMpSyrk_bufferSize(h, uplo, adjoint ? CUBLAS_OP_T : CUBLAS_OP_N, n, k, &alpha,
                                     a.p, a.i, a.j, a.d, &beta, c.p, c.i, c.j, c.d, ComputeOf<T>(),
                                     dev, host);
    }
  }
  cublasMpStatus_t Raw(const Work& w) const {
    if constexpr (Scalar<T>::kParts == 2) {
      return cublasMpHerk(h, uplo, adjoint ? CUBLAS_OP_C : CUBLAS_OP_N, n, k, &alpha, a.p, a.i, a.j,
                          a.d, &beta, c.p, c.i, c.j, c.d, ComputeOf<T>(), w.dev, w.dev_bytes,
                          w.host, w.host_bytes);
    } else {
      return cublasMpSyrk(h, uplo, adjoint ? CUBLAS_OP_T : CUBLAS_OP_N, n, k, &alpha, a.p, a.i, a.j,
                          a.d, &beta, c.p, c.i, c.j, c.d, ComputeOf<T>(), w.dev, w.dev_bytes,
                          w.host, w.host_bytes);
    }
  }
};

template <typename T>
struct BlasMpSymm {  // c := alpha a b + beta c (side left) or alpha b a + beta c, a symmetric
  static constexpr const char* kQuery = "cublasMpSymm_bufferSize";
  static constexpr const char* kCall = "cublasMpSymm";
  cublasMpHandle_t h;
  cublasSideMode_t side;
  cublasFillMode_t uplo;
  int64_t m, n;
  T alpha;
  BlasAt<const T> a, b;
  T beta;
  BlasAt<T> c;
  cublasMpStatus_t Query(size_t* dev, size_t* host) const {
    return cublasMpSymm_bufferSize(h, side, uplo, m, n, &alpha, a.p, a.i, a.j, a.d, b.p, b.i, b.j,
                                   b.d, &beta, c.p, c.i, c.j, c.d, ComputeOf<T>(), dev, host);
  }
  cublasMpStatus_t Raw(const Work& w) const {
    return cublasMpSymm(h, side, uplo, m, n, &alpha, a.p, a.i, a.j, a.d, b.p, b.i, b.j, b.d, &beta,
                        c.p, c.i, c.j, c.d, ComputeOf<T>(), w.dev, w.dev_bytes, w.host,
                        w.host_bytes);
  }
};

// --- cusolverDn (one device; through LocalBlas) -------------------------------------------

// The handles of a one-device call: the run-time table and cusolverDn's handle and parameters.
struct Dn {
  const LocalBlas* lb;
  cusolverDnHandle_t h;
  cusolverDnParams_t params;
};

template <typename T>
struct DnPotrf {  // one device's Cholesky (64-bit API)
  static constexpr const char* kQuery = "cusolverDnXpotrf_bufferSize";
  static constexpr const char* kCall = "cusolverDnXpotrf";
  Dn dn;
  cublasFillMode_t uplo;
  int64_t n;
  T* a;
  int64_t lda;
  int* info;
  cusolverStatus_t Query(size_t* dev, size_t* host) const {
    return dn.lb->potrf_buffer_size(dn.h, dn.params, uplo, n, DataTypeOf<T>(), a, lda,
                                    DataTypeOf<T>(), dev, host);
  }
  cusolverStatus_t Raw(const Work& w) const {
    return dn.lb->potrf(dn.h, dn.params, uplo, n, DataTypeOf<T>(), a, lda, DataTypeOf<T>(), w.dev,
                        w.dev_bytes, w.host, w.host_bytes, info);
  }
};

template <typename T>
struct DnGetrf {  // one device's pivoted LU (64-bit API)
  static constexpr const char* kQuery = "cusolverDnXgetrf_bufferSize";
  static constexpr const char* kCall = "cusolverDnXgetrf";
  Dn dn;
  int64_t m, n;
  T* a;
  int64_t lda;
  int64_t* pivots;
  int* info;
  cusolverStatus_t Query(size_t* dev, size_t* host) const {
    return dn.lb->getrf_buffer_size(dn.h, dn.params, m, n, DataTypeOf<T>(), a, lda, DataTypeOf<T>(),
                                    dev, host);
  }
  cusolverStatus_t Raw(const Work& w) const {
    return dn.lb->getrf(dn.h, dn.params, m, n, DataTypeOf<T>(), a, lda, pivots, DataTypeOf<T>(),
                        w.dev, w.dev_bytes, w.host, w.host_bytes, info);
  }
};

template <typename T>
struct DnGeqrf {  // one device's Householder QR (64-bit API)
  static constexpr const char* kQuery = "cusolverDnXgeqrf_bufferSize";
  static constexpr const char* kCall = "cusolverDnXgeqrf";
  Dn dn;
  int64_t m, n;
  T* a;
  int64_t lda;
  T* tau;
  int* info;
  cusolverStatus_t Query(size_t* dev, size_t* host) const {
    return dn.lb->geqrf_buffer_size(dn.h, dn.params, m, n, DataTypeOf<T>(), a, lda, DataTypeOf<T>(),
                                    tau, DataTypeOf<T>(), dev, host);
  }
  cusolverStatus_t Raw(const Work& w) const {
    return dn.lb->geqrf(dn.h, dn.params, m, n, DataTypeOf<T>(), a, lda, DataTypeOf<T>(), tau,
                        DataTypeOf<T>(), w.dev, w.dev_bytes, w.host, w.host_bytes, info);
  }
};

}  // namespace jaxmg::cusolvermp::vendor
