#include "engines/scalapack/engine.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <tuple>

#include "algorithms/cholesky_1d.h"
#include "algorithms/lu_1d.h"
#include "algorithms/qr_1d.h"
#include "common/chunk.h"
#include "common/scalar.h"
#include "common/symmetry.h"
#include "engines/scalapack/backend.h"
#include "engines/scalapack/engine_util.h"
#include "routines/steps.h"

namespace jaxmg::scalapack {

// The steps Engine declares are the contract's, for every element type (routines/steps.h).
static_assert(StepsMatch<Engine>());

namespace {

const layout::AxisPlan& AxisOf(const layout::Plan& plan, Axis axis) {
  return axis == Axis::kRows ? plan.rows : plan.cols;
}

}  // namespace

// fn(global index, local entry) for each entry of the global diagonal of `m` held by this
// process.
template <typename T, typename Fn>
void Engine::ForEachLocalDiagonal(const Matrix<T>& m, Fn&& fn) const {
  const int64_t t = m.tile, lr = m.local_rows, lc = m.local_cols;
  const T* a = m.data;
  for (int64_t c = 0; c < lc; ++c) {
    const int64_t gc = CyclicAxis{t, grid_->npcol, grid_->mycol}.Global(LocalIndex{c}).value;
    if ((gc / t) % grid_->nprow != grid_->myrow) continue;
    const int64_t r = (gc / t / grid_->nprow) * t + gc % t;
    if (r < lr) fn(gc, a[r + c * lr]);
  }
}

// This shard's block of b and x: (block index, rows per block, whether this shard is the one
// copy that contributes to the whole right-hand side).
std::tuple<int64_t, int64_t, bool> Engine::RhsBlock() const {
  const int64_t n = plan_->rows.extent;
  if (rhs_by_cols_) return {v_, n / plan_->mesh_cols, u_ == 0};
  return {u_, n / plan_->mesh_rows, v_ == 0};
}

// 1 + the smallest engine-global column of `m` holding a non-finite local entry, or 0.
template <typename T>
int64_t Engine::FirstNonFiniteColumn(const Matrix<T>& m) const {
  const T* a = m.data;
  for (int64_t c = 0; c < m.local_cols; ++c) {  // increasing global order
    for (int64_t r = 0; r < m.local_rows; ++r) {
      if (!std::isfinite(static_cast<double>(std::abs(a[r + c * m.local_rows])))) {
        return CyclicAxis{m.tile, grid_->npcol, grid_->mycol}.Global(LocalIndex{c}).value + 1;
      }
    }
  }
  return 0;
}

// fn(local entry index, index into the whole n x nrhs right-hand side) for each local entry of
// the right-hand side c whose row is an original (not padding) row through the plan's `axis`.
template <typename T, typename Fn>
void Engine::ForEachRhsEntry(const Matrix<T>& rhs, Axis axis, Fn&& fn) const {
  const layout::Plan& plan = *plan_;
  const int64_t t = plan.tile, lr = rhs.local_rows, nrhs = rhs.cols;
  const layout::AxisPlan& map = AxisOf(plan, axis);
  for (int64_t r = 0; r < lr; ++r) {
    const int64_t engine = CyclicAxis{t, grid_->nprow, grid_->myrow}.Global(LocalIndex{r}).value;
    const int64_t g = layout::EngineGlobalToOriginal(plan, map, engine).value;
    if (g < 0) continue;
    for (int64_t c = 0; c < rhs.local_cols; ++c) {
      fn(r + c * lr,
         g * nrhs + CyclicAxis{t, grid_->npcol, grid_->mycol}.Global(LocalIndex{c}).value);
    }
  }
}

Status Engine::Create(const CallAttrs& attrs, const layout::Plan& plan,
                      const CallFingerprint& fingerprint, Engine* out) {
  const int mr = plan.mesh_rows, mc = plan.mesh_cols;
  JAXMG_RETURN_IF_ERROR(EnsureMpi());
  std::vector<int> ranks = attrs.ranks;
  if (ranks.empty())
    JAXMG_RETURN_IF_ERROR(GatherMeshRanks(attrs.u * mc + attrs.v, mr * mc, &ranks));
  if (ranks[attrs.u * mc + attrs.v] != WorldRank()) {
    return JAXMG_ERROR("mesh position (" + std::to_string(attrs.u) + ", " +
                       std::to_string(attrs.v) +
                       ") is not this process's: JAX process indices must equal MPI ranks");
  }
  std::vector<int> members = ranks;
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  JAXMG_RETURN_IF_ERROR(AgreeOnCall(members, fingerprint.values, fingerprint.names));
  // Grid position (i, j) is played by mesh (u, v) with i = rows.grid_of_mesh[v], j =
  // cols.grid_of_mesh[u].
  const int nprow = plan.grid_rows(), npcol = plan.grid_cols();
  std::vector<int> grid_ranks(static_cast<size_t>(nprow) * npcol);
  for (int uu = 0; uu < mr; ++uu) {
    for (int vv = 0; vv < mc; ++vv) {
      grid_ranks[plan.rows.grid_of_mesh[vv] * npcol + plan.cols.grid_of_mesh[uu]] =
          ranks[uu * mc + vv];
    }
  }
  out->plan_ = &plan;
  out->config_ = attrs.config;
  out->rhs_by_cols_ = attrs.transposed;
  out->u_ = attrs.u;
  out->v_ = attrs.v;
  JAXMG_RETURN_IF_ERROR(GetGrid(grid_ranks, nprow, npcol, &out->grid_));
  out->local_rows_ = layout::EngineLocalExtent(plan, plan.rows, out->grid_->myrow);
  out->local_cols_ = layout::EngineLocalExtent(plan, plan.cols, out->grid_->mycol);
  return Status();
}

// Decided at once (agreed); asymmetric() gives the verdict.
template <typename T>
Status Engine::CheckSymmetry(const T* shard) {
  return Asymmetric<T>(shard, &asymmetric_);
}

template <typename T>
Status Engine::Asymmetric(const T* shard, bool* out) {
  // The shard is block (u, v) of the matrix handed, row-major (common/symmetry.h).
  const layout::Plan& plan = *plan_;
  const int64_t n = plan.rows.extent, sr = n / plan.mesh_rows, sc = n / plan.mesh_cols;
  const int64_t row0 = u_ * sr, col0 = v_ * sc;
  std::vector<T> probes(static_cast<size_t>(2 * sc)), y(static_cast<size_t>(2 * n), T(0));
  for (int64_t c = 0; c < sc; ++c) {
    probes[c] = symmetry::Probe<T>(1, col0 + c);       // v
    probes[sc + c] = symmetry::Probe<T>(0, col0 + c);  // u
  }
  const T* a = static_cast<const T*>(shard);
  for (int64_t r = 0; r < sr; ++r) {
    T av(0), au(0);
    for (int64_t c = 0; c < sc; ++c) {
      av += a[r * sc + c] * probes[c];
      au += a[r * sc + c] * probes[sc + c];
    }
    y[row0 + r] = av;
    y[n + row0 + r] = au;
  }
  JAXMG_RETURN_IF_ERROR(AllreduceSum<T>(*grid_, y.data(), 2 * n));
  int differs = symmetry::Differs<T>(y.data(), n) ? 1 : 0;
  JAXMG_RETURN_IF_ERROR(AllreduceMax(*grid_, &differs));  // one answer, whatever the rounding
  *out = differs != 0;
  return Status();
}

template <typename T>
Engine::Matrix<T> Engine::EngineMatrix() const {
  return Matrix<T>::Of(As<T>(work_), &desc_a_, plan_->engine_rows(), plan_->engine_cols(),
                       local_rows_, local_cols_, plan_->tile);
}

template <typename T>
Status Engine::NewLike(const Matrix<T>& like, Matrix<T>* out) {
  matrices_.emplace_back(
      sizeof(T) * static_cast<size_t>(std::max<int64_t>(like.local_rows * like.local_cols, 1)), 0);
  descriptors_.push_back(*like.desc);
  *out = like;
  out->data = As<T>(matrices_.back().data());
  out->desc = &descriptors_.back();
  out->factored = Factorization::kNone;
  return Status();
}

Status Engine::CheckLu(Factorization held, const char* step) {
  if (held == Factorization::kLu || held == Factorization::kLuHostPivots) {
    return Status();
  }
  return JAXMG_ERROR(std::string(step) + ": the matrix handed holds no LU factorization");
}

template <typename T>
Status Engine::Prepare(T* shard, Matrix<T>* a) {
  const layout::Plan& plan = *plan_;
  const int64_t lr = local_rows_, lc = local_cols_, t = plan.tile;
  work_ = shard;
  if (plan.strategy == layout::Strategy::kRelabel) {
    if (plan.padded) {
      owned_.assign(sizeof(T) * static_cast<size_t>(std::max<int64_t>(lr * lc, 1)), 0);
      work_ = owned_.data();
    }
    std::vector<T> scratch(static_cast<size_t>(layout::PrepareLocalScratch(plan, u_, v_)));
    layout::PrepareLocal<T>(plan, u_, v_, shard, As<T>(work_), scratch.data());
  } else {
    owned_.assign(sizeof(T) * static_cast<size_t>(std::max<int64_t>(lr * lc, 1)), 0);
    work_ = owned_.data();
    Descriptor src, dst;
    const int64_t m = plan.rows.extent, n = plan.cols.extent;
    JAXMG_RETURN_IF_ERROR(
        MakeDescriptor(*grid_, m, n, plan.rows.shard, plan.cols.shard, plan.rows.shard, &src));
    JAXMG_RETURN_IF_ERROR(MakeDescriptor(*grid_, m, n, t, t, lr, &dst));
    JAXMG_RETURN_IF_ERROR(Gemr2d<T>(m, n, shard, src, As<T>(work_), dst, *grid_));
  }
  JAXMG_RETURN_IF_ERROR(
      MakeDescriptor(*grid_, plan.engine_rows(), plan.engine_cols(), t, t, lr, &desc_a_));
  *a = EngineMatrix<T>();
  return Status();
}

template <typename T>
Status Engine::Agree(const Matrix<T>& a, int* info, int64_t input_nonfinite) {
  // The local status: the engine's info when positive (negative infos are engine errors, caught
  // by the wrappers), else the first diagonal entry of the factor that is zero or not finite
  // (NaN or Inf input, or a singular matrix the engine did not flag); agreed (max) by every rank.
  if (*info <= 0) {
    int64_t first = 0;  // 1-based; the local diagonal is walked in increasing global order
    ForEachLocalDiagonal<T>(a, [&](int64_t g, const T& d) {
      const double m = static_cast<double>(std::abs(d));
      if (first == 0 && (!(m > 0.0) || !std::isfinite(m))) first = g + 1;
    });
    // A non-finite entry anywhere in the factor (a NaN that pivoting kept off the diagonal).
    for (const int64_t column : {FirstNonFiniteColumn<T>(a), input_nonfinite}) {
      if (column > 0 && (first == 0 || column < first)) first = column;
    }
    *info = static_cast<int>(std::min<int64_t>(first, std::numeric_limits<int>::max()));
  }
  return AllreduceMax(*grid_, info);
}

template <typename T>
Status Engine::Potrf(Matrix<T>* a, int* info) {
  *info = 0;
  a->factored = Factorization::kCholesky;
  if (UseOwnCholesky()) {
    // The 1-D Cholesky (algorithms/cholesky_1d.h): the lower triangle as p?potrf leaves it.
    Backend backend(*grid_);
    int64_t failed_at = 0;
    JAXMG_RETURN_IF_ERROR(algorithms::Cholesky1D(
        backend, DistributionOf(a->rows, a->cols, a->local_rows), a->data, &failed_at));
    *info = static_cast<int>(std::min<int64_t>(failed_at, std::numeric_limits<int>::max()));
    return Agree<T>(*a, info);
  }
  JAXMG_RETURN_IF_ERROR(scalapack::Potrf<T>(a->rows, a->data, *a->desc, info));
  return Agree<T>(*a, info);
}

bool Engine::UseOwnCholesky() const {
  // As the 1-D LU: every engine row on every process (a 1 x P grid). Only where asked
  // (config.cpu_cholesky = blocked): p?potrf is the default.
  return config_.cpu_cholesky == Choice::kOwn && grid_->nprow == 1 &&
         local_rows_ >= plan_->engine_rows();
}

template <typename T>
Status Engine::Getrf(Matrix<T>* a, Pivots* piv, int* info) {
  *info = 0;
  piv->local.assign(static_cast<size_t>(a->local_rows + a->tile), 0);
  // The input is scanned first: pivoting can keep a NaN off the diagonal.
  piv->input_nonfinite = FirstNonFiniteColumn<T>(*a);
  // Either way the pivots are p?getrf's local list, which p?getrs and p?getri take.
  a->factored = Factorization::kLu;
  if (UseOwnLu()) {
    // The 1-D LU (algorithms/lu_1d.h); on a 1 x P grid every row is local, so p?getrf's local
    // pivot list is the global one, and p?getrs, p?getri and PivotsOut take it as it is.
    Backend backend(*grid_);
    std::vector<int64_t> pivots;
    JAXMG_RETURN_IF_ERROR(algorithms::Lu1D(backend, DistributionOf(a->rows, a->cols, a->local_rows),
                                           a->data, &pivots));
    for (int64_t i = 0; i < a->rows; ++i)
      piv->local[static_cast<size_t>(i)] = static_cast<int>(pivots[i]);
    *info = 0;  // the diagonal check (Agree) finds a zero or non-finite pivot
    return Agree<T>(*a, info, piv->input_nonfinite);
  }
  JAXMG_RETURN_IF_ERROR(scalapack::Getrf<T>(a->rows, a->data, *a->desc, piv->local.data(), info));
  return Agree<T>(*a, info, piv->input_nonfinite);
}

bool Engine::UseOwnLu() const {
  // The 1-D LU needs every engine row on every process: a 1 x P grid, whose block-cyclic columns
  // it takes as they are, relabeled or redistributed (inv, slogdet). The default there
  // (measured: bench/cpu_lu.py); config.cpu_lu = scalapack keeps p?getrf.
  return config_.cpu_lu != Choice::kLibrary && grid_->nprow == 1 &&
         local_rows_ >= plan_->engine_rows();
}

algorithms::Distribution Engine::DistributionOf(int64_t rows, int64_t cols, int64_t ld) const {
  return algorithms::Distribution::Of(rows, cols, plan_->tile, grid_->nprow, grid_->myrow,
                                      grid_->npcol, grid_->mycol, ld,
                                      grid_->myrow * grid_->npcol + grid_->mycol);
}

bool Engine::UseOwnInverses(bool lu) const {
  // Measured (bench/cpu_own.py; bench/results/cpu_own_potri_*_1ecac46.json and
  // cpu_own_inv_*_1ecac46.json): the blocked Cholesky inverse beats p?potrs with the identity on
  // 2 and 4 processes, the blocked LU inverse does not beat p?getri.
  // config.cpu_inverses = blocked (kOwn) takes both, = scalapack (kLibrary) neither.
  const Choice c = config_.cpu_inverses;
  return lu ? c == Choice::kOwn : c != Choice::kLibrary;
}

// By the blocked inverses over PBLAS (algorithms/inverses.h); config.cpu_inverses = scalapack:
// p?potrs with the identity.
template <typename T>
Status Engine::CholeskyInverse(const Matrix<T>& l, Matrix<T>* inverse) {
  if (l.factored != Factorization::kCholesky) {
    return JAXMG_ERROR("CholeskyInverse: the matrix handed holds no Cholesky factor");
  }
  Matrix<T> w;
  JAXMG_RETURN_IF_ERROR(Identity<T>(l, &w));  // W := I, distributed like B
  if (!UseOwnInverses(false)) {
    *inverse = w;
    return Potrs<T>(l, w);
  }
  // B⁻¹ = L⁻ᴴ L⁻¹ by blocks over PBLAS (algorithms/inverses.h): N³ flops against the 2N³ of
  // the solve with the identity.
  JAXMG_RETURN_IF_ERROR(NewLike<T>(l, inverse));
  Backend backend(*grid_);
  return algorithms::CholeskyInverse<T>(backend, DistributionOf(l.rows, l.cols, l.local_rows),
                                        l.data, w.data, inverse->data);
}

template <typename T>
Status Engine::Potrs(const Matrix<T>& l, const Matrix<T>& c) {
  if (l.factored != Factorization::kCholesky) {
    return JAXMG_ERROR("Potrs: the matrix handed holds no Cholesky factor");
  }
  int info = 0;
  return scalapack::Potrs<T>(l.rows, c.cols, l.data, *l.desc, c.data, *c.desc, &info);
}

template <typename T>
Status Engine::Getrs(const Matrix<T>& lu, const Pivots& piv, const Matrix<T>& c, bool transpose) {
  JAXMG_RETURN_IF_ERROR(CheckLu(lu.factored, "Getrs"));
  int info = 0;
  return scalapack::Getrs<T>(transpose ? 'T' : 'N', lu.rows, c.cols, lu.data, *lu.desc,
                             piv.local.data(), c.data, *c.desc, &info);
}

template <typename T>
Status Engine::LogAbsDiag(const Matrix<T>& a, double scale, bool ok, RealOf<T>* out) {
  using R = RealOf<T>;
  R* result = out;
  if (!ok) {
    *result = std::numeric_limits<R>::quiet_NaN();
    return Status();
  }
  R sum = 0;  // padding contributes log 1 = 0
  ForEachLocalDiagonal<T>(a, [&](int64_t, const T& d) { sum += std::log(std::abs(d)); });
  JAXMG_RETURN_IF_ERROR(AllreduceSum<R>(*grid_, &sum, 1));
  *result = static_cast<R>(scale) * sum;
  return Status();
}

template <typename T>
Status Engine::RhsIn(const T* b, int64_t nrhs, Axis axis, bool conj, Matrix<T>* c) {
  const layout::Plan& plan = *plan_;
  const int64_t n = plan.rows.extent;
  // The whole right-hand side on every rank (it is small): the shards of one mesh column (one
  // mesh row when b is split over the mesh's columns), summed.
  const auto [block, rows, holder] = RhsBlock();
  std::vector<T> full(static_cast<size_t>(n * nrhs), T(0));
  if (holder) std::memcpy(full.data() + block * rows * nrhs, b, sizeof(T) * rows * nrhs);
  JAXMG_RETURN_IF_ERROR(AllreduceSum<T>(*grid_, full.data(), n * nrhs));
  JAXMG_RETURN_IF_ERROR(NewMatrix<T>(plan.engine_rows(), nrhs, c));
  T* local = c->data;
  ForEachRhsEntry(*c, axis,
                  [&](int64_t l, int64_t w) { local[l] = conj ? Conj(full[w]) : full[w]; });
  return Status();
}

template <typename T>
Status Engine::RhsOut(const Matrix<T>& z, T* x, Axis axis, bool conj) {
  const layout::Plan& plan = *plan_;
  const int64_t n = plan.rows.extent, nrhs = z.cols;
  const auto [block, rows, holder] = RhsBlock();
  std::vector<T> full(static_cast<size_t>(n * nrhs), T(0));
  const T* local = z.data;
  ForEachRhsEntry(z, axis,
                  [&](int64_t l, int64_t w) { full[w] = conj ? Conj(local[l]) : local[l]; });
  JAXMG_RETURN_IF_ERROR(AllreduceSum<T>(*grid_, full.data(), n * nrhs));
  std::memcpy(x, full.data() + block * rows * nrhs, sizeof(T) * rows * nrhs);
  return Status();
}

// p?getri (U⁻¹, then the solve with L and the column interchanges, in lu's place) or, with
// config.cpu_inverses = blocked, U⁻¹ L⁻¹ Pᵀ by blocks (algorithms/inverses.h LuInverse); both
// 4N³/3 flops against 2N³ for the solve with the identity. M⁻ᵀ by one distributed transpose.
template <typename T>
Status Engine::InverseSolve(const Matrix<T>& lu, const Pivots& piv, bool transpose,
                            Matrix<T>* inverse) {
  JAXMG_RETURN_IF_ERROR(CheckLu(lu.factored, "InverseSolve"));
  const int64_t n = lu.rows, lr = lu.local_rows, lc = lu.local_cols;
  const T* m_inverse = lu.data;  // M⁻¹, where p?getri leaves it
  if (UseOwnInverses(true)) {
    // M⁻¹ = U⁻¹ L⁻¹ Pᵀ by blocks over PBLAS (algorithms/inverses.h), into W_L.
    std::vector<int32_t> piv32(static_cast<size_t>(n), 0);
    JAXMG_RETURN_IF_ERROR(PivotsOut(lu, piv, piv32.data()));
    const std::vector<int64_t> global(piv32.begin(), piv32.end());
    Matrix<T> w_lower, w_upper, x;
    JAXMG_RETURN_IF_ERROR(Identity<T>(lu, &w_lower));  // W_L := I
    JAXMG_RETURN_IF_ERROR(Identity<T>(lu, &w_upper));  // W_U := I
    JAXMG_RETURN_IF_ERROR(NewLike<T>(lu, &x));
    Backend backend(*grid_);
    JAXMG_RETURN_IF_ERROR(algorithms::LuInverse<T>(backend, DistributionOf(n, n, lr), lu.data,
                                                   global, w_lower.data, w_upper.data, x.data,
                                                   w_lower.data));
    if (!transpose) {
      *inverse = w_lower;
      return Status();
    }
    m_inverse = w_lower.data;
  } else {
    int info = 0;
    JAXMG_RETURN_IF_ERROR(
        scalapack::Getri<T>(n, lr, lc, lu.data, *lu.desc, piv.local.data(), &info));
    if (info != 0) return JAXMG_ERROR("p?getri: singular factor " + std::to_string(info));
    if (!transpose) {
      JAXMG_RETURN_IF_ERROR(NewLike<T>(lu, inverse));
      std::copy(m_inverse, m_inverse + lr * lc, inverse->data);
      return Status();
    }
  }
  // The transpose, not the adjoint: the adjoint (p?tran / p?tranc), conjugated back.
  JAXMG_RETURN_IF_ERROR(NewLike<T>(lu, inverse));
  T* y = inverse->data;
  JAXMG_RETURN_IF_ERROR(scalapack::Adjoint<T>(n, m_inverse, *lu.desc, y, *inverse->desc));
  for (int64_t i = 0; i < lr * lc; ++i) y[i] = Conj(y[i]);
  return Status();
}

template <typename T>
Status Engine::Identity(const Matrix<T>& like, Matrix<T>* out) {
  const int64_t t = like.tile, lr = like.local_rows, lc = like.local_cols;
  JAXMG_RETURN_IF_ERROR(NewLike<T>(like, out));
  T* y = out->data;
  for (int64_t c = 0; c < lc; ++c) {
    const int64_t gc = CyclicAxis{t, grid_->npcol, grid_->mycol}.Global(LocalIndex{c}).value;
    if ((gc / t) % grid_->nprow != grid_->myrow) continue;
    const int64_t r = (gc / t / grid_->nprow) * t + gc % t;
    if (r < lr) y[r + c * lr] = T(1);
  }
  return Status();
}

template <typename T>
Status Engine::ShardOut(const Matrix<T>& y, T* shard) {
  if (y.data == shard) return Status();  // the engine worked in the shard
  return MatrixOut(y.data, *y.desc, shard);
}

template <typename T>
Status Engine::FactorOut(const Matrix<T>& f, T* out, int64_t count) {
  if (f.data == out) return Status();  // the engine worked in the shard: kept as it is
  if (plan_->strategy != layout::Strategy::kRelabel) return MatrixOut(f.data, *f.desc, out);
  if (count != f.local_rows * f.local_cols) {
    return JAXMG_ERROR("the factor buffer has " + std::to_string(count) + " entries, not " +
                       std::to_string(f.local_rows * f.local_cols));
  }
  std::memcpy(out, f.data, sizeof(T) * static_cast<size_t>(count));  // the padded engine matrix
  return Status();
}

template <typename T>
Status Engine::MatrixOut(const T* from, const Descriptor& desc, T* shard) {
  // Y[er, ec] = Y_M[π(er), π(ec)] for the matrix Y_M that M (the shards read column-major) would
  // give: the entry at row π(ec), column π(er) of the JAX matrix, in this device's shard
  // (row-major). Padding is dropped.
  const layout::Plan& plan = *plan_;
  const int64_t t = plan.tile, lr = local_rows_, lc = local_cols_;
  // The shard of the matrix handed: cols.extent x rows.extent, in blocks of cols.shard rows
  // and rows.shard columns.
  const int64_t sr = plan.cols.shard, sc = plan.rows.shard;
  const T* y = from;
  T* out = shard;
  if (plan.strategy != layout::Strategy::kRelabel) {
    Descriptor block;
    JAXMG_RETURN_IF_ERROR(MakeDescriptor(*grid_, plan.rows.extent, plan.cols.extent,
                                         plan.rows.shard, plan.cols.shard, plan.rows.shard,
                                         &block));
    return Gemr2d<T>(plan.rows.extent, plan.cols.extent, y, desc, out, block, *grid_);
  }
  const int64_t row0 = u_ * sr, col0 = v_ * sc;
  std::vector<int64_t> col_orig(static_cast<size_t>(lc));
  for (int64_t c = 0; c < lc; ++c) {
    col_orig[c] =
        layout::EngineGlobalToOriginal(
            plan, plan.cols, CyclicAxis{t, grid_->npcol, grid_->mycol}.Global(LocalIndex{c}).value)
            .value;
  }
  for (int64_t r = 0; r < lr; ++r) {
    const int64_t j =
        layout::EngineGlobalToOriginal(
            plan, plan.rows, CyclicAxis{t, grid_->nprow, grid_->myrow}.Global(LocalIndex{r}).value)
            .value;
    if (j < 0) continue;  // padding
    for (int64_t c = 0; c < lc; ++c) {
      const int64_t i = col_orig[c];
      if (i < 0) continue;
      if (i < row0 || i >= row0 + sr || j < col0 || j >= col0 + sc) {
        return JAXMG_ERROR("matrix entry (" + std::to_string(i) + ", " + std::to_string(j) +
                           ") is not in this shard (rows " + std::to_string(row0) + "+" +
                           std::to_string(sr) + ", columns " + std::to_string(col0) + "+" +
                           std::to_string(sc) + ")");
      }
      out[(i - row0) * sc + (j - col0)] = y[r + c * lr];
    }
  }
  return Status();
}

template <typename T>
Status Engine::Adopt(const T* factor, int64_t count, Factorization holds, Matrix<T>* f) {
  const layout::Plan& plan = *plan_;
  if (plan.strategy == layout::Strategy::kRelabel) {
    // FactorOut left the engine-local matrix itself: read it where it is.
    if (count != local_rows_ * local_cols_) {
      return JAXMG_ERROR("the factor has " + std::to_string(count) + " entries here, the engine " +
                         std::to_string(local_rows_ * local_cols_));
    }
    work_ = const_cast<T*>(factor);
    JAXMG_RETURN_IF_ERROR(MakeDescriptor(*grid_, plan.engine_rows(), plan.engine_cols(), plan.tile,
                                         plan.tile, local_rows_, &desc_a_));
    *f = EngineMatrix<T>();
  } else {
    // Redistributed: Prepare reads the JAX layout and writes its own copy.
    if (count != plan.rows.shard * plan.cols.shard)
      return JAXMG_ERROR("the factor has the wrong size");
    JAXMG_RETURN_IF_ERROR(Prepare(const_cast<T*>(factor), f));
  }
  f->factored = holds;
  return Status();
}

template <typename T>
Status Engine::PivotsOut(const Matrix<T>& lu, const Pivots& pivots, int32_t* out) {
  JAXMG_RETURN_IF_ERROR(CheckLu(lu.factored, "PivotsOut"));
  // p?getrf's pivots are tied to the local rows (replicated over process columns): process
  // column 0 writes its rows' entries, summed over the grid.
  const int64_t n = lu.rows, t = lu.tile;
  std::vector<int> piv(static_cast<size_t>(n), 0);
  if (grid_->mycol == 0) {
    for (int64_t r = 0; r < lu.local_rows; ++r) {
      const int64_t g = CyclicAxis{t, grid_->nprow, grid_->myrow}.Global(LocalIndex{r}).value;
      if (g < n) piv[g] = pivots.local[r];
    }
  }
  JAXMG_RETURN_IF_ERROR(AllreduceIntSum(*grid_, piv.data(), n));
  std::copy(piv.begin(), piv.end(), out);
  return Status();
}

template <typename T>
Status Engine::PivotsIn(const int32_t* in, Matrix<T>* lu, Pivots* piv) {
  const int64_t n = lu->rows, t = lu->tile;
  piv->local.assign(static_cast<size_t>(lu->local_rows + t), 0);
  piv->input_nonfinite = 0;
  for (int64_t r = 0; r < lu->local_rows; ++r) {
    const int64_t g = CyclicAxis{t, grid_->nprow, grid_->myrow}.Global(LocalIndex{r}).value;
    if (in[g] < g + 1 || in[g] > n) return JAXMG_ERROR("a kept pivot is out of range");
    piv->local[r] = in[g];
  }
  lu->factored = Factorization::kLu;  // p?getrf's local pivot list
  return Status();
}

template <typename T>
Status Engine::SignLogDet(const Matrix<T>& lu, const Pivots& piv, T* sign, RealOf<T>* logabsdet) {
  using R = RealOf<T>;
  JAXMG_RETURN_IF_ERROR(CheckLu(lu.factored, "SignLogDet"));
  // Over the local diagonal: Σ log|d|, Σ arg d, exact zeros, non-finite entries; and the row
  // interchanges of this process's rows (process column 0 only).
  const int64_t t = lu.tile, n = lu.rows;
  double sums[6] = {0, 0, 0, 0, 0, 0};  // (and [5]: the input held a non-finite entry)
  ForEachLocalDiagonal<T>(lu, [&](int64_t, const T& d) {
    const double m = static_cast<double>(std::abs(d));
    if (!std::isfinite(m)) {
      sums[3] += 1;
    } else if (m == 0.0) {
      sums[2] += 1;
    } else {
      sums[0] += std::log(m);
      sums[1] += Arg(d);
    }
  });
  // Anywhere in the factor, not only on the diagonal; and in the input.
  if (FirstNonFiniteColumn<T>(lu) > 0) sums[3] += 1;
  if (piv.input_nonfinite > 0) sums[5] += 1;
  if (grid_->mycol == 0) {
    for (int64_t r = 0; r < lu.local_rows; ++r) {
      const int64_t g = CyclicAxis{t, grid_->nprow, grid_->myrow}.Global(LocalIndex{r}).value;
      if (g < n && piv.local[r] != g + 1) sums[4] += 1;
    }
  }
  JAXMG_RETURN_IF_ERROR(AllreduceSum<double>(*grid_, sums, 6));
  const int parity =
      (static_cast<int64_t>(std::llround(sums[4])) + layout::RelabelParity(*plan_)) % 2;
  const bool nonfinite = SlogdetNonFinite(sums[5] > 0, sums[3] > 0, sums[2] > 0);
  *sign = SignOf<T>(sums[1], parity, sums[2] > 0, nonfinite);
  const R nan = std::numeric_limits<R>::quiet_NaN(), inf = std::numeric_limits<R>::infinity();
  *logabsdet = nonfinite ? nan : sums[2] > 0 ? -inf : static_cast<R>(sums[0]);
  return Status();
}

template <typename T>
Status Engine::AgreeQr(const Matrix<T>& a, bool rank_fails, int* info) {
  int64_t first = FirstNonFiniteColumn<T>(a);
  if (rank_fails) {
    const int64_t n = plan_->cols.extent;
    ForEachLocalDiagonal<T>(a, [&](int64_t g, const T& d) {
      if (g < n && std::abs(d) == RealOf<T>(0) && (first == 0 || g < first)) first = g + 1;
    });
  }
  *info = static_cast<int>(std::min<int64_t>(first, std::numeric_limits<int>::max()));
  return AllreduceMax(*grid_, info);
}

bool Engine::UseOwnQr() const {
  // The 1-D QR needs every engine row on every process: a 1 x P grid (measured:
  // bench/cpu_own.py --routine qr); config.cpu_qr = scalapack keeps p?geqrf and p?orgqr.
  return config_.cpu_qr != Choice::kLibrary && grid_->nprow == 1 &&
         local_rows_ >= plan_->engine_rows();
}

algorithms::Distribution Engine::QrDistribution() const {
  return DistributionOf(plan_->engine_rows(), plan_->cols.extent, local_rows_);
}

template <typename T>
Status Engine::Geqrf(Matrix<T>* a, Reflectors* tau, int* info) {
  *info = 0;
  a->factored = Factorization::kQr;
  if (UseOwnQr()) {
    // The 1-D QR with look-ahead (algorithms/qr_1d.h): the factors as p?geqrf leaves them, and
    // what its Q needs kept in its backend's buffers for Orgqr.
    tau->backend = std::make_unique<Backend>(*grid_);
    algorithms::Qr1DFactors<T> f;
    JAXMG_RETURN_IF_ERROR(
        algorithms::Qr1D(*tau->backend, QrDistribution(), /*ib=*/plan_->tile, a->data, &f));
    tau->own = algorithms::Qr1DKept::Of(f);
    return AgreeQr<T>(*a, /*rank_fails=*/false, info);
  }
  tau->tau.assign(sizeof(T) * static_cast<size_t>(a->local_cols + a->tile), 0);
  JAXMG_RETURN_IF_ERROR(scalapack::Geqrf<T>(a->rows, plan_->cols.extent, a->data, *a->desc,
                                            As<T>(tau->tau.data()), info));
  return AgreeQr<T>(*a, /*rank_fails=*/false, info);
}

template <typename T>
Status Engine::Orgqr(Matrix<T>* a, const Reflectors& tau) {
  if (a->factored != Factorization::kQr) {
    return JAXMG_ERROR("Orgqr: the matrix handed holds no QR factorization");
  }
  a->factored = Factorization::kNone;
  if (!tau.own.empty()) {  // the 1-D QR's τ and T_k
    return algorithms::Orgqr1D(*tau.backend, QrDistribution(), a->data, tau.own.As<T>());
  }
  int info = 0;
  return scalapack::Orgqr<T>(a->rows, plan_->cols.extent, a->data, *a->desc,
                             reinterpret_cast<const T*>(tau.tau.data()), &info);
}

template <typename T>
Status Engine::Gels(Matrix<T>* a, const Matrix<T>& c, Matrix<T>* z, int* info) {
  *info = 0;
  a->factored = Factorization::kQr;
  *z = c;  // solved in place
  JAXMG_RETURN_IF_ERROR(scalapack::Gels<T>(a->rows, plan_->cols.extent, c.cols, a->data, *a->desc,
                                           c.data, *c.desc, info));
  return AgreeQr<T>(*a, /*rank_fails=*/true, info);
}

template <typename T>
Status Engine::LeadingRowsOut(const Matrix<T>& y, T* x, int64_t x_rows) {
  // R: the factor's leading cols.extent columns; a solution: all its columns.
  const int64_t cols = y.factored == Factorization::kQr ? plan_->cols.extent : y.cols;
  return RowsOut<T>(y.data, y.local_rows, y.local_cols, cols, x, x_rows, cols);
}

template <typename T>
Status Engine::RowsOut(const T* local, int64_t ld, int64_t lc, int64_t cols, T* x, int64_t x_rows,
                       int64_t x_cols) {
  const int64_t n = plan_->cols.extent, t = plan_->tile;
  const int64_t first = x_rows == n ? 0 : x_rows * (rhs_by_cols_ ? v_ : u_);
  // Chunks of rows (R alone is n x n): each entry is held by one process, so the sum over the
  // grid assembles a chunk on every rank, which keeps its part of its block.
  const int64_t chunk = RowsPerChunk(int64_t{1} << 28, sizeof(T) * cols, n, config_.rows_per_chunk);
  std::vector<T> part(static_cast<size_t>(chunk * cols));
  T* out = x;
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t r1 = std::min(n, r0 + chunk);
    std::fill(part.begin(), part.end(), T(0));
    for (int64_t r = 0; r < ld; ++r) {
      const int64_t g = CyclicAxis{t, grid_->nprow, grid_->myrow}.Global(LocalIndex{r}).value;
      if (g < r0 || g >= r1) continue;
      for (int64_t c = 0; c < lc; ++c) {
        const int64_t gc = CyclicAxis{t, grid_->npcol, grid_->mycol}.Global(LocalIndex{c}).value;
        if (gc < cols) part[(g - r0) * cols + gc] = local[r + c * ld];
      }
    }
    JAXMG_RETURN_IF_ERROR(AllreduceSum<T>(*grid_, part.data(), (r1 - r0) * cols));
    const int64_t lo = std::max(r0, first), hi = std::min(r1, first + x_rows);
    for (int64_t g = lo; g < hi; ++g) {
      std::memcpy(out + (g - first) * x_cols, part.data() + (g - r0) * cols, sizeof(T) * cols);
    }
  }
  return Status();
}

