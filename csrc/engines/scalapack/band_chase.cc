// The CPU backend's steps of the two-stage eigensolver's chase, tridiagonal solve and Q₂
// (algorithms/band_chase.h, band_eigh.h): host loops where the GPU has kernels (the bulge chase,
// the tridiagonal matrix and its phases, the wave blocks and their compact WY factors), LAPACK's
// ?sterf for eigenvalues alone and ?stemr for a subset's pairs, ScaLAPACK's p?stedc and p?tran
// on the grid.
#include "algorithms/band_chase.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "common/deferred.h"
#include "common/scalar.h"
#include "engines/scalapack/backend.h"
#include "engines/scalapack/engine_util.h"

extern "C" {
void ssterf_(const int* n, float* d, float* e, int* info);
void dsterf_(const int* n, double* d, double* e, int* info);
void psstedc_(const char* compz, const int* n, float* d, float* e, float* q, const int* iq,
              const int* jq, const int* descq, float* work, const int* lwork, int* iwork,
              const int* liwork, int* info);
void pdstedc_(const char* compz, const int* n, double* d, double* e, double* q, const int* iq,
              const int* jq, const int* descq, double* work, const int* lwork, int* iwork,
              const int* liwork, int* info);
void sstemr_(const char* jobz, const char* range, const int* n, float* d, float* e, const float* vl,
             const float* vu, const int* il, const int* iu, int* m, float* w, float* z,
             const int* ldz, const int* nzc, int* isuppz, int* tryrac, float* work,
             const int* lwork, int* iwork, const int* liwork, int* info);
void dstemr_(const char* jobz, const char* range, const int* n, double* d, double* e,
             const double* vl, const double* vu, const int* il, const int* iu, int* m, double* w,
             double* z, const int* ldz, const int* nzc, int* isuppz, int* tryrac, double* work,
             const int* lwork, int* iwork, const int* liwork, int* info);
}

namespace jaxmg::scalapack {
namespace {

template <typename T>
T Make(double re, double im) {
  if constexpr (Scalar<T>::kParts == 2) {
    return T(static_cast<RealOf<T>>(re), static_cast<RealOf<T>>(im));
  } else {
    return static_cast<T>(re);
  }
}
template <typename T>
double AbsSq(T v) {
  const double re = std::real(v), im = std::imag(v);
  return re * re + im * im;
}

// x (len entries) := β e₁ and v := the Householder vector (v₀ = 1), *tau := τ, with Hᴴ x = β e₁
// for H = I − τ v vᴴ and β real (LAPACK's larfg; H = I where x's tail is zero and x₀ real).
template <typename T>
void Reflector(T* x, int64_t len, T* v, T* tau) {
  double amax = 0.0, ss = 0.0;
  for (int64_t i = 1; i < len; ++i) amax = std::max(amax, std::sqrt(AbsSq(x[i])));
  if (amax > 0.0) {
    for (int64_t i = 1; i < len; ++i) ss += AbsSq(x[i]) / (amax * amax);
  }
  const double xnorm = amax * std::sqrt(ss);
  const double ar = std::real(x[0]), ai = std::imag(x[0]);
  const bool identity = xnorm == 0.0 && ai == 0.0;
  double beta = ar;
  T t(0), scale(0);
  if (!identity) {
    beta = -std::copysign(std::hypot(std::hypot(ar, ai), xnorm), ar);
    t = Make<T>((beta - ar) / beta, -ai / beta);
    const double dr = ar - beta, d2 = dr * dr + ai * ai;  // 1 / (α − β)
    scale = Make<T>(dr / d2, -ai / d2);
  }
  for (int64_t i = 1; i < len; ++i) {
    v[i] = identity ? T(0) : x[i] * scale;
    x[i] = T(0);
  }
  v[0] = T(1);
  *tau = t;
  x[0] = Make<T>(beta, 0.0);
}

// The chase's state: the band (entry (i, j) at band[i + j ld], ld = 2b), the current reflector
// (v, τ) and two vectors of scratch.
template <typename T>
struct Chase {
  T* band;
  int64_t ld, n, b;
  std::vector<T> v, y, w;
  T tau = T(0);
  T& At(int64_t i, int64_t j) { return band[i + j * ld]; }

