// Device element types and helpers shared by the GPU engine's kernel files (kernels_*.cu,
// band_*.cu): real scalars and (re, im) pairs, their traits, launch sizes and the run-time dtype
// dispatch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels.h"

namespace jaxmg::cuda::device {

constexpr int kThreads = 256;

// Element types on the device: real scalars and (re, im) pairs.
template <typename R>
struct Cplx {
  R re, im;
};

template <typename T>
struct Traits;
template <>
struct Traits<float> {
  using Real = float;
  static __device__ float Conj(float v) { return v; }
  static __device__ float Re(float v) { return v; }
  static __device__ float Abs(float v) { return fabsf(v); }
  static __device__ float Zero() { return 0.f; }
  static __device__ float One() { return 1.f; }
  static __device__ float Nan() { return __int_as_float(0x7fc00000); }
};
template <>
struct Traits<double> {
  using Real = double;
  static __device__ double Conj(double v) { return v; }
  static __device__ double Re(double v) { return v; }
  static __device__ double Abs(double v) { return fabs(v); }
  static __device__ double Zero() { return 0.0; }
  static __device__ double One() { return 1.0; }
  static __device__ double Nan() { return __longlong_as_double(0x7ff8000000000000ll); }
};
template <typename R>
struct Traits<Cplx<R>> {
  using Real = R;
  static __device__ Cplx<R> Conj(Cplx<R> v) { return {v.re, -v.im}; }
  static __device__ R Re(Cplx<R> v) { return v.re; }
  static __device__ R Abs(Cplx<R> v) { return hypot(v.re, v.im); }
  static __device__ Cplx<R> Zero() { return {R(0), R(0)}; }
  static __device__ Cplx<R> One() { return {R(1), R(0)}; }
  static __device__ Cplx<R> Nan() { return {Traits<R>::Nan(), R(0)}; }
};

inline int Blocks(int64_t count) {
  const int64_t b = (count + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

__device__ inline int64_t CyclicGlobal(int64_t local, int64_t t, int procs, int coord) {
  return ((local / t) * procs + coord) * t + local % t;
}

template <typename Fn>
cudaError_t Dispatch(Dtype dt, Fn&& fn) {
  switch (dt) {
    case Dtype::kF32:
      fn(float{});
      break;
    case Dtype::kF64:
      fn(double{});
      break;
    case Dtype::kC64:
      fn(Cplx<float>{});
      break;
    case Dtype::kC128:
      fn(Cplx<double>{});
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace jaxmg::cuda::device