template <typename T>
Status Engine::NewMatrix(int64_t rows, int64_t cols, Matrix<T>* out) {
  const int64_t t = plan_->tile;
  const int64_t lr = CyclicAxis{t, grid_->nprow, grid_->myrow}.Extent(rows);
  const int64_t lc = CyclicAxis{t, grid_->npcol, grid_->mycol}.Extent(cols);
  descriptors_.emplace_back();
  JAXMG_RETURN_IF_ERROR(MakeDescriptor(*grid_, rows, cols, t, t, lr, &descriptors_.back()));
  matrices_.emplace_back(sizeof(T) * static_cast<size_t>(std::max<int64_t>(lr * lc, 1)), 0);
  *out = Matrix<T>::Of(As<T>(matrices_.back().data()), &descriptors_.back(), rows, cols, lr, lc, t);
  return Status();
}

template <typename T>
Status Engine::MatrixIn(const T* shard, Matrix<T>* k) {
  return RhsMatrixIn<T>(shard, plan_->rows.extent, k);
}

template <typename T>
Status Engine::RhsMatrixIn(const T* b, int64_t rows, Matrix<T>* c) {
  const layout::Plan& plan = *plan_;
  if (plan.strategy != layout::Strategy::kRedistribute) {
    return JAXMG_ERROR("a second matrix is read into a redistributed plan only");
  }
  // The shards of b read column-major: blocks of rows / mesh_cols x cols.shard of Bᵀ, block
  // (v, u) on mesh position (u, v), as the engine matrix's (Prepare).
  const int64_t n = plan.cols.extent, block = rows / plan.mesh_cols;
  JAXMG_RETURN_IF_ERROR(NewMatrix<T>(rows, n, c));
  Descriptor src;
  JAXMG_RETURN_IF_ERROR(MakeDescriptor(*grid_, rows, n, block, plan.cols.shard, block, &src));
  return Gemr2d<T>(rows, n, static_cast<const T*>(b), src, c->data, *c->desc, *grid_);
}

