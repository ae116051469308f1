#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdint>

#include "cuda/band.h"
#include "cuda/element.cuh"

namespace jaxmg::cuda {
namespace {

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

// The chase's thread blocks: kChase threads, bandwidth at most kMaxBand.
constexpr int kChase = 128;
constexpr int kWarps = kChase / 32;
constexpr int kMaxBand = 64;

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

// Sums and maxima over the block, the same value in every thread (a fixed order).
__device__ inline double BlockSum(double v, double* red) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  double s = 0.0;
  for (int w = 0; w < kWarps; ++w) s += red[w];
  return s;
}
__device__ inline double BlockMax(double v, double* red) {
  for (int o = 16; o > 0; o /= 2) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  double s = 0.0;
  for (int w = 0; w < kWarps; ++w) s = fmax(s, red[w]);
  return s;
}

// The chase's shared memory: the reductions' partial sums, the block a task works on (ld
// kMaxBand + 1), three vectors and τ.
template <typename T>
struct ChaseShared {
  double* red;  // kReduce
  T* s;         // kMaxBand x (kMaxBand + 1)
  T *v, *y, *w;
  T* tau;
  static constexpr int kLd = kMaxBand + 1;
  static constexpr int kReduce = 8;
  static size_t Bytes() {
    return sizeof(double) * kReduce + sizeof(T) * (kMaxBand * kLd + 3 * kMaxBand + 1);
  }
  __device__ static ChaseShared Of(double* base) {
    ChaseShared c;
    c.red = base;
    c.s = reinterpret_cast<T*>(base + kReduce);
    c.v = c.s + kMaxBand * kLd;
    c.y = c.v + kMaxBand;
    c.w = c.y + kMaxBand;
    c.tau = c.w + kMaxBand;
    return c;
  }
};

// x (len entries, shared) := β e₁ and v := the Householder vector (v₀ = 1), *tau := τ, with
// Hᴴ x = β e₁ for H = I − τ v vᴴ and β real (LAPACK's larfg; H = I where x's tail is zero and
// x₀ real). Ends with the block synchronized.
template <typename T>
__device__ void Reflector(T* x, int len, T* v, T* tau, double* red) {
  double amax = 0.0;
  for (int i = 1 + threadIdx.x; i < len; i += kChase) amax = fmax(amax, sqrt(AbsSq(x[i])));
  amax = BlockMax(amax, red);
  double ss = 0.0;
  if (amax > 0.0) {
    for (int i = 1 + threadIdx.x; i < len; i += kChase) ss += AbsSq(x[i]) / (amax * amax);
  }
  ss = BlockSum(ss, red);
  const double xnorm = amax * sqrt(ss);
  const T alpha = x[0];
  const double ar = Traits<T>::Re(alpha), ai = Im(alpha);
  const bool identity = xnorm == 0.0 && ai == 0.0;
  double beta = ar;
  T t = Make<T>(0.0, 0.0), scale = Make<T>(0.0, 0.0);
  if (!identity) {
    beta = -copysign(hypot(hypot(ar, ai), xnorm), ar);
    t = Make<T>((beta - ar) / beta, -ai / beta);
    const double dr = ar - beta, d2 = dr * dr + ai * ai;  // 1 / (α − β)
    scale = Make<T>(dr / d2, -ai / d2);
  }
  __syncthreads();  // every thread has read x₀
  for (int i = 1 + threadIdx.x; i < len; i += kChase) {
    v[i] = identity ? Make<T>(0.0, 0.0) : Mul(x[i], scale);
    x[i] = Make<T>(0.0, 0.0);
  }
  if (threadIdx.x == 0) {
    v[0] = Make<T>(1.0, 0.0);
    *tau = t;
    x[0] = Make<T>(beta, 0.0);
  }
  __syncthreads();
}

// The chase's threads over a block: thread x takes row x mod kMaxBand and every kHalves-th
// column from x / kMaxBand (no division per entry; consecutive threads, consecutive rows).
constexpr int kHalves = kChase / kMaxBand;
static_assert(kChase % kMaxBand == 0, "the chase's threads cover whole rows");
__device__ inline int RowOf() { return threadIdx.x % kMaxBand; }
__device__ inline int HalfOf() { return threadIdx.x / kMaxBand; }

// The Hermitian block C (len x len at band entry (st, st), lower part) := Hᴴ C H for
// H = I − τ v vᴴ: y = C v, w = τ y − ½|τ|² (vᴴ y) v, C −= w vᴴ + v wᴴ (LAPACK's larfy).
template <typename T>
__device__ void TwoSided(T* band, int64_t ld, int64_t st, int len, const ChaseShared<T>& sh) {
  constexpr int kLd = ChaseShared<T>::kLd;
  T* s = sh.s;
  const int i = RowOf(), half = HalfOf();
  if (i < len) {
    for (int j = half; j <= i; j += kHalves) {
      s[i + j * kLd] = Load(band + (st + i) + (st + j) * ld);
    }
  }
  __syncthreads();
  const T tau = *sh.tau;
  if (i < len) {  // y = C v, each row's sum in kHalves parts (y, then w as scratch)
    T acc = Make<T>(0.0, 0.0);
    for (int j = half; j < len; j += kHalves) {
      const T c = j <= i ? s[i + j * kLd] : Traits<T>::Conj(s[j + i * kLd]);
      acc = Add(acc, Mul(c, sh.v[j]));
    }
    (half == 0 ? sh.y : sh.w)[i] = acc;
  }
  __syncthreads();
  if (half == 0 && i < len) sh.y[i] = Add(sh.y[i], sh.w[i]);
  __syncthreads();
  double g = 0.0;
  for (int k = threadIdx.x; k < len; k += kChase) {
    g += Traits<T>::Re(Mul(Traits<T>::Conj(sh.v[k]), sh.y[k]));
  }
  g = BlockSum(g, sh.red);
  const double half_g = 0.5 * AbsSq(tau) * g;
  for (int k = threadIdx.x; k < len; k += kChase) {
    sh.w[k] = Sub(Mul(tau, sh.y[k]), Scaled(sh.v[k], half_g));
  }
  __syncthreads();
  if (i < len) {
    const T wi = sh.w[i], vi = sh.v[i];
    for (int j = half; j <= i; j += kHalves) {
      const T c = Sub(s[i + j * kLd],
                      Add(Mul(wi, Traits<T>::Conj(sh.v[j])), Mul(vi, Traits<T>::Conj(sh.w[j]))));
      Store(band + (st + i) + (st + j) * ld, c);
    }
  }
  __syncthreads();
}

// The block below the diagonal block (rows ed + 1 .. min(ed + b, n − 1), columns st .. ed):
// B := B H (the bulge), then H₂ from B's first column, B's first column := β e₁ and the rest of
// B := H₂ᴴ B; v, τ := H₂'s for the next diagonal block (LAPACK's sb2st kernel of type 2).
template <typename T>
__device__ void Bulge(T* band, int64_t ld, int64_t n, int64_t b, int64_t st, int64_t ed,
                      const ChaseShared<T>& sh) {
  constexpr int kLd = ChaseShared<T>::kLd;
  T* s = sh.s;
  const int64_t j1 = ed + 1, j2 = min(ed + b, n - 1);
  const int lm = static_cast<int>(j2 - j1 + 1), ln = static_cast<int>(ed - st + 1);
  const int p = RowOf(), half = HalfOf();
  if (p < lm) {
    for (int q = half; q < ln; q += kHalves) s[p + q * kLd] = Load(band + (j1 + p) + (st + q) * ld);
  }
  __syncthreads();
  const T tau = *sh.tau;
  if (p < lm) {  // z = τ B v, in kHalves parts
    T acc = Make<T>(0.0, 0.0);
    for (int q = half; q < ln; q += kHalves) acc = Add(acc, Mul(s[p + q * kLd], sh.v[q]));
    (half == 0 ? sh.y : sh.w)[p] = acc;
  }
  __syncthreads();
  if (half == 0 && p < lm) sh.y[p] = Mul(tau, Add(sh.y[p], sh.w[p]));
  __syncthreads();
  if (p < lm) {
    const T yp = sh.y[p];
    for (int q = half; q < ln; q += kHalves) {
      s[p + q * kLd] = Sub(s[p + q * kLd], Mul(yp, Traits<T>::Conj(sh.v[q])));
    }
  }
  __syncthreads();
  Reflector(s, lm, sh.v, sh.tau, sh.red);
  const T tau2 = Traits<T>::Conj(*sh.tau);
  {  // u_q = conj(τ₂) Σ_p conj(v_p) B(p, q) for q >= 1: thread (q, half) sums its rows
    const int q = RowOf();
    if (q >= 1 && q < ln) {
      T acc = Make<T>(0.0, 0.0);
      for (int r = half; r < lm; r += kHalves) {
        acc = Add(acc, Mul(Traits<T>::Conj(sh.v[r]), s[r + q * kLd]));
      }
      (half == 0 ? sh.y : sh.w)[q] = acc;
    }
  }
  __syncthreads();
  {
    const int q = RowOf();
    if (half == 0 && q >= 1 && q < ln) sh.y[q] = Mul(tau2, Add(sh.y[q], sh.w[q]));
  }
  __syncthreads();
  if (p < lm) {
    const T vp = sh.v[p];
    for (int q = half; q < ln; q += kHalves) {
      T c = s[p + q * kLd];
      if (q > 0) c = Sub(c, Mul(vp, sh.y[q]));
      Store(band + (j1 + p) + (st + q) * ld, c);
    }
  }
  __syncthreads();
}

// Task order between sweeps: sweep s's task m starts once sweep s − 1 has finished its task
// m + 2 (progress[s − 1] counts its finished tasks; INT_MAX once the sweep is done).
__device__ inline void WaitFor(const int* progress, int64_t s, int need) {
  if (s > 0 && threadIdx.x == 0) {
    const volatile int* p = progress + s - 1;
    while (*p < need) __nanosleep(64);
  }
  __threadfence();
  __syncthreads();
}
__device__ inline void Publish(int* progress, int64_t s, int done) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) atomicExch(progress + s, done);
}

