// The one trait family for the four element types (float, double, complex<float>,
// complex<double>); engines map `kIndex` to their own type enums.
#pragma once

#include <complex>

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

}  // namespace jaxmg