template <typename T>
Status Engine::RhsMatrixOut(const Matrix<T>& c, T* x) {
  const layout::Plan& plan = *plan_;
  const int64_t n = c.cols, block = c.rows / plan.mesh_cols;
  Descriptor dst;
  JAXMG_RETURN_IF_ERROR(MakeDescriptor(*grid_, c.rows, n, block, plan.cols.shard, block, &dst));
  return Gemr2d<T>(c.rows, n, c.data, *c.desc, x, dst, *grid_);
}

template <typename T>
Status Engine::Trsm(char side, char uplo, char op, char diag, const Matrix<T>& m,
                    const Matrix<T>& c, int* info) {
  // The status from the diagonal alone (the other triangle may hold anything), agreed.
  int64_t first = 0;  // 1-based; the local diagonal is walked in increasing global order
  if (diag != 'U') {
    ForEachLocalDiagonal<T>(m, [&](int64_t g, const T& d) {
      const double m = static_cast<double>(std::abs(d));
      if (first == 0 && (!(m > 0.0) || !std::isfinite(m))) first = g + 1;
    });
  }
  *info = static_cast<int>(std::min<int64_t>(first, std::numeric_limits<int>::max()));
  JAXMG_RETURN_IF_ERROR(AllreduceMax(*grid_, info));
  if (*info != 0) return Status();
  const char o = Scalar<T>::kParts == 1 && op == 'C' ? 'T' : op;  // real: the transpose
  return scalapack::Trsm<T>(side, uplo, o, diag, c.rows, c.cols, T(1), m.data, *m.desc, c.data,
                            *c.desc);
}

