#include "engines/scalapack/backend.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "common/scalar.h"
#include "engines/scalapack/engine_util.h"

// LAPACK and BLAS, as ScaLAPACK links them (32-bit integers).
extern "C" {
#define JAXMG_DECLARE_LOCAL(p, T)                                                             \
  void p##getrf_(const int* m, const int* n, T* a, const int* lda, int* ipiv, int* info);     \
  void p##trsm_(const char* side, const char* uplo, const char* trans, const char* diag,      \
                const int* m, const int* n, const T* alpha, const T* a, const int* lda, T* b, \
                const int* ldb);                                                              \
  void p##gemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k,     \
                const T* alpha, const T* a, const int* lda, const T* b, const int* ldb,       \
                const T* beta, T* c, const int* ldc);                                         \
  void p##trmm_(const char* side, const char* uplo, const char* trans, const char* diag,      \
                const int* m, const int* n, const T* alpha, const T* a, const int* lda, T* b, \
                const int* ldb);                                                              \
  void p##geqrf_(const int* m, const int* n, T* a, const int* lda, T* tau, T* work,           \
                 const int* lwork, int* info);                                                \
  void p##potrf_(const char* uplo, const int* n, T* a, const int* lda, int* info);
JAXMG_DECLARE_LOCAL(s, float)
JAXMG_DECLARE_LOCAL(d, double)
JAXMG_DECLARE_LOCAL(c, std::complex<float>)
JAXMG_DECLARE_LOCAL(z, std::complex<double>)
#undef JAXMG_DECLARE_LOCAL
}

