// The one trait family for the four element types (float, double, complex<float>,
// complex<double>); engines map `kIndex` to their own type enums.
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace jaxmg {

template <typename T>
struct Scalar;
template <>
struct Scalar<float> {
  using Real = float;
  static constexpr int kIndex = 0, kParts = 1;
};
template <>
struct Scalar<double> {
  using Real = double;
  static constexpr int kIndex = 1, kParts = 1;
};
template <>
struct Scalar<std::complex<float>> {
  using Real = float;
  static constexpr int kIndex = 2, kParts = 2;
};
template <>
struct Scalar<std::complex<double>> {
  using Real = double;
  static constexpr int kIndex = 3, kParts = 2;
};

template <typename T>
using RealOf = typename Scalar<T>::Real;

inline float Conj(float v) { return v; }
inline double Conj(double v) { return v; }
template <typename R>
std::complex<R> Conj(std::complex<R> v) {
  return std::conj(v);
}

// The argument (phase angle) of a nonzero value: 0 or π for reals.
inline double Arg(float v) { return v < 0 ? M_PI : 0.0; }
inline double Arg(double v) { return v < 0 ? M_PI : 0.0; }
template <typename R>
double Arg(std::complex<R> v) {
  return std::arg(std::complex<double>(v));
}

// The sign (phase) of a determinant from the sum of its factors' arguments and the parity of
// its permutations: NaN when a factor is not finite, 0 when one is zero.
template <typename T>
T SignOf(double arg_sum, int parity, bool zero, bool nonfinite) {
  using R = RealOf<T>;
  if (nonfinite) return T(std::numeric_limits<R>::quiet_NaN());
  if (zero) return T(0);
  const double angle = arg_sum + (parity % 2 ? M_PI : 0.0);
  if constexpr (std::is_same_v<T, R>) {
    const int64_t half_turns = std::llround(angle / M_PI);
    return half_turns % 2 ? T(-1) : T(1);
  } else {
    return T(static_cast<R>(std::cos(angle)), static_cast<R>(std::sin(angle)));
  }
}

// Whether slogdet's result is NaN rather than NumPy's (0, -inf) or a number: a non-finite entry
// of the input, or of the LU factor when no pivot was exactly zero. After an exactly zero pivot
// of a finite input the determinant is exactly 0, whatever the factorization left in the columns
// after it (cuSOLVERMp's Getrf may go on through the zero pivot and fill them with Inf or NaN;
// ScaLAPACK's stops scaling there).
inline bool SlogdetNonFinite(bool input_nonfinite, bool factor_nonfinite, bool zero_pivot) {
  return input_nonfinite || (factor_nonfinite && !zero_pivot);
}

// M(T) for each of the four element types (explicit instantiations).
#define JAXMG_FOR_EACH_SCALAR(M) \
  M(float)                       \
  M(double)                      \
  M(std::complex<float>)         \
  M(std::complex<double>)

}  // namespace jaxmg