template <typename T>
Status Engine::Gemm(char op_b, const Matrix<T>& k, char op_a, const Matrix<T>& m, Matrix<T>* c) {
  // Real types: a conjugate transpose is a transpose.
  const auto op = [](char o) { return Scalar<T>::kParts == 1 && o == 'C' ? 'T' : o; };
  const int64_t n = m.rows;
  JAXMG_RETURN_IF_ERROR(NewLike<T>(m, c));
  return scalapack::Gemm<T>(op(op_b), op(op_a), n, n, n, T(1), k.data, *k.desc, m.data, *m.desc,
                            T(0), c->data, *c->desc);
}

template <typename T>
Status Engine::Sygvd(const Matrix<T>& m, const Matrix<T>& k, bool vectors, EigenRange subset, T* x,
                     Matrix<T>* z, int* info) {
  using R = RealOf<T>;
  const int64_t n = m.rows, lr = m.local_rows, lc = m.local_cols;
  *z = Matrix<T>();
  std::vector<R> w(static_cast<size_t>(n), std::numeric_limits<R>::quiet_NaN());
  T* out = x;
  auto write = [&] {
    for (int64_t i = 0; i < n; ++i) out[i] = T(w[i]);
  };
  // Non-finite entries of either matrix are agreed on first: nothing is solved then.
  int bad = static_cast<int>(std::min<int64_t>(FirstNonFiniteColumn<T>(m), INT32_MAX));
  const T* kk = k.data;
  for (int64_t i = 0; i < lr * lc && bad == 0; ++i) {
    if (!std::isfinite(static_cast<double>(std::abs(kk[i])))) bad = 1;
  }
  JAXMG_RETURN_IF_ERROR(AllreduceMax(*grid_, &bad));
  *info = bad;
  if (bad != 0) {
    write();
    return Status();
  }
  // K = L Lᴴ: a K that is not positive definite is status n + (the order of its minor).
  int kinfo = 0;
  JAXMG_RETURN_IF_ERROR(scalapack::Potrf<T>(n, k.data, *k.desc, &kinfo));
  kinfo = kinfo > 0 ? static_cast<int>(std::min<int64_t>(n + kinfo, INT32_MAX)) : 0;
  JAXMG_RETURN_IF_ERROR(AllreduceMax(*grid_, &kinfo));
  *info = kinfo;
  if (kinfo != 0) {
    write();
    return Status();
  }
  // M := L⁻¹ M L⁻ᴴ, its eigenpairs (y), and z = L⁻ᴴ y.
  R scale = 1;
  int sinfo = 0;
  JAXMG_RETURN_IF_ERROR(scalapack::Sygst<T>(n, m.data, *m.desc, k.data, *k.desc, &scale, &sinfo));
  Matrix<T> y;  // the eigenvectors of L⁻¹ M L⁻ᴴ, then z (distributed as k)
  JAXMG_RETURN_IF_ERROR(NewLike<T>(k, &y));
  if (subset.all()) {
    JAXMG_RETURN_IF_ERROR(
        scalapack::Eigh<T>(vectors, n, lr, lc, m.data, *m.desc, w.data(), y.data, *y.desc, info));
  } else {
    JAXMG_RETURN_IF_ERROR(scalapack::EighSubset<T>(*grid_, vectors, n, subset.lo, subset.hi, m.data,
                                                   *m.desc, w.data(), y.data, *y.desc, info));
  }
  const int64_t found = subset.all() ? n : subset.hi - subset.lo;
  for (int64_t i = 0; i < found && *info == 0; ++i) {
    if (!std::isfinite(w[i])) *info = static_cast<int>(std::min<int64_t>(i + 1, INT32_MAX));
  }
  JAXMG_RETURN_IF_ERROR(AllreduceMax(*grid_, info));
  for (R& v : w) v *= scale;
  write();
  if (*info != 0 || !vectors) return Status();
  const char adjoint = Scalar<T>::kParts == 2 ? 'C' : 'T';
  JAXMG_RETURN_IF_ERROR(
      scalapack::Trsm<T>('L', 'L', adjoint, 'N', n, found, T(1), k.data, *k.desc, y.data, *y.desc));
  *z = y;
  return Status();
}