// Keeps reflector (s, j) (b entries, zero past its length, and τ) where `v2` is not null.
template <typename T>
__device__ void Keep(T* v2, T* tau2, int64_t n, int64_t b, int64_t s, int64_t j, int len,
                     const ChaseShared<T>& sh) {
  if (v2 == nullptr) return;
  const int64_t at = ChaseOffset(n, b, j) + s;
  for (int i = threadIdx.x; i < b; i += kChase) {
    v2[at * b + i] = i < len ? sh.v[i] : Make<T>(0.0, 0.0);
  }
  if (threadIdx.x == 0) tau2[at] = *sh.tau;
}

template <typename T>
__global__ void __launch_bounds__(kChase)
    ChaseKernel(T* band, int64_t n, int64_t b, int* progress, int* next, T* v2, T* tau2) {
  extern __shared__ double chase_shared[];
  const ChaseShared<T> sh = ChaseShared<T>::Of(chase_shared);
  __shared__ int64_t taken;
  const int64_t ld = 2 * b, sweeps = n - 2;
  for (;;) {
    __syncthreads();
    if (threadIdx.x == 0) taken = atomicAdd(next, 1);
    __syncthreads();
    const int64_t s = taken;
    if (s >= sweeps) return;
    for (int64_t j = 1;; ++j) {
      const int64_t st = s + 1 + (j - 1) * b, ed = min(s + j * b, n - 1);
      const int len = static_cast<int>(ed - st + 1);
      const int task = static_cast<int>(2 * j - 1);
      WaitFor(progress, s, task + 2);
      if (j == 1) {
        // Column s below the subdiagonal (rows st .. ed): annihilated by H.
        for (int i = threadIdx.x; i < len; i += kChase) sh.y[i] = Load(band + (st + i) + s * ld);
        __syncthreads();
        Reflector(sh.y, len, sh.v, sh.tau, sh.red);
        for (int i = threadIdx.x; i < len; i += kChase) Store(band + (st + i) + s * ld, sh.y[i]);
        Keep(v2, tau2, n, b, s, 1, len, sh);
        __syncthreads();
      }
      TwoSided(band, ld, st, len, sh);
      Publish(progress, s, task);
      if (ed >= n - 1) break;
      WaitFor(progress, s, task + 3);
      Bulge(band, ld, n, b, st, ed, sh);
      Keep(v2, tau2, n, b, s, j + 1, static_cast<int>(min(ed + b, n - 1) - ed), sh);
      Publish(progress, s, task + 1);
    }
    Publish(progress, s, INT_MAX);
  }
}