namespace jaxmg::scalapack {
namespace {

#define JAXMG_LOCAL_DISPATCH(name)                                 \
  template <typename T, typename... A>                             \
  void name(A... args) {                                           \
    if constexpr (std::is_same_v<T, float>) {                      \
      s##name##_(args...);                                         \
    } else if constexpr (std::is_same_v<T, double>) {              \
      d##name##_(args...);                                         \
    } else if constexpr (std::is_same_v<T, std::complex<float>>) { \
      c##name##_(args...);                                         \
    } else {                                                       \
      z##name##_(args...);                                         \
    }                                                              \
  }
JAXMG_LOCAL_DISPATCH(getrf)
JAXMG_LOCAL_DISPATCH(trsm)
JAXMG_LOCAL_DISPATCH(gemm)
JAXMG_LOCAL_DISPATCH(trmm)
JAXMG_LOCAL_DISPATCH(geqrf)
JAXMG_LOCAL_DISPATCH(potrf)
#undef JAXMG_LOCAL_DISPATCH

// The int arguments LAPACK and BLAS take.
Status Ints(std::initializer_list<std::pair<int64_t, int*>> values) {
  for (const auto& [v, out] : values) JAXMG_RETURN_IF_ERROR(CheckedInt(v, "a dimension", out));
  return Status();
}

template <typename T>
MPI_Datatype RealMpi() {
  return sizeof(RealOf<T>) == 4 ? MPI_FLOAT : MPI_DOUBLE;
}

}  // namespace

template <typename T>
Status Backend::PrepareGetrf(int64_t m, int64_t n, T*, int64_t) {
  ipiv_.assign(static_cast<size_t>(std::max<int64_t>(std::min(m, n), 1)), 0);
  return Status();
}

template <typename T>
Status Backend::Getrf(int64_t m, int64_t n, T* a, int64_t lda, int64_t* piv) {
  int im = 0, in = 0, il = 0, info = 0;
  JAXMG_RETURN_IF_ERROR(Ints({{m, &im}, {n, &in}, {lda, &il}}));
  getrf<T>(&im, &in, a, &il, ipiv_.data(), &info);
  if (info < 0) return JAXMG_ERROR("?getrf: argument " + std::to_string(-info) + " is invalid");
  for (int64_t i = 0; i < std::min(m, n); ++i) piv[i] = ipiv_[i];  // (info > 0: the status)
  return Status();
}

template <typename T>
Status Backend::Copy(T* dst, int64_t ldd, const T* src, int64_t lds, int64_t m, int64_t n) {
  for (int64_t j = 0; j < n; ++j) std::copy_n(src + j * lds, m, dst + j * ldd);
  return Status();
}

namespace {

// count entries of U (scalars, or int64_t) from process `at`, in chunks of int counts.
template <typename U>
Status BroadcastEntries(U* data, int64_t count, int at, MPI_Comm comm) {
  constexpr int64_t kChunk = int64_t{1} << 30;
  MPI_Datatype type = MPI_INT64_T;
  int64_t total = count;
  size_t unit = sizeof(int64_t);
  void* base = data;
  if constexpr (!std::is_same_v<U, int64_t>) {
    type = RealMpi<U>(), total = count * Scalar<U>::kParts, unit = sizeof(RealOf<U>);
  }
  for (int64_t off = 0; off < total; off += kChunk) {
    const int c = static_cast<int>(std::min(kChunk, total - off));
    JAXMG_RETURN_IF_ERROR(
        MpiCheck(MPI_Bcast(static_cast<char*>(base) + unit * off, c, type, at, comm), "MPI_Bcast"));
  }
  return Status();
}

}  // namespace

template <typename T, typename U>
Status Backend::Broadcast(T* a, int64_t na, U* b, int64_t nb, int root) {
  const int at = grid_.comm_ranks[static_cast<size_t>(root)];  // a 1 x P grid: column = position
  JAXMG_RETURN_IF_ERROR(BroadcastEntries(a, na, at, grid_.comm));
  return BroadcastEntries(b, nb, at, grid_.comm);
}

template <typename T>
Status Backend::PrepareGeqrf(int64_t m, int64_t n, T* a, int64_t lda, T* tau) {
  int im = 0, in = 0, il = 0, info = 0, query = -1;
  JAXMG_RETURN_IF_ERROR(Ints({{m, &im}, {n, &in}, {lda, &il}}));
  T size(0);
  geqrf<T>(&im, &in, a, &il, tau, &size, &query, &info);
  if (info < 0) return JAXMG_ERROR("?geqrf: argument " + std::to_string(-info) + " is invalid");
  geqrf_lwork_ = std::max(1, static_cast<int>(std::real(size)));
  try {
    geqrf_work_.assign(sizeof(T) * static_cast<size_t>(geqrf_lwork_), '\0');
  } catch (const std::bad_alloc&) {
    return JAXMG_ERROR("could not allocate ?geqrf's workspace (" + std::to_string(geqrf_lwork_) +
                       " entries)");
  }
  return Status();
}

template <typename T>
Status Backend::Geqrf(const Lane&, int64_t m, int64_t n, T* a, int64_t lda, T* tau) {
  int im = 0, in = 0, il = 0, info = 0;
  JAXMG_RETURN_IF_ERROR(Ints({{m, &im}, {n, &in}, {lda, &il}}));
  if (static_cast<size_t>(geqrf_lwork_) * sizeof(T) > geqrf_work_.size()) {
    return JAXMG_ERROR("?geqrf: its workspace was not prepared for this type");
  }
  geqrf<T>(&im, &in, a, &il, tau, reinterpret_cast<T*>(geqrf_work_.data()), &geqrf_lwork_, &info);
  if (info < 0) return JAXMG_ERROR("?geqrf: argument " + std::to_string(-info) + " is invalid");
  return Status();
}

template <typename T>
Status Backend::Gemm(const Lane&, bool adjoint_a, bool adjoint_b, int64_t m, int64_t n, int64_t k,
                     T alpha, const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c,
                     int64_t ldc) {
  if (m <= 0 || n <= 0) return Status();
  int im = 0, in = 0, ik = 0, ia = 0, ib = 0, ic = 0;
  JAXMG_RETURN_IF_ERROR(Ints({{m, &im}, {n, &in}, {k, &ik}, {lda, &ia}, {ldb, &ib}, {ldc, &ic}}));
  // ('C' is the transpose for the real types)
  gemm<T>(adjoint_a ? "C" : "N", adjoint_b ? "C" : "N", &im, &in, &ik, &alpha, a, &ia, b, &ib,
          &beta, c, &ic);
  return Status();
}

template <typename T>
Status Backend::Trmm(const Lane&, bool adjoint, int64_t m, int64_t n, const T* f, int64_t ldf,
                     const T* w, int64_t ldw, T* out, int64_t ldo) {
  if (m <= 0 || n <= 0) return Status();
  int im = 0, in = 0, i_f = 0, io = 0;
  JAXMG_RETURN_IF_ERROR(Ints({{m, &im}, {n, &in}, {ldf, &i_f}, {ldo, &io}}));
  for (int64_t j = 0; j < n; ++j) std::copy_n(w + j * ldw, m, out + j * ldo);  // (in place)
  const T one(1);
  trmm<T>("L", "U", adjoint ? "C" : "N", "N", &im, &in, &one, f, &i_f, out, &io);
  return Status();
}

template <typename T>
Status Backend::LeftTrsm(const char* uplo, const char* diag, int64_t m, int64_t n, const T* a,
                         int64_t lda, T* b, int64_t ldb) {
  if (m <= 0 || n <= 0) return Status();
  int im = 0, in = 0, ia = 0, ib = 0;
  JAXMG_RETURN_IF_ERROR(Ints({{m, &im}, {n, &in}, {lda, &ia}, {ldb, &ib}}));
  const T one(1);
  trsm<T>("L", uplo, "N", diag, &im, &in, &one, a, &ia, b, &ib);
  return Status();
}

template <typename T>
Status Backend::TrsmUpper(const Lane&, int64_t m, int64_t n, const T* s, int64_t lds, T* b,
                          int64_t ldb) {
  return LeftTrsm("U", "N", m, n, s, lds, b, ldb);
}

template <typename T>
Status Backend::ReflectorBlock(const Lane&, const T* a, int64_t lda, int64_t rows, int64_t cols,
                               const T* tau, T* v, int64_t ldv) {
  for (int64_t c = 0; c < cols; ++c) {
    const bool none = tau[c] == T(0);  // the identity: a zero column
    for (int64_t r = 0; r < rows; ++r) {
      v[r + c * ldv] = none || r < c ? T(0) : (r == c ? T(1) : a[r + c * lda]);
    }
  }
  return Status();
}

template <typename T>
Status Backend::ReflectorDiagonal(const Lane&, T* s, int64_t ld, int64_t k, const T* tau) {
  for (int64_t c = 0; c < k; ++c) {
    s[c + c * ld] = tau[c] == T(0) ? T(1) : T(1) / tau[c];
    for (int64_t r = c + 1; r < k; ++r) s[r + c * ld] = T(0);
  }
  return Status();
}

template <typename T>
Status Backend::IdentityBlock(const Lane&, T* a, int64_t ld, int64_t rows, int64_t cols,
                              int64_t row0) {
  for (int64_t c = 0; c < cols; ++c) {
    std::fill_n(a + c * ld, rows, T(0));
    if (row0 + c < rows) a[row0 + c + c * ld] = T(1);
  }
  return Status();
}

template <typename T>
Status Backend::Adjoint(const Lane&, const T* src, int64_t lds, int64_t rows, int64_t cols, T* dst,
                        int64_t ldd) {
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t r = 0; r < rows; ++r) {
      const T x = src[r + c * lds];
      if constexpr (Scalar<T>::kParts == 2) {
        dst[c + r * ldd] = std::conj(x);
      } else {
        dst[c + r * ldd] = x;
      }
    }
  }
  return Status();
}