  // The Hermitian block C (len x len at (st, st), lower part) := Hᴴ C H: y = C v,
  // w = τ y − ½|τ|² (vᴴ y) v, C −= w vᴴ + v wᴴ (LAPACK's larfy).
  void TwoSided(int64_t st, int64_t len) {
    std::fill_n(y.begin(), len, T(0));
    for (int64_t j = 0; j < len; ++j) {
      T* col = &At(st, st + j);
      y[j] += col[j] * v[j];
      T acc(0);
      for (int64_t i = j + 1; i < len; ++i) {
        y[i] += col[i] * v[j];
        acc += Conj(col[i]) * v[i];
      }
      y[j] += acc;
    }
    double g = 0.0;
    for (int64_t k = 0; k < len; ++k) g += std::real(Conj(v[k]) * y[k]);
    const double half_g = 0.5 * AbsSq(tau) * g;
    for (int64_t k = 0; k < len; ++k) w[k] = tau * y[k] - v[k] * static_cast<RealOf<T>>(half_g);
    for (int64_t j = 0; j < len; ++j) {
      T* col = &At(st, st + j);
      const T vj = Conj(v[j]), wj = Conj(w[j]);
      for (int64_t i = j; i < len; ++i) col[i] -= w[i] * vj + v[i] * wj;
    }
  }