template <typename T>
Status Engine::SquareRowsOut(const Matrix<T>& s, T* x, int64_t x_rows, int64_t x_cols) {
  return RowsOut<T>(s.data, s.local_rows, s.local_cols, s.cols, x, x_rows, x_cols);
}

template <typename T>
Status Engine::Eigh(const Matrix<T>& a, bool vectors, EigenRange subset, T* x, Matrix<T>* z,
                    int* info) {
  using R = RealOf<T>;
  const layout::Plan& plan = *plan_;
  if (plan.strategy != layout::Strategy::kRedistribute) {
    return JAXMG_ERROR("the eigensolver runs on a redistributed matrix");
  }
  const int64_t n = a.rows, lr = a.local_rows, lc = a.local_cols;
  // A non-finite input is agreed on first: the solver is not run on it.
  int bad = static_cast<int>(std::min<int64_t>(FirstNonFiniteColumn<T>(a), INT32_MAX));
  JAXMG_RETURN_IF_ERROR(AllreduceMax(*grid_, &bad));
  std::vector<R> w(static_cast<size_t>(n), std::numeric_limits<R>::quiet_NaN());
  JAXMG_RETURN_IF_ERROR(NewLike<T>(a, z));  // the eigenvectors (also Stedc's scratch)
  *info = bad;
  // A subset's pairs alone, first in w and z: by the two stages where they apply (Q₂ and Q₁ on
  // the k columns), else p?syevr (MRRR on the k).
  if (bad == 0 && UseTwoStage(vectors, !subset.all())) {
    JAXMG_RETURN_IF_ERROR(TwoStageEigh<T>(a, vectors, subset, w.data(), *z, info));
  } else if (bad == 0 && !subset.all()) {
    JAXMG_RETURN_IF_ERROR(scalapack::EighSubset<T>(*grid_, vectors, n, subset.lo, subset.hi, a.data,
                                                   *a.desc, w.data(), z->data, *z->desc, info));
  } else if (bad == 0) {
    JAXMG_RETURN_IF_ERROR(
        scalapack::Eigh<T>(vectors, n, lr, lc, a.data, *a.desc, w.data(), z->data, *z->desc, info));
  }
  if (!vectors) *z = Matrix<T>();
  const int64_t found = subset.all() ? n : subset.hi - subset.lo;
  if (bad == 0) {
    for (int64_t i = 0; i < found && *info == 0; ++i) {
      if (!std::isfinite(w[i])) *info = static_cast<int>(std::min<int64_t>(i + 1, INT32_MAX));
    }
    JAXMG_RETURN_IF_ERROR(AllreduceMax(*grid_, info));
  }
  T* out = x;
  for (int64_t i = 0; i < n; ++i) out[i] = T(w[i]);
  return Status();
}

