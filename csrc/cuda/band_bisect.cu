// Device kernels of the two-stage eigensolver (cuda/band.h): the tridiagonal matrix's
// eigenvalues by bisection (Sturm counts), after a setup of its bounds.
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

}  // namespace

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

}  // namespace jaxmg::cuda