  // The block below the diagonal block (rows ed + 1 .. min(ed + b, n − 1), columns st .. ed):
  // B := B H, then H₂ from B's first column, B's first column := β e₁ and the rest of B := H₂ᴴ B;
  // (v, τ) := H₂'s (LAPACK's sb2st kernel of type 2). Returns H₂'s length.
  int64_t Bulge(int64_t st, int64_t ed) {
    const int64_t j1 = ed + 1, j2 = std::min(ed + b, n - 1);
    const int64_t lm = j2 - j1 + 1, ln = ed - st + 1;
    std::fill_n(y.begin(), lm, T(0));
    for (int64_t q = 0; q < ln; ++q) {
      const T* col = &At(j1, st + q);
      for (int64_t p = 0; p < lm; ++p) y[p] += col[p] * v[q];
    }
    for (int64_t p = 0; p < lm; ++p) y[p] *= tau;
    for (int64_t q = 0; q < ln; ++q) {
      T* col = &At(j1, st + q);
      const T vq = Conj(v[q]);
      for (int64_t p = 0; p < lm; ++p) col[p] -= y[p] * vq;
    }
    Reflector(&At(j1, st), lm, v.data(), &tau);
    const T tau2 = Conj(tau);
    for (int64_t q = 1; q < ln; ++q) {
      T* col = &At(j1, st + q);
      T acc(0);
      for (int64_t p = 0; p < lm; ++p) acc += Conj(v[p]) * col[p];
      acc *= tau2;
      for (int64_t p = 0; p < lm; ++p) col[p] -= v[p] * acc;
    }
    return lm;
  }
};

}  // namespace

template <typename T>
Status Backend::ChaseBand(const Lane&, T* band, int64_t n, int64_t b, int*, T* v2, T* tau2) {
  if (n <= 2 || b <= 1) return Status();
  Chase<T> c{band, 2 * b, n, b, {}, {}, {}};
  try {
    c.v.assign(static_cast<size_t>(b + 1), T(0));
    c.y.assign(static_cast<size_t>(b + 1), T(0));
    c.w.assign(static_cast<size_t>(b + 1), T(0));
  } catch (const std::bad_alloc&) {
    return JAXMG_ERROR("could not allocate the bulge chase's vectors");
  }
  // Keeps reflector (s, j) of length len.
  auto keep = [&](int64_t s, int64_t j, int64_t len) {
    if (v2 == nullptr) return;
    const int64_t at = algorithms::ChaseOffset(n, b, j) + s;
    for (int64_t i = 0; i < b; ++i) v2[at * b + i] = i < len ? c.v[i] : T(0);
    tau2[at] = c.tau;
  };
  // The sweeps in order (the GPU runs them concurrently in an order that gives the same result).
  for (int64_t s = 0; s < n - 2; ++s) {
    for (int64_t j = 1;; ++j) {
      const int64_t st = s + 1 + (j - 1) * b, ed = std::min(s + j * b, n - 1);
      const int64_t len = ed - st + 1;
      if (j == 1) {
        // Column s below the subdiagonal (rows st .. ed): annihilated by H.
        Reflector(&c.At(st, s), len, c.v.data(), &c.tau);
        keep(s, 1, len);
      }
      c.TwoSided(st, len);
      if (ed >= n - 1) break;
      keep(s, j + 1, c.Bulge(st, ed));
    }
  }
  return Status();
}

template <typename T>
Status Backend::TridiagonalOf(const Lane&, const T* band, int64_t n, int64_t b, RealOf<T>* d,
                              RealOf<T>* e, T* phase) {
  using R = RealOf<T>;
  const int64_t ld = 2 * b;
  T p(1);
  for (int64_t i = 0; i < n; ++i) {
    d[i] = static_cast<R>(std::real(band[i + i * ld]));
    phase[i] = p;
    if (i + 1 == n) break;
    const T sub = band[(i + 1) + i * ld];
    const double mag = std::sqrt(AbsSq(sub));
    e[i] = static_cast<R>(mag);
    if (mag > 0.0) p = p * (sub / static_cast<R>(mag));
  }
  if (n > 0) e[n - 1] = R(0);
  return Status();
}

template <typename T>
Status Backend::TridiagonalValues(const Lane& lane, const T* band, int64_t n, int64_t b, double*,
                                  RealOf<T>* w) {
  using R = RealOf<T>;
  std::vector<R> e;
  std::vector<T> phase;
  try {
    e.assign(static_cast<size_t>(std::max<int64_t>(n, 1)), R(0));
    phase.assign(static_cast<size_t>(std::max<int64_t>(n, 1)), T(0));
  } catch (const std::bad_alloc&) {
    return JAXMG_ERROR("could not allocate the tridiagonal matrix on process 0");
  }
  JAXMG_RETURN_IF_ERROR(TridiagonalOf(lane, band, n, b, w, e.data(), phase.data()));
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) finite = finite && std::isfinite(w[i]) && std::isfinite(e[i]);
  if (!finite) {  // as the GPU's bisection: NaN everywhere
    std::fill_n(w, n, std::numeric_limits<R>::quiet_NaN());
    return Status();
  }
  int in = 0, info = 0;
  JAXMG_RETURN_IF_ERROR(CheckedInt(n, "the matrix's order", &in));
  if constexpr (std::is_same_v<R, float>) {
    ssterf_(&in, w, e.data(), &info);
  } else {
    dsterf_(&in, w, e.data(), &info);
  }
  if (info < 0) return JAXMG_ERROR("?sterf: argument " + std::to_string(-info) + " is invalid");
  solver_info_ = std::max<int64_t>(solver_info_, info);
  return Status();
}

template <typename T>
Status Backend::PhaseRows(const Lane&, const RealOf<T>* q, int64_t ldq, const T* phase,
                          int64_t rows, int64_t cols, T* z, int64_t ldz) {
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t r = 0; r < rows; ++r) z[r + c * ldz] = phase[r] * q[r + c * ldq];
  }
  return Status();
}