// d, e² and, in bounds: the Gershgorin interval (widened as LAPACK's stebz does), the pivot
// limit and whether an entry is not finite. One block.
constexpr int kSetup = 1024;

template <typename T>
__global__ void __launch_bounds__(kSetup)
    TridiagonalKernel(const T* band, int64_t ld, int64_t n, double* d, double* e2, double* bounds) {
  __shared__ double lo_s[kSetup], hi_s[kSetup], e2_s[kSetup], bad_s[kSetup];
  double lo = INFINITY, hi = -INFINITY, e2max = 0.0, bad = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kSetup) {
    const double di = Traits<T>::Re(band[i + i * ld]);
    const double below = i + 1 < n ? sqrt(AbsSq(band[(i + 1) + i * ld])) : 0.0;
    const double above = i > 0 ? sqrt(AbsSq(band[i + (i - 1) * ld])) : 0.0;
    d[i] = di;
    if (i + 1 < n) e2[i] = below * below;
    lo = fmin(lo, di - below - above);
    hi = fmax(hi, di + below + above);
    e2max = fmax(e2max, below * below);
    if (!isfinite(di) || !isfinite(below)) bad = 1.0;
  }
  lo_s[threadIdx.x] = lo;
  hi_s[threadIdx.x] = hi;
  e2_s[threadIdx.x] = e2max;
  bad_s[threadIdx.x] = bad;
  __syncthreads();
  for (int h = kSetup / 2; h > 0; h /= 2) {
    if (threadIdx.x < h) {
      lo_s[threadIdx.x] = fmin(lo_s[threadIdx.x], lo_s[threadIdx.x + h]);
      hi_s[threadIdx.x] = fmax(hi_s[threadIdx.x], hi_s[threadIdx.x + h]);
      e2_s[threadIdx.x] = fmax(e2_s[threadIdx.x], e2_s[threadIdx.x + h]);
      bad_s[threadIdx.x] = fmax(bad_s[threadIdx.x], bad_s[threadIdx.x + h]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const double pivmin = DBL_MIN * fmax(1.0, e2_s[0]);
    const double tnorm = fmax(fabs(lo_s[0]), fabs(hi_s[0]));
    const double widen = 2.1 * tnorm * DBL_EPSILON * static_cast<double>(n) + 4.2 * pivmin;
    bounds[0] = lo_s[0] - widen;
    bounds[1] = hi_s[0] + widen;
    bounds[2] = pivmin;
    bounds[3] = bad_s[0];
  }
}

// The number of eigenvalues below x (the signs of the LDLᵀ pivots of T − x I).
__device__ inline int64_t SturmCount(const double* d, const double* e2, int64_t n, double x,
                                     double pivmin) {
  double q = __ldg(d) - x;
  if (fabs(q) < pivmin) q = -pivmin;
  int64_t count = q < 0.0;
  for (int64_t i = 1; i < n; ++i) {
    q = __ldg(d + i) - x - __ldg(e2 + i - 1) / q;
    if (fabs(q) < pivmin) q = -pivmin;
    count += q < 0.0;
  }
  return count;
}

template <typename R>
__global__ void BisectKernel(const double* d, const double* e2, int64_t n, const double* bounds,
                             R* w) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k >= n) return;
  if (bounds[3] != 0.0) {
    w[k] = static_cast<R>(NAN);
    return;
  }
  double lo = bounds[0], hi = bounds[1];
  const double pivmin = bounds[2], atol = DBL_EPSILON * fmax(fabs(lo), fabs(hi));
  for (int it = 0; it < 256; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (hi - lo <= fmax(atol, 2.0 * DBL_EPSILON * fmax(fabs(lo), fabs(hi))) || mid <= lo ||
        mid >= hi) {
      break;
    }
    if (SturmCount(d, e2, n, mid, pivmin) > k) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  w[k] = static_cast<R>(0.5 * (lo + hi));
}

