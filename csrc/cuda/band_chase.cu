// Device kernels of the two-stage eigensolver (cuda/band.h): the bulge chase, the band to a
// tridiagonal matrix by Householder reflectors over sweeps that run concurrently.
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdint>

#include "cuda/band.h"
#include "cuda/band_device.cuh"
#include "cuda/element.cuh"

namespace jaxmg::cuda {
namespace {

using device::Blocks;
using device::Cplx;
using device::CyclicGlobal;
using device::Dispatch;
using device::Traits;
using namespace band_device;  // NOLINT(build/namespaces)

// The chase's thread blocks for bands up to kBand wide: two threads per row of a task's block
// (kHalves), so kThreads = 2 kBand.
template <int kBand_>
struct ChaseGeometry {
  static constexpr int kBand = kBand_;
  static constexpr int kHalves = 2;
  static constexpr int kThreads = kHalves * kBand;
  static constexpr int kWarps = kThreads / 32;
  static_assert(kThreads % 32 == 0, "the chase's threads fill whole warps");
};

// The chase's shared memory: the reductions' partial sums, the block a task works on (ld
// G::kBand + 1), three vectors and τ.
template <typename T, class G>
struct ChaseShared {
  double* red;  // kReduce
  T* s;         // kBand x (kBand + 1)
  T *v, *y, *w;
  T* tau;
  static constexpr int kBand = G::kBand;
  static constexpr int kLd = kBand + 1;
  static constexpr int kReduce = G::kWarps;
  static size_t Bytes() {
    return sizeof(double) * kReduce + sizeof(T) * (kBand * kLd + 3 * kBand + 1);
  }
  __device__ static ChaseShared Of(double* base) {
    ChaseShared c;
    c.red = base;
    c.s = reinterpret_cast<T*>(base + kReduce);
    c.v = c.s + kBand * kLd;
    c.y = c.v + kBand;
    c.w = c.y + kBand;
    c.tau = c.w + kBand;
    return c;
  }
};

// x (len entries, shared) := β e₁ and v := the Householder vector (v₀ = 1), *tau := τ, with
// Hᴴ x = β e₁ for H = I − τ v vᴴ and β real (LAPACK's larfg; H = I where x's tail is zero and
// x₀ real). Ends with the block synchronized.
template <class G, typename T>
__device__ void Reflector(T* x, int len, T* v, T* tau, double* red) {
  constexpr int kChase = G::kThreads;
  double amax = 0.0;
  for (int i = 1 + threadIdx.x; i < len; i += kChase) amax = fmax(amax, sqrt(AbsSq(x[i])));
  amax = BlockMax<G::kWarps>(amax, red);
  double ss = 0.0;
  if (amax > 0.0) {
    for (int i = 1 + threadIdx.x; i < len; i += kChase) ss += AbsSq(x[i]) / (amax * amax);
  }
  ss = BlockSum<G::kWarps>(ss, red);
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

// The chase's threads over a block: thread x takes row x mod kBand and every G::kHalves-th
// column from x / kBand (no division per entry; consecutive threads, consecutive rows).
template <class G>
__device__ inline int RowOf() {
  return threadIdx.x % G::kBand;
}
template <class G>
__device__ inline int HalfOf() {
  return threadIdx.x / G::kBand;
}

// The Hermitian block C (len x len at band entry (st, st), lower part) := Hᴴ C H for
// H = I − τ v vᴴ: y = C v, w = τ y − ½|τ|² (vᴴ y) v, C −= w vᴴ + v wᴴ (LAPACK's larfy).
template <class G, typename T>
__device__ void TwoSided(T* band, int64_t ld, int64_t st, int len, const ChaseShared<T, G>& sh) {
  constexpr int kLd = ChaseShared<T, G>::kLd;
  T* s = sh.s;
  const int i = RowOf<G>(), half = HalfOf<G>();
  if (i < len) {
    for (int j = half; j <= i; j += G::kHalves) {
      s[i + j * kLd] = Load(band + (st + i) + (st + j) * ld);
    }
  }
  __syncthreads();
  const T tau = *sh.tau;
  if (i < len) {  // y = C v, each row's sum in G::kHalves parts (y, then w as scratch)
    T acc = Make<T>(0.0, 0.0);
    for (int j = half; j < len; j += G::kHalves) {
      const T c = j <= i ? s[i + j * kLd] : Traits<T>::Conj(s[j + i * kLd]);
      acc = Add(acc, Mul(c, sh.v[j]));
    }
    (half == 0 ? sh.y : sh.w)[i] = acc;
  }
  __syncthreads();
  if (half == 0 && i < len) sh.y[i] = Add(sh.y[i], sh.w[i]);
  __syncthreads();
  double g = 0.0;
  for (int k = threadIdx.x; k < len; k += G::kThreads) {
    g += Traits<T>::Re(Mul(Traits<T>::Conj(sh.v[k]), sh.y[k]));
  }
  g = BlockSum<G::kWarps>(g, sh.red);
  const double half_g = 0.5 * AbsSq(tau) * g;
  for (int k = threadIdx.x; k < len; k += G::kThreads) {
    sh.w[k] = Sub(Mul(tau, sh.y[k]), Scaled(sh.v[k], half_g));
  }
  __syncthreads();
  if (i < len) {
    const T wi = sh.w[i], vi = sh.v[i];
    for (int j = half; j <= i; j += G::kHalves) {
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
template <class G, typename T>
__device__ void Bulge(T* band, int64_t ld, int64_t n, int64_t b, int64_t st, int64_t ed,
                      const ChaseShared<T, G>& sh) {
  constexpr int kLd = ChaseShared<T, G>::kLd;
  T* s = sh.s;
  const int64_t j1 = ed + 1, j2 = min(ed + b, n - 1);
  const int lm = static_cast<int>(j2 - j1 + 1), ln = static_cast<int>(ed - st + 1);
  const int p = RowOf<G>(), half = HalfOf<G>();
  if (p < lm) {
    for (int q = half; q < ln; q += G::kHalves)
      s[p + q * kLd] = Load(band + (j1 + p) + (st + q) * ld);
  }
  __syncthreads();
  const T tau = *sh.tau;
  if (p < lm) {  // z = τ B v, in G::kHalves parts
    T acc = Make<T>(0.0, 0.0);
    for (int q = half; q < ln; q += G::kHalves) acc = Add(acc, Mul(s[p + q * kLd], sh.v[q]));
    (half == 0 ? sh.y : sh.w)[p] = acc;
  }
  __syncthreads();
  if (half == 0 && p < lm) sh.y[p] = Mul(tau, Add(sh.y[p], sh.w[p]));
  __syncthreads();
  if (p < lm) {
    const T yp = sh.y[p];
    for (int q = half; q < ln; q += G::kHalves) {
      s[p + q * kLd] = Sub(s[p + q * kLd], Mul(yp, Traits<T>::Conj(sh.v[q])));
    }
  }
  __syncthreads();
  Reflector<G>(s, lm, sh.v, sh.tau, sh.red);
  const T tau2 = Traits<T>::Conj(*sh.tau);
  {  // u_q = conj(τ₂) Σ_p conj(v_p) B(p, q) for q >= 1: thread (q, half) sums its rows
    const int q = RowOf<G>();
    if (q >= 1 && q < ln) {
      T acc = Make<T>(0.0, 0.0);
      for (int r = half; r < lm; r += G::kHalves) {
        acc = Add(acc, Mul(Traits<T>::Conj(sh.v[r]), s[r + q * kLd]));
      }
      (half == 0 ? sh.y : sh.w)[q] = acc;
    }
  }
  __syncthreads();
  {
    const int q = RowOf<G>();
    if (half == 0 && q >= 1 && q < ln) sh.y[q] = Mul(tau2, Add(sh.y[q], sh.w[q]));
  }
  __syncthreads();
  if (p < lm) {
    const T vp = sh.v[p];
    for (int q = half; q < ln; q += G::kHalves) {
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
template <class G, typename T>
__device__ void Keep(T* v2, T* tau2, int64_t n, int64_t b, int64_t s, int64_t j, int len,
                     const ChaseShared<T, G>& sh) {
  if (v2 == nullptr) return;
  const int64_t at = ChaseOffset(n, b, j) + s;
  for (int i = threadIdx.x; i < b; i += G::kThreads) {
    v2[at * b + i] = i < len ? sh.v[i] : Make<T>(0.0, 0.0);
  }
  if (threadIdx.x == 0) tau2[at] = *sh.tau;
}

template <typename T, class G>
__global__ void __launch_bounds__(G::kThreads)
    ChaseKernel(T* band, int64_t n, int64_t b, int* progress, int* next, T* v2, T* tau2) {
  extern __shared__ double chase_shared[];
  const ChaseShared<T, G> sh = ChaseShared<T, G>::Of(chase_shared);
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
        for (int i = threadIdx.x; i < len; i += G::kThreads)
          sh.y[i] = Load(band + (st + i) + s * ld);
        __syncthreads();
        Reflector<G>(sh.y, len, sh.v, sh.tau, sh.red);
        for (int i = threadIdx.x; i < len; i += G::kThreads)
          Store(band + (st + i) + s * ld, sh.y[i]);
        Keep<G>(v2, tau2, n, b, s, 1, len, sh);
        __syncthreads();
      }
      TwoSided<G>(band, ld, st, len, sh);
      Publish(progress, s, task);
      if (ed >= n - 1) break;
      WaitFor(progress, s, task + 3);
      Bulge<G>(band, ld, n, b, st, ed, sh);
      Keep<G>(v2, tau2, n, b, s, j + 1, static_cast<int>(min(ed + b, n - 1) - ed), sh);
      Publish(progress, s, task + 1);
    }
    Publish(progress, s, INT_MAX);
  }
}

}  // namespace

cudaError_t BandToTridiagonal(Dtype dt, void* band, int64_t n, int64_t b, int* sync, void* v2,
                              void* tau2, cudaStream_t stream) {
  if (n <= 2 || b <= 1) return cudaSuccess;
  if (b > MaxChaseBand(dt)) return cudaErrorInvalidValue;
  cudaError_t e = cudaMemsetAsync(sync, 0, sizeof(int) * (n + 1), stream);
  if (e != cudaSuccess) return e;
  int device = 0, sms = 0;
  if ((e = cudaGetDevice(&device)) != cudaSuccess) return e;
  if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess) {
    return e;
  }
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    // The narrowest geometry that holds the band: b <= 64 keeps the smaller block (more of them
    // per multiprocessor); wider bands (real types and complex64 only) take 128.
    auto launch = [&](auto geometry) {
      using G = decltype(geometry);
      const size_t bytes = ChaseShared<T, G>::Bytes();
      cudaFuncSetAttribute(ChaseKernel<T, G>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes));
      int per_sm = 1;
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, ChaseKernel<T, G>, G::kThreads, bytes);
      const int64_t blocks =
          std::min<int64_t>(n - 2, static_cast<int64_t>(sms) * std::max(per_sm, 1));
      ChaseKernel<T, G><<<static_cast<int>(blocks), G::kThreads, bytes, stream>>>(
          static_cast<T*>(band), n, b, sync, sync + n, static_cast<T*>(v2), static_cast<T*>(tau2));
    };
    if (b <= 64) {
      launch(ChaseGeometry<64>{});
    } else if constexpr (sizeof(T) <= 8) {
      launch(ChaseGeometry<128>{});
    }
  });
}

int MaxChaseBand(Dtype dt) { return dt == Dtype::kC128 ? 64 : 128; }

}  // namespace jaxmg::cuda