template <typename T>
Status Engine::VectorsOut(const Matrix<T>& z, const Matrix<T>& work, T* shard) {
  // work := Zᴴ, then back to the block layout.
  const T* from = z.data;
  if (!z.adjoint) {
    JAXMG_RETURN_IF_ERROR(scalapack::Adjoint<T>(z.rows, z.data, *z.desc, work.data, *work.desc));
    from = work.data;
  }
  return MatrixOut(from, *work.desc, shard);
}

template <typename T>
Status Engine::FillNan(T* x, int64_t count) {
  std::fill(x, x + count, T(std::numeric_limits<RealOf<T>>::quiet_NaN()));
  return Status();
}

Status Engine::Finish(const Status& result) {
  // Every rank stays in MPI until all have finished the call: BLACS leaves asynchronous sends
  // that complete only while their sender calls MPI (a rank that returned to Python after its
  // last ScaLAPACK call left the others waiting inside it). A failure of one rank's last, local
  // step becomes everyone's.
  int failed = result.ok() ? 0 : 1;
  JAXMG_RETURN_IF_ERROR(AllreduceMax(*grid_, &failed));
  if (!result.ok()) return result;
  if (failed) return Status::Error("jaxmg: another process of this mesh failed in this call");
  return Status();
}

Status Engine::WriteStatus(int info, int32_t* status) {
  *status = info;
  return Status();
}

