// Single-GPU cuBLAS and cuSOLVER calls for the engine's own algorithms (the 1-D LU and QR, the
// two-stage eigensolver) and the 1 x 1 grid's fast path, found in the process at run time:
// libcusolverMp already loads libcublas and libcusolver, and so does jaxlib, so no link-time
// dependency on those large libraries is added.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <functional>

#include "common/config.h"
#include "common/status.h"

namespace jaxmg::cusolvermp {

struct LocalBlas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  // Typed trsm / gemm by Scalar<T>::kIndex (S, D, C, Z); data and scalars passed as void*.
  using Trsm = cublasStatus_t (*)(cublasHandle_t, cublasSideMode_t, cublasFillMode_t,
                                  cublasOperation_t, cublasDiagType_t, int, int, const void*,
                                  const void*, int, void*, int);
  using Gemm = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                  int, const void*, const void*, int, const void*, int, const void*,
                                  void*, int);
  // Typed trmm (out of place: c := alpha op(a) b).
  using Trmm = cublasStatus_t (*)(cublasHandle_t, cublasSideMode_t, cublasFillMode_t,
                                  cublasOperation_t, cublasDiagType_t, int, int, const void*,
                                  const void*, int, const void*, int, void*, int);
  // Typed strided batched gemm.
  using GemmBatched = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                         int, int, const void*, const void*, int, long long,
                                         const void*, int, long long, const void*, void*, int,
                                         long long, int);
  Trsm trsm[4] = {};
  Trmm trmm[4] = {};
  Gemm gemm[4] = {};
  GemmBatched gemm_batched[4] = {};
  decltype(&cusolverDnCreate) dn_create = nullptr;
  decltype(&cusolverDnSetStream) dn_set_stream = nullptr;
  decltype(&cusolverDnSetMathMode) dn_set_math_mode = nullptr;
  decltype(&cusolverDnCreateParams) dn_create_params = nullptr;
  decltype(&cusolverDnXgetrf_bufferSize) getrf_buffer_size = nullptr;
  decltype(&cusolverDnXgetrf) getrf = nullptr;
  decltype(&cusolverDnXgeqrf_bufferSize) geqrf_buffer_size = nullptr;
  decltype(&cusolverDnXgeqrf) geqrf = nullptr;
  // One device's own solvers (the 1 x 1 grid's fast path).
  decltype(&cusolverDnXpotrf_bufferSize) potrf_buffer_size = nullptr;
  decltype(&cusolverDnXpotrf) potrf = nullptr;
  decltype(&cusolverDnXpotrs) potrs = nullptr;
  decltype(&cusolverDnXgetrs) getrs = nullptr;
};

// The table, resolved once; an error names the missing symbol.
Status GetLocalBlas(const LocalBlas** out);

Status CublasCheck(cublasStatus_t s, const char* what);

// The math modes of config.gpu_math (common/config.h's Choice: kAuto native, kTf32, kBf16x9,
// kFixedPoint, kBf16x9FixedPoint) for cuBLAS handles and for cuSOLVER's (cusolverDn and
// cuSOLVERMp take the same cusolverMathMode_t; TF32 is cuBLAS's alone).
// config.gpu_math on one of the context's handles, which outlive the call: set(), where the
// mode last set there (*applied, a Choice code) differs, so the default costs nothing; an error
// naming `setter` where it is needed and was not found (found: false).
Status ApplyMath(Choice want, int64_t* applied, const char* setter, bool found,
                 const std::function<Status()>& set);
cublasMath_t BlasMathMode(Choice choice);
cusolverMathMode_t SolverMathMode(Choice choice);

}  // namespace jaxmg::cusolvermp