template <typename T>
__global__ void BandFromColumnsKernel(const T* a, int64_t lda, int64_t row0, int64_t c0,
                                      int64_t cols, int64_t n, int64_t b, T* band) {
  const int64_t total = (b + 1) * cols;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx % (b + 1), c = idx / (b + 1);
    const int64_t j = c0 + c, i = j + r;
    if (i < n) band[i + 2 * b * j] = a[(i - row0) + c * lda];
  }
}

template <typename T>
__global__ void CyclicRowsKernel(bool to_global, T* local, int64_t ldl, int64_t count, int64_t cols,
                                 int64_t first, int64_t t, int procs, int me, int64_t offset,
                                 T* global, int64_t ldg, int64_t shift) {
  const int64_t total = count * cols;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx % count, c = idx / count;
    const int64_t g = CyclicGlobal(first + i, t, procs, me) - offset;
    if (to_global) {
      global[g + c * ldg] = local[i + c * ldl];
    } else {
      local[i + c * ldl] = global[g + ((c + shift) % cols) * ldg];
    }
  }
}

// The tridiagonal matrix for Stedc: d, e = |subdiagonal| and the phases p with
// T = P T_real Pᴴ (p₀ = 1, p_{i+1} = p_i e_i / |e_i|: signs for real types).
// One thread: the phases are a running product.
template <typename T>
__global__ void TridiagonalOfKernel(const T* band, int64_t ld, int64_t n,
                                    typename Traits<T>::Real* d, typename Traits<T>::Real* e,
                                    T* phase) {
  using R = typename Traits<T>::Real;
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  T p = Make<T>(1.0, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    d[i] = Traits<T>::Re(band[i + i * ld]);
    phase[i] = p;
    if (i + 1 == n) break;
    const T sub = band[(i + 1) + i * ld];
    const double mag = sqrt(AbsSq(sub));
    e[i] = static_cast<R>(mag);
    if (mag > 0.0) p = Mul(p, Scaled(sub, 1.0 / mag));
  }
  e[n - 1] = R(0);
}