template <typename T>
Status Backend::RowSwaps(T* a, int64_t lda, int64_t cols, int64_t skip_begin, int64_t skip_end,
                         int64_t row0, const int64_t* piv, int64_t count) {
  for (int64_t j = 0; j < cols; ++j) {
    if (j >= skip_begin && j < skip_end) continue;
    T* col = a + j * lda;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t p = row0 + piv[i] - 1;
      if (p != row0 + i) std::swap(col[row0 + i], col[p]);
    }
  }
  return Status();
}

template <typename T>
Status Backend::TrsmLowerUnit(int64_t m, int64_t n, const T* l, int64_t ldl, T* b, int64_t ldb) {
  return LeftTrsm("L", "U", m, n, l, ldl, b, ldb);
}

template <typename T>
Status Backend::GemmMinus(char op_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                          const T* b, int64_t ldb, T* c, int64_t ldc) {
  int im = 0, in = 0, ik = 0, ia = 0, ib = 0, ic = 0;
  JAXMG_RETURN_IF_ERROR(Ints({{m, &im}, {n, &in}, {k, &ik}, {lda, &ia}, {ldb, &ib}, {ldc, &ic}}));
  const T one(1), minus_one(-1);
  const char op[2] = {op_b == 'N' ? 'N' : 'C', 0};
  gemm<T>("N", op, &im, &in, &ik, &minus_one, a, &ia, b, &ib, &one, c, &ic);
  return Status();
}

