// The symmetry (Hermitian) check of the symmetric routines, computed by the engines on the shards
// after the call agreement (no collective of XLA's, so a missing process is a bounded wait):
// with probe vectors u, v whose entries are a fixed function of their global index, every process
// forms its rows' parts of A v and A u from its shard; after a sum over the processes each holds
// the whole of both and compares uᴴ (A v) with conj(vᴴ (A u)). For a Hermitian A they agree to
// about n eps |u| |A v|; a matrix that holds one triangle, or any asymmetry above rounding, makes
// them differ by O(|u| |A| |v|).
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>

#include "common/scalar.h"

namespace jaxmg::symmetry {

// A uniform value in [-1, 1) from (stream, index) (splitmix64).
inline double Uniform(uint64_t stream, int64_t index) {
  uint64_t z =
      static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull + stream * 0xD1B54A32D192ED03ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
}

// Entry `index` of probe vector `which` (0: u, 1: v).
template <typename T>
T Probe(int which, int64_t index) {
  const double re = Uniform(2 * which + 1, index);
  if constexpr (Scalar<T>::kParts == 2) {
    return T(static_cast<RealOf<T>>(re), static_cast<RealOf<T>>(Uniform(2 * which + 2, index)));
  } else {
    return static_cast<T>(re);
  }
}

// y = [A v, A u] (2n entries, summed over the processes): whether A is not Hermitian.
template <typename T>
bool Differs(const T* y, int64_t n) {
  using C = std::complex<double>;
  C uav = 0, vau = 0;
  double uu = 0, vv = 0, avav = 0, auau = 0;
  for (int64_t i = 0; i < n; ++i) {
    const C u(Probe<T>(0, i)), v(Probe<T>(1, i)), av(y[i]), au(y[n + i]);
    uav += std::conj(u) * av;
    vau += std::conj(v) * au;
    uu += std::norm(u);
    vv += std::norm(v);
    avav += std::norm(av);
    auau += std::norm(au);
  }
  const double gap = std::abs(uav - std::conj(vau));
  const double scale = std::sqrt(uu * avav) + std::sqrt(vv * auau);
  const double eps = std::numeric_limits<RealOf<T>>::epsilon();
  // NaN or Inf input is not flagged here: the factorization reports it (status > 0).
  return gap > 32.0 * static_cast<double>(n) * eps * scale;
}

}  // namespace jaxmg::symmetry