// z (complex, ld ldz) := diag(phase) q (q real, ld ldq), rows x cols; for real types z := q
// (only where z and q differ).
template <typename T>
__global__ void PhaseRowsKernel(const typename Traits<T>::Real* q, int64_t ldq, const T* phase,
                                int64_t rows, int64_t cols, T* z, int64_t ldz) {
  const int64_t total = rows * cols;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx % rows, c = idx / rows;
    z[r + c * ldz] = Scaled(phase[r], static_cast<double>(q[r + c * ldq]));
  }
}

// Wave blocks of the chase's reflectors (band.h ChaseWave): block i of the wave is group g0 + i
// (sweeps (g0 + i) ℓ .. + ℓ) at block row j0 + 2i; its vectors go to vb[i] (h x ℓ, column q
// = sweep (g0 + i) ℓ + q at rows q .. q + b), its τ to taub[i].
template <typename T>
__global__ void WaveBlocksKernel(const T* v2, const T* tau2, int64_t n, int64_t b, int64_t ell,
                                 int64_t g0, int64_t j0, int64_t count, T* vb, T* taub) {
  const int64_t h = b + ell - 1, per = h * ell;
  const int64_t total = count * per;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx / per, r = idx % per % h, q = idx % per / h;
    const int64_t g = g0 + i, j = j0 + 2 * i, s = g * ell + q;
    const int64_t sweeps = min(n - 2, n - 1 - (j - 1) * b);
    const T tau = s < sweeps ? tau2[ChaseOffset(n, b, j) + s] : Make<T>(0.0, 0.0);
    // H = I where τ = 0: its column stays zero (T's diagonal is 1 there).
    const bool there = Traits<T>::Re(tau) != 0 || Im(tau) != 0.0;
    T x = Make<T>(0.0, 0.0);
    if (there && r >= q && r < q + b) x = v2[(ChaseOffset(n, b, j) + s) * b + (r - q)];
    vb[idx] = x;
    if (r == 0) taub[i * ell + q] = tau;
  }
}