template <typename T>
Status Backend::Potrf(const Lane&, int64_t n, T* a, int64_t lda, int* info) {
  int in = 0, ia = 0;
  JAXMG_RETURN_IF_ERROR(Ints({{n, &in}, {lda, &ia}}));
  potrf<T>("L", &in, a, &ia, info);
  if (*info < 0)
    return Status::Error("jaxmg: LAPACK potrf rejected its argument " + std::to_string(-*info));
  return Status();
}

template <typename T>
Status Backend::TrsmRightLowerAdjoint(const Lane&, int64_t m, int64_t n, const T* l, int64_t ldl,
                                      T* b, int64_t ldb) {
  if (m <= 0 || n <= 0) return Status();
  int im = 0, in = 0, il = 0, ib = 0;
  JAXMG_RETURN_IF_ERROR(Ints({{m, &im}, {n, &in}, {ldl, &il}, {ldb, &ib}}));
  const T one(1);
  trsm<T>("R", "L", "C", "N", &im, &in, &one, l, &il, b, &ib);
  return Status();
}

Status Backend::PivotsOut(const int64_t* piv, int64_t count, int64_t* host) {
  std::copy_n(piv, count, host);
  return Status();
}

template <typename T>
Status Backend::PMoveColumns(const T* x, T* out, const std::vector<int64_t>& order) {
  // Column g of x (global, block-cyclic over the process columns) goes to column order[g] of
  // out. Within a process row every process lists the columns it sends to each peer column and
  // those it receives from each, in increasing source index; one MPI_Alltoallv over the grid's
  // communicator (counts to other process rows zero) moves them, a column (ld entries) a unit.
  const algorithms::Distribution& g = square_g_;
  const int npc = grid_.npcol, me = grid_.mycol, row = grid_.myrow;
  const int size = grid_.nprow * npc;
  const int64_t n = g.rows, ld = g.ld;
  const layout::CyclicAxis& cols = g.col_axis;
  std::vector<std::vector<int64_t>> send(static_cast<size_t>(npc)), recv(send);
  for (int64_t c = 0; c < n; ++c) {
    const layout::GlobalIndex from{c}, to{order[static_cast<size_t>(c)]};
    if (cols.Owner(from) == me) send[cols.Owner(to)].push_back(cols.Local(from).value);
    if (cols.Owner(to) == me) recv[cols.Owner(from)].push_back(cols.Local(to).value);
  }
  // A count or size past int is this rank's own: it still enters the all-to-all (with nothing
  // to move) and returns the error after, for the algorithm's agreement.
  Status bad;
  std::vector<int> scount(size, 0), sdispl(size, 0), rcount(size, 0), rdispl(size, 0);
  int64_t sent = 0, received = 0;
  for (int q = 0; q < npc && bad.ok(); ++q) {
    const int peer = grid_.comm_ranks[static_cast<size_t>(row * npc + q)];
    for (auto [v, out] :
         {std::pair<int64_t, int*>{static_cast<int64_t>(send[q].size()), &scount[peer]},
          {static_cast<int64_t>(recv[q].size()), &rcount[peer]},
          {sent, &sdispl[peer]},
          {received, &rdispl[peer]}}) {
      if (bad.ok()) bad = CheckedInt(v, "columns", out);
    }
    sent += scount[peer], received += rcount[peer];
  }
  int column_bytes = 1;
  if (bad.ok())
    bad = CheckedInt(static_cast<int64_t>(sizeof(T)) * ld, "column bytes", &column_bytes);
  if (!bad.ok()) {
    std::fill(scount.begin(), scount.end(), 0);
    std::fill(rcount.begin(), rcount.end(), 0);
    sent = received = 0;
  }
  std::vector<T> sendbuf(static_cast<size_t>(std::max<int64_t>(sent * ld, 1)));
  std::vector<T> recvbuf(static_cast<size_t>(std::max<int64_t>(received * ld, 1)));
  int64_t at = 0;
  for (int q = 0; q < npc && bad.ok(); ++q) {
    for (int64_t c : send[q]) std::copy_n(x + c * ld, ld, sendbuf.data() + (at++) * ld);
  }
  MPI_Datatype column;
  JAXMG_RETURN_IF_ERROR(
      MpiCheck(MPI_Type_contiguous(column_bytes, MPI_BYTE, &column), "MPI_Type_contiguous"));
  MPI_Type_commit(&column);
  const int rc = MPI_Alltoallv(sendbuf.data(), scount.data(), sdispl.data(), column, recvbuf.data(),
                               rcount.data(), rdispl.data(), column, grid_.comm);
  MPI_Type_free(&column);
  JAXMG_RETURN_IF_ERROR(bad);
  JAXMG_RETURN_IF_ERROR(MpiCheck(rc, "MPI_Alltoallv"));
  at = 0;
  for (int q = 0; q < npc; ++q) {
    for (int64_t c : recv[q]) std::copy_n(recvbuf.data() + (at++) * ld, ld, out + c * ld);
  }
  return Status();
}

