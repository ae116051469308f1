// Helpers shared by the GPU engine's source files: element types for the kernels and cuBLAS,
// and the JAXMG_DEBUG timers.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include "common/environment.h"
#include "common/scalar.h"
#include "cuda/kernels.h"
#include "engines/cusolvermp/cusolvermp.h"

namespace jaxmg::cusolvermp {

template <typename T>
constexpr cuda::Dtype KernelType() {
  return static_cast<cuda::Dtype>(Scalar<T>::kIndex);
}

// op(x) = xᴴ (a transpose for real types).
template <typename T>
constexpr cublasOperation_t AdjointOp() {
  return Scalar<T>::kParts == 2 ? CUBLAS_OP_C : CUBLAS_OP_T;
}

inline bool Debug() { return DebugLevel() >= 1; }

// With JAXMG_DEBUG set: the wall time of one engine step (the stream is synchronized around it).
class StepTimer {
 public:
  StepTimer(const char* name, cudaStream_t stream) : name_(name), stream_(stream) {
    if (!Debug()) return;
    cudaStreamSynchronize(stream_);
    start_ = std::chrono::steady_clock::now();
  }
  ~StepTimer() {
    if (!Debug()) return;
    cudaStreamSynchronize(stream_);
    const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start_;
    std::fprintf(stderr, "[jaxmg] step %s: %.2f ms\n", name_, ms.count());
  }

 private:
  const char* name_;
  cudaStream_t stream_;
  std::chrono::steady_clock::time_point start_;
};

// With JAXMG_DEBUG=2: the time of parts of a step summed by name (the device is synchronized
// around each part, so that parts meant to overlap run one after the other), printed and reset
// by PrintParts. One table per thread: a process that drives several GPUs runs each device's
// handler on a thread of its own, and a step's parts and its PrintParts run on that thread.
inline std::map<std::string, double>& Parts() {
  thread_local std::map<std::string, double> parts;
  return parts;
}

inline bool DebugParts() { return DebugLevel() >= 2; }

class PartTimer {
 public:
  explicit PartTimer(const char* name) : name_(name) {
    if (!DebugParts()) return;
    cudaDeviceSynchronize();
    start_ = std::chrono::steady_clock::now();
  }
  ~PartTimer() {
    if (!DebugParts()) return;
    cudaDeviceSynchronize();
    const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start_;
    Parts()[name_] += ms.count();
  }

 private:
  const char* name_;
  std::chrono::steady_clock::time_point start_;
};

inline void PrintParts(const char* step) {
  for (const auto& [name, ms] : Parts()) {
    std::fprintf(stderr, "[jaxmg] %s part %s: %.2f ms\n", step, name.c_str(), ms);
  }
  Parts().clear();
}

}  // namespace jaxmg::cusolvermp