// t[i] (ℓ x ℓ, upper) := S⁻¹ for S = striu(s[i]) + diag(1/τ) (1 where τ = 0): the compact WY
// factor of each wave block (s[i] holds VᴴV). One thread block per matrix, one thread per
// column of the inverse (back substitution in shared memory).
template <typename T>
__global__ void WaveFactorsKernel(const T* s, const T* taub, int64_t ell, T* t) {
  extern __shared__ double wave_shared[];
  T* m = reinterpret_cast<T*>(wave_shared);  // ℓ x ℓ
  const int64_t i = blockIdx.x;
  const T* si = s + i * ell * ell;
  for (int64_t idx = threadIdx.x; idx < ell * ell; idx += blockDim.x) {
    const int64_t r = idx % ell, c = idx / ell;
    const T tau = taub[i * ell + c];
    const bool identity = Traits<T>::Re(tau) == 0 && Im(tau) == 0.0;
    T x = Make<T>(0.0, 0.0);
    if (r < c) x = si[idx];
    if (r == c) {
      const double tr = Traits<T>::Re(tau), ti = Im(tau), t2 = tr * tr + ti * ti;
      x = identity ? Make<T>(1.0, 0.0) : Make<T>(tr / t2, -ti / t2);
    }
    m[idx] = x;
  }
  __syncthreads();
  T* ti = t + i * ell * ell;
  for (int64_t c = threadIdx.x; c < ell; c += blockDim.x) {
    // Column c of M⁻¹: x_r for r = c down to 0; zero below the diagonal.
    for (int64_t r = ell - 1; r > c; --r) ti[r + c * ell] = Make<T>(0.0, 0.0);
    const T one = Make<T>(1.0, 0.0);
    for (int64_t r = c; r >= 0; --r) {
      T acc = r == c ? one : Make<T>(0.0, 0.0);
      for (int64_t k = r + 1; k <= c; ++k) acc = Sub(acc, Mul(m[r + k * ell], ti[k + c * ell]));
      const T dr = m[r + r * ell];
      const double a = Traits<T>::Re(dr), bi = Im(dr), den = a * a + bi * bi;
      ti[r + c * ell] = Mul(acc, Make<T>(a / den, -bi / den));
    }
  }
}

}  // namespace

cudaError_t BandFromColumns(Dtype dt, const void* a, int64_t lda, int64_t row0, int64_t c0,
                            int64_t cols, int64_t n, int64_t b, void* band, cudaStream_t stream) {
  if (cols <= 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    BandFromColumnsKernel<T><<<Blocks((b + 1) * cols), kThreads, 0, stream>>>(
        static_cast<const T*>(a), lda, row0, c0, cols, n, b, static_cast<T*>(band));
  });
}

cudaError_t BandToTridiagonal(Dtype dt, void* band, int64_t n, int64_t b, int* sync, void* v2,
                              void* tau2, cudaStream_t stream) {
  if (n <= 2 || b <= 1) return cudaSuccess;
  if (b > kMaxBand) return cudaErrorInvalidValue;
  cudaError_t e = cudaMemsetAsync(sync, 0, sizeof(int) * (n + 1), stream);
  if (e != cudaSuccess) return e;
  int device = 0, sms = 0;
  if ((e = cudaGetDevice(&device)) != cudaSuccess) return e;
  if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess) {
    return e;
  }
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const size_t bytes = ChaseShared<T>::Bytes();
    cudaFuncSetAttribute(ChaseKernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(bytes));
    int per_sm = 1;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, ChaseKernel<T>, kChase, bytes);
    const int64_t blocks =
        std::min<int64_t>(n - 2, static_cast<int64_t>(sms) * std::max(per_sm, 1));
    ChaseKernel<T><<<static_cast<int>(blocks), kChase, bytes, stream>>>(
        static_cast<T*>(band), n, b, sync, sync + n, static_cast<T*>(v2), static_cast<T*>(tau2));
  });
}