// The band reduction's steps (algorithms/band_reduce.h).

template <typename T>
Status Backend::TrmmRight(const Lane&, int64_t m, int64_t n, const T* f, int64_t ldf, const T* x,
                          int64_t ldx, T* out, int64_t ldo) {
  if (m <= 0 || n <= 0) return Status();
  int im = 0, in = 0, i_f = 0, io = 0;
  JAXMG_RETURN_IF_ERROR(Ints({{m, &im}, {n, &in}, {ldf, &i_f}, {ldo, &io}}));
  for (int64_t j = 0; j < n; ++j) std::copy_n(x + j * ldx, m, out + j * ldo);  // (in place)
  const T one(1);
  trmm<T>("R", "U", "N", "N", &im, &in, &one, f, &i_f, out, &io);
  return Status();
}

template <typename T>
Status Backend::CyclicRows(const Lane&, bool to_global, T* local, int64_t ldl, int64_t count,
                           int64_t cols, int64_t first, int64_t t, int procs, int me,
                           int64_t offset, T* global, int64_t ldg, int64_t shift) {
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t i = 0; i < count; ++i) {
      const int64_t g = CyclicAxis{t, procs, me}.Global(LocalIndex{first + i}).value - offset;
      if (to_global) {
        global[g + c * ldg] = local[i + c * ldl];
      } else {
        local[i + c * ldl] = global[g + ((c + shift) % cols) * ldg];
      }
    }
  }
  return Status();
}

template <typename T>
Status Backend::BandFromColumns(const Lane&, const T* a, int64_t lda, int64_t row0, int64_t c0,
                                int64_t cols, int64_t n, int64_t b, T* band) {
  for (int64_t c = 0; c < cols; ++c) {
    const int64_t j = c0 + c;
    for (int64_t i = j; i <= std::min(j + b, n - 1); ++i)
      band[i + 2 * b * j] = a[(i - row0) + c * lda];
  }
  return Status();
}

// QDWH's steps (algorithms/qdwh.h).

template <typename T>
Status Backend::AbsSums(const Tiled<T>& u, double* sums) {
  const int64_t n = u.cols();
  std::fill(sums, sums + u.rows() + n, 0.0);
  for (int64_t c = 0; c < u.lc(); ++c) {
    const int64_t gc = CyclicAxis{u.t(), grid_.npcol, grid_.mycol}.Global(LocalIndex{c}).value;
    for (int64_t r = 0; r < u.lr(); ++r) {
      const double v = std::abs(std::complex<double>(u.p[r + c * u.ld()]));
      sums[gc] += v;
      sums[n + CyclicAxis{u.t(), grid_.nprow, grid_.myrow}.Global(LocalIndex{r}).value] += v;
    }
  }
  return Status();
}

