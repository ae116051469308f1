// Device helpers shared by the two-stage eigensolver's kernels (band_*.cu): arithmetic on the
// element types, cache-bypassing loads and stores, the chase's block shape, where it keeps its
// reflectors, and block reductions.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/element.cuh"

namespace jaxmg::cuda::band_device {

using device::Blocks;
using device::Cplx;
using device::CyclicGlobal;
using device::Dispatch;
using device::kThreads;
using device::Traits;

// Arithmetic on the element types.
__device__ inline float Mul(float a, float b) { return a * b; }
__device__ inline double Mul(double a, double b) { return a * b; }
template <typename R>
__device__ inline Cplx<R> Mul(Cplx<R> a, Cplx<R> b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
__device__ inline float Add(float a, float b) { return a + b; }
__device__ inline double Add(double a, double b) { return a + b; }
template <typename R>
__device__ inline Cplx<R> Add(Cplx<R> a, Cplx<R> b) {
  return {a.re + b.re, a.im + b.im};
}
__device__ inline float Sub(float a, float b) { return a - b; }
__device__ inline double Sub(double a, double b) { return a - b; }
template <typename R>
__device__ inline Cplx<R> Sub(Cplx<R> a, Cplx<R> b) {
  return {a.re - b.re, a.im - b.im};
}
__device__ inline double Im(float) { return 0.0; }
__device__ inline double Im(double) { return 0.0; }
template <typename R>
__device__ inline double Im(Cplx<R> a) {
  return a.im;
}
__device__ inline double AbsSq(float a) { return double(a) * a; }
__device__ inline double AbsSq(double a) { return a * a; }
template <typename R>
__device__ inline double AbsSq(Cplx<R> a) {
  return double(a.re) * a.re + double(a.im) * a.im;
}
template <typename T>
__device__ inline T Make(double re, double im);
template <>
__device__ inline float Make<float>(double re, double) {
  return static_cast<float>(re);
}
template <>
__device__ inline double Make<double>(double re, double) {
  return re;
}
template <>
__device__ inline Cplx<float> Make<Cplx<float>>(double re, double im) {
  return {static_cast<float>(re), static_cast<float>(im)};
}
template <>
__device__ inline Cplx<double> Make<Cplx<double>>(double re, double im) {
  return {re, im};
}
template <typename T>
__device__ inline T Scaled(T a, double s) {
  return Mul(a, Make<T>(s, 0.0));
}

// Global loads and stores at L2 (the point of coherence between thread blocks): the chase's
// blocks hand parts of the band to one another.
__device__ inline float Load(const float* p) { return __ldcg(p); }
__device__ inline double Load(const double* p) { return __ldcg(p); }
template <typename R>
__device__ inline Cplx<R> Load(const Cplx<R>* p) {
  return {__ldcg(&p->re), __ldcg(&p->im)};
}
__device__ inline void Store(float* p, float v) { __stcg(p, v); }
__device__ inline void Store(double* p, double v) { __stcg(p, v); }
template <typename R>
__device__ inline void Store(Cplx<R>* p, Cplx<R> v) {
  __stcg(&p->re, v.re);
  __stcg(&p->im, v.im);
}

// Where the chase keeps reflector (s, j) (band.h): block row j's sweeps after those of the rows
// above it, each n − 1 − (i − 1) b sweeps long (n − 2 for the first).
__host__ __device__ inline int64_t ChaseOffsetOf(int64_t n, int64_t b, int64_t j) {
  if (j <= 1) return 0;
  const int64_t m = j - 2;
  return (n - 2) + m * (n - 1) - b * m * (m + 1) / 2;
}
__device__ inline int64_t ChaseOffset(int64_t n, int64_t b, int64_t j) {
  return ChaseOffsetOf(n, b, j);
}

// Sums and maxima over a block of kWarps warps, the same value in every thread (a fixed order).
template <int kWarps>
__device__ inline double BlockSum(double v, double* red) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  double s = 0.0;
  for (int w = 0; w < kWarps; ++w) s += red[w];
  return s;
}
template <int kWarps>
__device__ inline double BlockMax(double v, double* red) {
  for (int o = 16; o > 0; o /= 2) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  double s = 0.0;
  for (int w = 0; w < kWarps; ++w) s = fmax(s, red[w]);
  return s;
}

}  // namespace jaxmg::cuda::band_device