cudaError_t TridiagonalEigenvalues(Dtype dt, const void* band, int64_t n, int64_t b,
                                   double* scratch, void* w, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  double *d = scratch, *e2 = scratch + n, *bounds = scratch + 2 * n;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    using R = typename Traits<T>::Real;
    TridiagonalKernel<T>
        <<<1, kSetup, 0, stream>>>(static_cast<const T*>(band), 2 * b, n, d, e2, bounds);
    constexpr int kBisect = 128;
    BisectKernel<R><<<static_cast<int>((n + kBisect - 1) / kBisect), kBisect, 0, stream>>>(
        d, e2, n, bounds, static_cast<R*>(w));
  });
}

cudaError_t CyclicRows(Dtype dt, bool to_global, void* local, int64_t ldl, int64_t count,
                       int64_t cols, int64_t first, int64_t t, int procs, int me, int64_t offset,
                       void* global, int64_t ldg, int64_t shift, cudaStream_t stream) {
  if (count <= 0 || cols <= 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    CyclicRowsKernel<T><<<Blocks(count * cols), kThreads, 0, stream>>>(
        to_global, static_cast<T*>(local), ldl, count, cols, first, t, procs, me, offset,
        static_cast<T*>(global), ldg, shift);
  });
}

int64_t ChaseSweeps(int64_t n, int64_t b, int64_t j) {
  return std::max<int64_t>(0, std::min(n - 2, n - 1 - (j - 1) * b));
}

int64_t ChaseReflectors(int64_t n, int64_t b) {
  return n <= 2 ? 0 : ChaseOffsetOf(n, b, (n - 2) / b + 2);
}

cudaError_t TridiagonalOf(Dtype dt, const void* band, int64_t n, int64_t b, void* d, void* e,
                          void* phase, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    using R = typename Traits<T>::Real;
    TridiagonalOfKernel<T><<<1, 1, 0, stream>>>(static_cast<const T*>(band), 2 * b, n,
                                                static_cast<R*>(d), static_cast<R*>(e),
                                                static_cast<T*>(phase));
  });
}

cudaError_t PhaseRows(Dtype dt, const void* q, int64_t ldq, const void* phase, int64_t rows,
                      int64_t cols, void* z, int64_t ldz, cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    using R = typename Traits<T>::Real;
    PhaseRowsKernel<T><<<Blocks(rows * cols), kThreads, 0, stream>>>(
        static_cast<const R*>(q), ldq, static_cast<const T*>(phase), rows, cols, static_cast<T*>(z),
        ldz);
  });
}

cudaError_t WaveBlocks(Dtype dt, const void* v2, const void* tau2, int64_t n, int64_t b,
                       int64_t ell, int64_t g0, int64_t j0, int64_t count, void* vb, void* taub,
                       cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    WaveBlocksKernel<T><<<Blocks(count * (b + ell - 1) * ell), kThreads, 0, stream>>>(
        static_cast<const T*>(v2), static_cast<const T*>(tau2), n, b, ell, g0, j0, count,
        static_cast<T*>(vb), static_cast<T*>(taub));
  });
}

cudaError_t WaveFactors(Dtype dt, const void* s, const void* taub, int64_t ell, int64_t count,
                        void* t, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const size_t bytes = sizeof(T) * ell * ell;
    cudaFuncSetAttribute(WaveFactorsKernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(bytes));
    WaveFactorsKernel<T><<<static_cast<int>(count), 64, bytes, stream>>>(
        static_cast<const T*>(s), static_cast<const T*>(taub), ell, static_cast<T*>(t));
  });
}

}  // namespace jaxmg::cuda