Status Backend::SumOverGrid(double* sums, int64_t count, double* host) {
  JAXMG_RETURN_IF_ERROR(scalapack::AllreduceSum<double>(grid_, sums, count));
  std::copy_n(sums, count, host);
  return Status();
}

Status Backend::AgreeOnValue(double* value) {
  // The largest reading, as its bits (which order non-negative doubles, and NaN after them).
  int64_t bits = 0;
  std::memcpy(&bits, value, sizeof(bits));
  JAXMG_RETURN_IF_ERROR(MaxOverGrid(&bits));
  std::memcpy(value, &bits, sizeof(bits));
  return Status();
}

Status Backend::MaxOverGrid(int64_t* value) {
  return MpiCheck(MPI_Allreduce(MPI_IN_PLACE, value, 1, MPI_INT64_T, MPI_MAX, grid_.comm),
                  "MPI_Allreduce");
}

template <typename T>
Status Backend::Scale(const Tiled<T>& u, double s) {
  const auto rs = static_cast<RealOf<T>>(s);
  for (int64_t i = 0; i < u.count(); ++i) u.p[i] *= rs;
  return Status();
}

template <typename T>
Status Backend::SetIdentity(const Tiled<T>& z) {
  std::fill(z.p, z.p + z.count(), T(0));
  for (int64_t c = 0; c < z.lc(); ++c) {
    const int64_t gc = CyclicAxis{z.t(), grid_.npcol, grid_.mycol}.Global(LocalIndex{c}).value;
    for (int64_t r = 0; r < z.lr(); ++r) {
      if (CyclicAxis{z.t(), grid_.nprow, grid_.myrow}.Global(LocalIndex{r}).value == gc)
        z.p[r + c * z.ld()] = T(1);
    }
  }
  return Status();
}

template <typename T>
Status Backend::SumSquares(const Tiled<T>& w, double* sum) {
  double s = 0;
  for (int64_t i = 0; i < w.count(); ++i) s += std::norm(std::complex<double>(w.p[i]));
  *sum = s;
  return Status();
}

template <typename T>
Status Backend::AxpbyChange(const Tiled<T>& u, const Tiled<T>& w, double e, double coef,
                            double* sum) {
  const auto re = static_cast<RealOf<T>>(e), rc = static_cast<RealOf<T>>(coef);
  double s = 0;
  for (int64_t i = 0; i < u.count(); ++i) {
    const T next = re * u.p[i] + rc * w.p[i];
    s += std::norm(std::complex<double>(next - u.p[i]));
    u.p[i] = next;
  }
  *sum = s;
  return Status();
}

template <typename T>
Status Backend::QdwhStack(const Tiled<T>& u, double sqrt_c, const Tiled<T>& y, int64_t top) {
  const auto scale = static_cast<RealOf<T>>(sqrt_c);
  std::fill(y.p, y.p + y.count(), T(0));
  for (int64_t c = 0; c < u.lc(); ++c) {
    const int64_t gc = CyclicAxis{u.t(), grid_.npcol, grid_.mycol}.Global(LocalIndex{c}).value;
    for (int64_t r = 0; r < u.lr(); ++r) y.p[r + c * y.ld()] = scale * u.p[r + c * u.ld()];
    for (int64_t r = top; r < y.lr(); ++r) {
      if (CyclicAxis{u.t(), grid_.nprow, grid_.myrow}.Global(LocalIndex{r - top}).value == gc)
        y.p[r + c * y.ld()] = T(1);
    }
  }
  return Status();
}

template <typename T>
Status Backend::Gram(double c, const Tiled<T>& u, double beta, const Tiled<T>& z) {
  Descriptor du, dz;
  JAXMG_RETURN_IF_ERROR(Describe(u, &du));
  JAXMG_RETURN_IF_ERROR(Describe(z, &dz));
  // ('C' is the transpose for the real types)
  return GemmAt<T>('C', 'N', u.cols(), u.cols(), u.rows(), T(c), u.p, u.row, 1, du, u.p, u.row, 1,
                   du, T(beta), z.p, z.row, 1, dz);
}