template <typename T>
Status Backend::WaveBlocks(const Lane&, const T* v2, const T* tau2, int64_t n, int64_t b,
                           int64_t ell, int64_t g0, int64_t j0, int64_t count, int64_t ldv, T* vb,
                           T* taub) {
  const int64_t h = ldv;  // b + ℓ − 1 rows, and zeros below
  for (int64_t i = 0; i < count; ++i) {
    const int64_t g = g0 + i, j = j0 + 2 * i;
    const int64_t at = algorithms::ChaseOffset(n, b, j), sweeps = algorithms::ChaseSweeps(n, b, j);
    for (int64_t q = 0; q < ell; ++q) {
      const int64_t s = g * ell + q;
      const T tau = s < sweeps ? tau2[at + s] : T(0);
      T* col = vb + (i * ell + q) * h;
      std::fill_n(col, h, T(0));
      // H = I where τ = 0: its column stays zero (T's diagonal is 1 there).
      if (tau != T(0)) std::copy_n(v2 + (at + s) * b, b, col + q);
      taub[i * ell + q] = tau;
    }
  }
  return Status();
}

template <typename T>
Status Backend::WaveFactors(const Lane&, const T* s, const T* taub, int64_t ell, int64_t count,
                            T* t) {
  // t[i] := M⁻¹ for M = striu(s[i]) + diag(1/τ) (1 where τ = 0), by back substitution.
  for (int64_t i = 0; i < count; ++i) {
    const T* si = s + i * ell * ell;
    T* ti = t + i * ell * ell;
    const T* tau = taub + i * ell;
    auto diag = [&](int64_t r) { return tau[r] == T(0) ? T(1) : T(1) / tau[r]; };
    for (int64_t c = 0; c < ell; ++c) {
      for (int64_t r = ell - 1; r > c; --r) ti[r + c * ell] = T(0);
      for (int64_t r = c; r >= 0; --r) {
        T acc = r == c ? T(1) : T(0);
        for (int64_t k = r + 1; k <= c; ++k) acc -= si[r + k * ell] * ti[k + c * ell];
        ti[r + c * ell] = acc / diag(r);
      }
    }
  }
  return Status();
}

template <typename T>
Status Backend::GemmStrided(const Lane& lane, bool adjoint_a, bool adjoint_b, int64_t m, int64_t n,
                            int64_t k, T alpha, const T* a, int64_t lda, int64_t stride_a,
                            const T* b, int64_t ldb, int64_t stride_b, T beta, T* c, int64_t ldc,
                            int64_t stride_c, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    JAXMG_RETURN_IF_ERROR(Gemm(lane, adjoint_a, adjoint_b, m, n, k, alpha, a + i * stride_a, lda,
                               b + i * stride_b, ldb, beta, c + i * stride_c, ldc));
  }
  return Status();
}

template <typename T>
Status Backend::WaveApply(const Lane& lane, const T* vb, int64_t ldv, const T* t, int64_t b,
                          int64_t ell, int64_t count, T* z, int64_t ldz, int64_t stride,
                          int64_t cols, T* w, int64_t w_count) {
  const int64_t h = b + ell - 1, chunk = std::min(cols, w_count / (2 * ell));
  if (chunk < 1) return JAXMG_ERROR("Q2's wave scratch holds no column");
  T* w2 = w + ell * chunk;
  for (int64_t i = 0; i < count; ++i) {
    const T* v = vb + i * ldv * ell;
    for (int64_t c0 = 0; c0 < cols; c0 += chunk) {
      const int64_t cw = std::min(chunk, cols - c0);
      T* zc = z + i * stride + c0 * ldz;
      JAXMG_RETURN_IF_ERROR(
          Gemm(lane, true, false, ell, cw, h, T(1), v, ldv, zc, ldz, T(0), w, ell));
      JAXMG_RETURN_IF_ERROR(Gemm(lane, false, false, ell, cw, ell, T(1), t + i * ell * ell, ell, w,
                                 ell, T(0), w2, ell));
      JAXMG_RETURN_IF_ERROR(
          Gemm(lane, false, false, h, cw, ell, T(-1), v, ldv, w2, ell, T(1), zc, ldz));
    }
  }
  return Status();
}

