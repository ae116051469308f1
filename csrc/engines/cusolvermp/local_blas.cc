#include "engines/cusolvermp/local_blas.h"

#include <dlfcn.h>

#include <functional>
#include <mutex>
#include <string>

#include "engines/cusolvermp/cusolvermp.h"

namespace jaxmg::cusolvermp {
namespace {

// A symbol of the process (libraries loaded so far), or of the library `so` loaded by name.
void* Find(const char* name, const char* so) {
  if (void* p = dlsym(RTLD_DEFAULT, name)) return p;
  void* lib = dlopen(so, RTLD_NOW | RTLD_GLOBAL);
  return lib ? dlsym(lib, name) : nullptr;
}

template <typename F>
Status Resolve(const char* name, const char* so, F* out) {
  *out = reinterpret_cast<F>(Find(name, so));
  if (*out == nullptr) {
    return Status::Error(std::string("jaxmg GPU engine: ") + name + " not found (" + so +
                         ", from the nvidia-cublas / nvidia-cusolver wheels that jax[cuda13] "
                         "installs, must be loadable)");
  }
  return Status();
}

}  // namespace

Status CublasCheck(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status();
  return Status::Error("cuBLAS error " + std::to_string(static_cast<int>(s)) + " in " + what);
}

Status ApplyMath(Choice want, int64_t* applied, const char* setter, bool found,
                 const std::function<Status()>& set) {
  const auto code = static_cast<int64_t>(want);
  if (*applied == code) return Status();
  if (!found) {
    return Status::Error(std::string("jaxmg GPU engine: config.gpu_math needs ") + setter +
                         ", not found in the loaded cuBLAS / cuSOLVER; use gpu_math=\"auto\"");
  }
  JAXMG_RETURN_IF_ERROR(set());
  *applied = code;
  return Status();
}

cublasMath_t BlasMathMode(Choice choice) {
  switch (choice) {
    case Choice::kTf32:
      return CUBLAS_TF32_TENSOR_OP_MATH;
    case Choice::kBf16x9:
      return CUBLAS_FP32_EMULATED_BF16X9_MATH;
    case Choice::kFixedPoint:
      return CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH;
    case Choice::kBf16x9FixedPoint:
      return static_cast<cublasMath_t>(CUBLAS_FP32_EMULATED_BF16X9_MATH |
                                       CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH);
    default:
      return CUBLAS_DEFAULT_MATH;
  }
}

cusolverMathMode_t SolverMathMode(Choice choice) {
  switch (choice) {
    case Choice::kBf16x9:
      return CUSOLVER_FP32_EMULATED_BF16X9_MATH;
    case Choice::kFixedPoint:
      return CUSOLVER_FP64_EMULATED_FIXEDPOINT_MATH;
    case Choice::kBf16x9FixedPoint:
      return CUSOLVER_FP32_FP64_EMULATED_MATH;
    default:
      return CUSOLVER_DEFAULT_MATH;
  }
}

Status GetLocalBlas(const LocalBlas** out) {
  static LocalBlas table;
  static Status status;
  static std::once_flag once;
  std::call_once(once, [] {
    constexpr const char* kBlas = "libcublas.so.13";
    constexpr const char* kSolver = "libcusolver.so.12";
    const char* trsm[4] = {"cublasStrsm_v2", "cublasDtrsm_v2", "cublasCtrsm_v2", "cublasZtrsm_v2"};
    const char* trmm[4] = {"cublasStrmm_v2", "cublasDtrmm_v2", "cublasCtrmm_v2", "cublasZtrmm_v2"};
    const char* gemm[4] = {"cublasSgemm_v2", "cublasDgemm_v2", "cublasCgemm_v2", "cublasZgemm_v2"};
    const char* batched[4] = {"cublasSgemmStridedBatched", "cublasDgemmStridedBatched",
                              "cublasCgemmStridedBatched", "cublasZgemmStridedBatched"};
    Status s = Resolve("cublasCreate_v2", kBlas, &table.create);
    if (s.ok()) s = Resolve("cublasSetStream_v2", kBlas, &table.set_stream);
    for (int i = 0; i < 4 && s.ok(); ++i) s = Resolve(trsm[i], kBlas, &table.trsm[i]);
    for (int i = 0; i < 4 && s.ok(); ++i) s = Resolve(trmm[i], kBlas, &table.trmm[i]);
    for (int i = 0; i < 4 && s.ok(); ++i) s = Resolve(gemm[i], kBlas, &table.gemm[i]);
    for (int i = 0; i < 4 && s.ok(); ++i) s = Resolve(batched[i], kBlas, &table.gemm_batched[i]);
    if (s.ok()) s = Resolve("cusolverDnCreate", kSolver, &table.dn_create);
    if (s.ok()) s = Resolve("cusolverDnSetStream", kSolver, &table.dn_set_stream);
    if (s.ok()) s = Resolve("cusolverDnCreateParams", kSolver, &table.dn_create_params);
    if (s.ok()) s = Resolve("cusolverDnXgetrf_bufferSize", kSolver, &table.getrf_buffer_size);
    if (s.ok()) s = Resolve("cusolverDnXgetrf", kSolver, &table.getrf);
    if (s.ok()) s = Resolve("cusolverDnXgeqrf_bufferSize", kSolver, &table.geqrf_buffer_size);
    if (s.ok()) s = Resolve("cusolverDnXgeqrf", kSolver, &table.geqrf);
    if (s.ok()) s = Resolve("cusolverDnXpotrf_bufferSize", kSolver, &table.potrf_buffer_size);
    if (s.ok()) s = Resolve("cusolverDnXpotrf", kSolver, &table.potrf);
    if (s.ok()) s = Resolve("cusolverDnXpotrs", kSolver, &table.potrs);
    if (s.ok()) s = Resolve("cusolverDnXgetrs", kSolver, &table.getrs);
    // Optional (only config.gpu_math other than "auto" needs them: ApplyMath says so).
    table.set_math_mode =
        reinterpret_cast<decltype(table.set_math_mode)>(Find("cublasSetMathMode", kBlas));
    table.dn_set_math_mode =
        reinterpret_cast<decltype(table.dn_set_math_mode)>(Find("cusolverDnSetMathMode", kSolver));
    status = s;
  });
  *out = &table;
  return status;
}

}  // namespace jaxmg::cusolvermp