template <typename T>
Status Backend::PPotrf(const Tiled<T>& z, int64_t* info) {
  Descriptor dz;
  JAXMG_RETURN_IF_ERROR(Describe(z, &dz));
  int out = 0;
  JAXMG_RETURN_IF_ERROR(scalapack::Potrf<T>(z.cols(), z.p, dz, &out));
  *info = out;
  return Status();
}

template <typename T>
Status Backend::PQr(const Tiled<T>& y, T* tau) {
  Descriptor dy;
  JAXMG_RETURN_IF_ERROR(Describe(y, &dy));
  int info = 0;
  JAXMG_RETURN_IF_ERROR(scalapack::Geqrf<T>(y.rows(), y.cols(), y.p, dy, tau, &info));
  return scalapack::Orgqr<T>(y.rows(), y.cols(), y.p, dy, tau, &info);
}

template <typename T>
Status Backend::PProduct(char op_a, char op_b, int64_t m, int64_t n, int64_t k, double alpha,
                         const Tiled<T>& a, const Tiled<T>& b, double beta, const Tiled<T>& c) {
  Descriptor da, db, dc;
  JAXMG_RETURN_IF_ERROR(Describe(a, &da));
  JAXMG_RETURN_IF_ERROR(Describe(b, &db));
  JAXMG_RETURN_IF_ERROR(Describe(c, &dc));
  return GemmAt<T>(op_a, op_b, m, n, k, T(alpha), a.p, a.row, 1, da, b.p, b.row, 1, db, T(beta),
                   c.p, c.row, 1, dc);
}

template <typename T>
Status Backend::PTrsmRight(bool adjoint, const Tiled<T>& l, const Tiled<T>& w) {
  Descriptor dl, dw;
  JAXMG_RETURN_IF_ERROR(Describe(l, &dl));
  JAXMG_RETURN_IF_ERROR(Describe(w, &dw));
  return TrsmAt<T>('R', 'L', adjoint ? 'C' : 'N', 'N', w.rows(), w.cols(), T(1), l.p, l.row, 1, dl,
                   w.p, w.row, 1, dw);
}

template <typename T>
Status Backend::PSymmRight(double alpha, const Tiled<T>& g, const Tiled<T>& w, double beta,
                           const Tiled<T>& u) {
  // G whole (Gram's p?gemm): a p?gemm.
  return PProduct<T>('N', 'N', u.rows(), u.cols(), u.cols(), alpha, w, g, beta, u);
}

template <typename T>
Status Backend::PHermitianPart(const Tiled<T>& z, const Tiled<T>& h) {
  Descriptor dz, dh;
  JAXMG_RETURN_IF_ERROR(Describe(z, &dz));
  JAXMG_RETURN_IF_ERROR(Describe(h, &dh));
  JAXMG_RETURN_IF_ERROR(scalapack::Adjoint<T>(h.cols(), z.p, dz, h.p, dh));
  for (int64_t i = 0; i < h.count(); ++i) h.p[i] = (h.p[i] + z.p[i]) / RealOf<T>(2);
  return Status();
}