#define JAXMG_INSTANTIATE_ENGINE_STEPS(T)                                                         \
  template Status Engine::Asymmetric<T>(const T* shard, bool* out);                               \
  template Status Engine::CheckSymmetry<T>(const T* shard);                                       \
  template Status Engine::Prepare<T>(T * shard, Matrix<T> * a);                                   \
  template Status Engine::RhsIn<T>(const T* b, int64_t nrhs, Axis axis, bool conj, Matrix<T>* c); \
  template Status Engine::RhsOut<T>(const Matrix<T>& z, T* x, Axis axis, bool conj);              \
  template Status Engine::Identity<T>(const Matrix<T>& like, Matrix<T>* out);                     \
  template Status Engine::MatrixIn<T>(const T* shard, Matrix<T>* k);                              \
  template Status Engine::RhsMatrixIn<T>(const T* b, int64_t rows, Matrix<T>* c);                 \
  template Status Engine::RhsMatrixOut<T>(const Matrix<T>& c, T* x);                              \
  template Status Engine::Potrf<T>(Matrix<T> * a, int* info);                                     \
  template Status Engine::Getrf<T>(Matrix<T> * a, Pivots * piv, int* info);                       \
  template Status Engine::Potrs<T>(const Matrix<T>& l, const Matrix<T>& c);                       \
  template Status Engine::Getrs<T>(const Matrix<T>& lu, const Pivots& piv, const Matrix<T>& c,    \
                                   bool transpose);                                               \
  template Status Engine::CholeskyInverse<T>(const Matrix<T>& l, Matrix<T>* inverse);             \
  template Status Engine::InverseSolve<T>(const Matrix<T>& lu, const Pivots& piv, bool transpose, \
                                          Matrix<T>* inverse);                                    \
  template Status Engine::Trsm<T>(char side, char uplo, char op, char diag, const Matrix<T>& m,   \
                                  const Matrix<T>& c, int* info);                                 \
  template Status Engine::Gemm<T>(char op_b, const Matrix<T>& k, char op_a, const Matrix<T>& m,   \
                                  Matrix<T>* c);                                                  \
  template Status Engine::LogAbsDiag<T>(const Matrix<T>& a, double scale, bool ok,                \
                                        RealOf<T>* out);                                          \
  template Status Engine::SignLogDet<T>(const Matrix<T>& lu, const Pivots& piv, T* sign,          \
                                        RealOf<T>* logabsdet);                                    \
  template Status Engine::FactorOut<T>(const Matrix<T>& f, T* out, int64_t count);                \
  template Status Engine::Adopt<T>(const T* factor, int64_t count, Factorization holds,           \
                                   Matrix<T>* f);                                                 \
  template Status Engine::Geqrf<T>(Matrix<T> * a, Reflectors * tau, int* info);                   \
  template Status Engine::Orgqr<T>(Matrix<T> * a, const Reflectors& tau);                         \
  template Status Engine::Gels<T>(Matrix<T> * a, const Matrix<T>& c, Matrix<T>* z, int* info);    \
  template Status Engine::Eigh<T>(const Matrix<T>& a, bool vectors, EigenRange subset, T* x,      \
                                  Matrix<T>* z, int* info);                                       \
  template Status Engine::Sygvd<T>(const Matrix<T>& m, const Matrix<T>& k, bool vectors,          \
                                   EigenRange subset, T* x, Matrix<T>* z, int* info);             \
  template Status Engine::ShardOut<T>(const Matrix<T>& y, T* shard);                              \
  template Status Engine::LeadingRowsOut<T>(const Matrix<T>& y, T* x, int64_t x_rows);            \
  template Status Engine::VectorsOut<T>(const Matrix<T>& z, const Matrix<T>& work, T* shard);     \
  template Status Engine::SquareRowsOut<T>(const Matrix<T>& s, T* x, int64_t x_rows,              \
                                           int64_t x_cols);                                       \
  template Status Engine::FillNan<T>(T * x, int64_t count);                                       \
  template Status Engine::PivotsOut<T>(const Matrix<T>& lu, const Pivots& piv, int32_t* out);     \
  template Status Engine::PivotsIn<T>(const int32_t* in, Matrix<T>* lu, Pivots* piv);             \
  template int64_t Engine::FirstNonFiniteColumn<T>(const Matrix<T>&) const;                       \
  template Status Engine::NewMatrix<T>(int64_t, int64_t, Matrix<T>*);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_ENGINE_STEPS)
#undef JAXMG_INSTANTIATE_ENGINE_STEPS

}  // namespace jaxmg::scalapack
