// Device kernels of the two-stage eigensolver (cuda/band.h): the moves of the band reduction
// (band from columns, cyclic rows), the tridiagonal matrix for the vectors' solve, its phases, and
// the chase's reflectors as wave blocks with their compact WY factors.
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
using device::kThreads;
using device::Traits;
using namespace band_device;  // NOLINT(build/namespaces)

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
// (sweeps (g0 + i) ℓ .. + ℓ) at block row j0 + 2i; its vectors go to vb[i] (ldv x ℓ, column q
// = sweep (g0 + i) ℓ + q at rows q .. q + b, zero elsewhere), its τ to taub[i].
template <typename T>
__global__ void WaveBlocksKernel(const T* v2, const T* tau2, int64_t n, int64_t b, int64_t ell,
                                 int64_t g0, int64_t j0, int64_t count, int64_t ldv, T* vb,
                                 T* taub) {
  const int64_t per = ldv * ell;
  const int64_t total = count * per;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx / per, r = idx % per % ldv, q = idx % per / ldv;
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
                       int64_t ell, int64_t g0, int64_t j0, int64_t count, int64_t ldv, void* vb,
                       void* taub, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  if (ldv < b + ell - 1) return cudaErrorInvalidValue;
  return Dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    WaveBlocksKernel<T><<<Blocks(count * ldv * ell), kThreads, 0, stream>>>(
        static_cast<const T*>(v2), static_cast<const T*>(tau2), n, b, ell, g0, j0, count, ldv,
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