#define JAXMG_INSTANTIATE_BACKEND(T)                                                               \
  template Status Backend::PrepareGetrf<T>(int64_t, int64_t, T*, int64_t);                         \
  template Status Backend::Getrf<T>(int64_t, int64_t, T*, int64_t, int64_t*);                      \
  template Status Backend::Copy<T>(T*, int64_t, const T*, int64_t, int64_t, int64_t);              \
  template Status Backend::Broadcast<T, int64_t>(T*, int64_t, int64_t*, int64_t, int);             \
  template Status Backend::Broadcast<T, T>(T*, int64_t, T*, int64_t, int);                         \
  template Status Backend::PrepareGeqrf<T>(int64_t, int64_t, T*, int64_t, T*);                     \
  template Status Backend::Geqrf<T>(const Lane&, int64_t, int64_t, T*, int64_t, T*);               \
  template Status Backend::Gemm<T>(const Lane&, bool, bool, int64_t, int64_t, int64_t, T,          \
                                   const T*, int64_t, const T*, int64_t, T, T*, int64_t);          \
  template Status Backend::Trmm<T>(const Lane&, bool, int64_t, int64_t, const T*, int64_t,         \
                                   const T*, int64_t, T*, int64_t);                                \
  template Status Backend::TrsmUpper<T>(const Lane&, int64_t, int64_t, const T*, int64_t, T*,      \
                                        int64_t);                                                  \
  template Status Backend::ReflectorBlock<T>(const Lane&, const T*, int64_t, int64_t, int64_t,     \
                                             const T*, T*, int64_t);                               \
  template Status Backend::ReflectorDiagonal<T>(const Lane&, T*, int64_t, int64_t, const T*);      \
  template Status Backend::IdentityBlock<T>(const Lane&, T*, int64_t, int64_t, int64_t, int64_t);  \
  template Status Backend::Adjoint<T>(const Lane&, const T*, int64_t, int64_t, int64_t, T*,        \
                                      int64_t);                                                    \
  template Status Backend::RowSwaps<T>(T*, int64_t, int64_t, int64_t, int64_t, int64_t,            \
                                       const int64_t*, int64_t);                                   \
  template Status Backend::TrsmLowerUnit<T>(int64_t, int64_t, const T*, int64_t, T*, int64_t);     \
  template Status Backend::GemmMinus<T>(char, int64_t, int64_t, int64_t, const T*, int64_t,        \
                                        const T*, int64_t, T*, int64_t);                           \
  template Status Backend::Potrf<T>(const Lane&, int64_t, T*, int64_t, int*);                      \
  template Status Backend::TrsmRightLowerAdjoint<T>(const Lane&, int64_t, int64_t, const T*,       \
                                                    int64_t, T*, int64_t);                         \
  template Status Backend::PMoveColumns<T>(const T*, T*, const std::vector<int64_t>&);             \
  template Status Backend::AbsSums<T>(const Tiled<T>&, double*);                                   \
  template Status Backend::Scale<T>(const Tiled<T>&, double);                                      \
  template Status Backend::SetIdentity<T>(const Tiled<T>&);                                        \
  template Status Backend::SumSquares<T>(const Tiled<T>&, double*);                                \
  template Status Backend::AxpbyChange<T>(const Tiled<T>&, const Tiled<T>&, double, double,        \
                                          double*);                                                \
  template Status Backend::QdwhStack<T>(const Tiled<T>&, double, const Tiled<T>&, int64_t);        \
  template Status Backend::Gram<T>(double, const Tiled<T>&, double, const Tiled<T>&);              \
  template Status Backend::PPotrf<T>(const Tiled<T>&, int64_t*);                                   \
  template Status Backend::PQr<T>(const Tiled<T>&, T*);                                            \
  template Status Backend::PProduct<T>(char, char, int64_t, int64_t, int64_t, double,              \
                                       const Tiled<T>&, const Tiled<T>&, double, const Tiled<T>&); \
  template Status Backend::PTrsmRight<T>(bool, const Tiled<T>&, const Tiled<T>&);                  \
  template Status Backend::PSymmRight<T>(double, const Tiled<T>&, const Tiled<T>&, double,         \
                                         const Tiled<T>&);                                         \
  template Status Backend::PHermitianPart<T>(const Tiled<T>&, const Tiled<T>&);                    \
  template Status Backend::TrmmRight<T>(const Lane&, int64_t, int64_t, const T*, int64_t,          \
                                        const T*, int64_t, T*, int64_t);                           \
  template Status Backend::CyclicRows<T>(const Lane&, bool, T*, int64_t, int64_t, int64_t,         \
                                         int64_t, int64_t, int, int, int64_t, T*, int64_t,         \
                                         int64_t);                                                 \
  template Status Backend::BandFromColumns<T>(const Lane&, const T*, int64_t, int64_t, int64_t,    \
                                              int64_t, int64_t, int64_t, T*);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_BACKEND)
// (the chase's phases with the tridiagonal matrix: band_chase.h)
template Status Backend::Broadcast<std::complex<float>, float>(std::complex<float>*, int64_t,
                                                               float*, int64_t, int);
template Status Backend::Broadcast<std::complex<double>, double>(std::complex<double>*, int64_t,
                                                                 double*, int64_t, int);
#undef JAXMG_INSTANTIATE_BACKEND

}  // namespace jaxmg::scalapack