template <typename R>
Status Backend::Stedc(int64_t n, int64_t t, R* d, R* e, R* q, int64_t ldq) {
  // The workspace (a query on every rank) and descriptor, agreed before the collective solve.
  Descriptor desc{};
  int in = 0, one = 1, lwork = -1, liwork = -1, info = 0;
  std::vector<R> work;
  std::vector<int> iwork;
  auto call = [&](R* wk, int* iwk) {
    if constexpr (std::is_same_v<R, float>) {
      psstedc_("I", &in, d, e, q, &one, &one, desc.desc, wk, &lwork, iwk, &liwork, &info);
    } else {
      pdstedc_("I", &in, d, e, q, &one, &one, desc.desc, wk, &lwork, iwk, &liwork, &info);
    }
  };
  Deferred local;
  local.Run([&]() -> Status {
    JAXMG_RETURN_IF_ERROR(CheckedInt(n, "the matrix's order", &in));
    JAXMG_RETURN_IF_ERROR(MakeDescriptor(grid_, n, n, t, t, ldq, &desc));
    R size(0);
    int isize = 0;
    call(&size, &isize);
    if (info < 0) return JAXMG_ERROR("p?stedc: argument " + std::to_string(-info) + " is invalid");
    lwork = std::max(1, static_cast<int>(size) + 1), liwork = std::max(1, isize);
    try {
      work.assign(static_cast<size_t>(lwork), R(0));
      iwork.assign(static_cast<size_t>(liwork), 0);
    } catch (const std::bad_alloc&) {
      return JAXMG_ERROR("could not allocate p?stedc's workspace");
    }
    return Status();
  });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure(grid_, "stedc", local.status()));
  call(work.data(), iwork.data());
  if (info < 0) return JAXMG_ERROR("p?stedc: argument " + std::to_string(-info) + " is invalid");
  solver_info_ = std::max<int64_t>(solver_info_, info);
  return Status();
}

template <typename R>
Status Backend::TridiagonalPairs(int64_t n, const R* d, const R* e, int64_t lo, int64_t k, R* w,
                                 R* qk) {
  int in = 0, il = 0, iu = 0, kk = 0, m = 0, info = 0, lwork = -1, liwork = -1;
  JAXMG_RETURN_IF_ERROR(CheckedInt(n, "the matrix's order", &in));
  JAXMG_RETURN_IF_ERROR(CheckedInt(lo + 1, "the first pair", &il));
  JAXMG_RETURN_IF_ERROR(CheckedInt(lo + k, "the last pair", &iu));
  JAXMG_RETURN_IF_ERROR(CheckedInt(k, "the pairs' count", &kk));
  const int ldz = std::max(in, 1);
  const R vl(0), vu(0);
  int tryrac = 1;  // (relative accuracy where the matrix allows it)
  std::vector<R> dd, ee, ww, work;
  std::vector<int> isuppz, iwork;
  try {  // ?stemr overwrites d and e (e: n entries, its last a workspace)
    dd.assign(d, d + n);
    ee.assign(static_cast<size_t>(n), R(0));
    std::copy(e, e + std::max<int64_t>(n - 1, 0), ee.begin());
    ww.assign(static_cast<size_t>(n), R(0));
    isuppz.assign(static_cast<size_t>(2 * std::max<int64_t>(k, 1)), 0);
  } catch (const std::bad_alloc&) {
    return JAXMG_ERROR("could not allocate ?stemr's copies of the tridiagonal matrix");
  }
  auto call = [&](R* wk, int* iwk) {
    if constexpr (std::is_same_v<R, float>) {
      sstemr_("V", "I", &in, dd.data(), ee.data(), &vl, &vu, &il, &iu, &m, ww.data(), qk, &ldz, &kk,
              isuppz.data(), &tryrac, wk, &lwork, iwk, &liwork, &info);
    } else {
      dstemr_("V", "I", &in, dd.data(), ee.data(), &vl, &vu, &il, &iu, &m, ww.data(), qk, &ldz, &kk,
              isuppz.data(), &tryrac, wk, &lwork, iwk, &liwork, &info);
    }
  };
  R size(0);
  int isize = 0;
  call(&size, &isize);  // the workspace query
  if (info < 0) return JAXMG_ERROR("?stemr: argument " + std::to_string(-info) + " is invalid");
  lwork = std::max(1, static_cast<int>(size) + 1), liwork = std::max(1, isize);
  try {
    work.assign(static_cast<size_t>(lwork), R(0));
    iwork.assign(static_cast<size_t>(liwork), 0);
  } catch (const std::bad_alloc&) {
    return JAXMG_ERROR("could not allocate ?stemr's workspace");
  }
  tryrac = 1;  // (the query may have changed it)
  call(work.data(), iwork.data());
  if (info < 0) return JAXMG_ERROR("?stemr: argument " + std::to_string(-info) + " is invalid");
  if (info == 0 && m != k) info = 1;  // (a count it did not find: not converged)
  solver_info_ = std::max<int64_t>(solver_info_, info);
  std::copy(ww.begin(), ww.begin() + k, w);
  return Status();
}

template <typename U>
Status Backend::GridAdjoint(int64_t n, int64_t t, int64_t ld, const U* q, U* y) {
  Descriptor desc{};
  JAXMG_RETURN_IF_ERROR(
      AgreeOnFailure(grid_, "transpose", MakeDescriptor(grid_, n, n, t, t, ld, &desc)));
  return scalapack::Adjoint<U>(n, q, desc, y, desc);
}

#define JAXMG_INSTANTIATE_CHASE(T)                                                                 \
  template Status Backend::ChaseBand<T>(const Lane&, T*, int64_t, int64_t, int*, T*, T*);          \
  template Status Backend::TridiagonalOf<T>(const Lane&, const T*, int64_t, int64_t, RealOf<T>*,   \
                                            RealOf<T>*, T*);                                       \
  template Status Backend::TridiagonalValues<T>(const Lane&, const T*, int64_t, int64_t, double*,  \
                                                RealOf<T>*);                                       \
  template Status Backend::PhaseRows<T>(const Lane&, const RealOf<T>*, int64_t, const T*, int64_t, \
                                        int64_t, T*, int64_t);                                     \
  template Status Backend::WaveBlocks<T>(const Lane&, const T*, const T*, int64_t, int64_t,        \
                                         int64_t, int64_t, int64_t, int64_t, int64_t, T*, T*);     \
  template Status Backend::WaveApply<T>(const Lane&, const T*, int64_t, const T*, int64_t,         \
                                        int64_t, int64_t, T*, int64_t, int64_t, int64_t, T*,       \
                                        int64_t);                                                  \
  template Status Backend::WaveFactors<T>(const Lane&, const T*, const T*, int64_t, int64_t, T*);  \
  template Status Backend::GemmStrided<T>(const Lane&, bool, bool, int64_t, int64_t, int64_t, T,   \
                                          const T*, int64_t, int64_t, const T*, int64_t, int64_t,  \
                                          T, T*, int64_t, int64_t, int64_t);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_CHASE)
#undef JAXMG_INSTANTIATE_CHASE
template Status Backend::Stedc<float>(int64_t, int64_t, float*, float*, float*, int64_t);
template Status Backend::Stedc<double>(int64_t, int64_t, double*, double*, double*, int64_t);
template Status Backend::TridiagonalPairs<float>(int64_t, const float*, const float*, int64_t,
                                                 int64_t, float*, float*);
template Status Backend::TridiagonalPairs<double>(int64_t, const double*, const double*, int64_t,
                                                  int64_t, double*, double*);
template Status Backend::GridAdjoint<float>(int64_t, int64_t, int64_t, const float*, float*);
template Status Backend::GridAdjoint<double>(int64_t, int64_t, int64_t, const double*, double*);

}  // namespace jaxmg::scalapack
