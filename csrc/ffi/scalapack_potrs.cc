// jaxmg_scalapack_potrs: Cholesky solve with log-determinant on the CPU engine.
//
// Runs once per process on its local shards (inside shard_map):
//   plan -> engine-local matrix (relabel in place, pad, or redistribute) -> p?potrf ->
//   status consensus -> logdet -> right-hand side in -> p?potrs -> solution out.
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "engines/scalapack/scalapack.h"
#include "ffi/dispatch.h"
#include "ffi/potrs_binding.h"
#include "layout/layout.h"
#include "xla/ffi/api/ffi.h"

namespace jaxmg {
namespace {

namespace ffi = ::xla::ffi;
namespace sl = ::jaxmg::scalapack;
using layout::CyclicGlobal;
using layout::CyclicLocalExtent;
using layout::LocalIndex;
using layout::Strategy;
using layout::SymmetricPlan;

template <typename T>
struct Real {
  using type = T;
};
template <typename R>
struct Real<std::complex<R>> {
  using type = R;
};

template <typename T>
T Conj(T v) {
  return v;
}
template <typename R>
std::complex<R> Conj(std::complex<R> v) {
  return std::conj(v);
}

template <typename T>
typename Real<T>::type RealPart(T v) {
  return std::real(v);
}

struct PotrsAttrs {
  int64_t n, mesh_rows, mesh_cols, tile, nrhs;
  bool pad;
  int u, v;                // this process's mesh position
  std::vector<int> ranks;  // world rank of mesh position (u, v) at u * mesh_cols + v; empty: gather
};

template <typename T>
Status PotrsImpl(const PotrsAttrs& at, T* a, const T* b, T* x, typename Real<T>::type* logdet,
                 int32_t* status) {
  using R = typename Real<T>::type;
  SymmetricPlan plan;
  JAXMG_RETURN_IF_ERROR(layout::MakeSymmetricPlan(at.n, static_cast<int>(at.mesh_rows),
                                                  static_cast<int>(at.mesh_cols), at.tile, at.pad,
                                                  &plan));
  const int mr = plan.mesh_rows, mc = plan.mesh_cols;
  auto lock = sl::EngineLock();
  JAXMG_RETURN_IF_ERROR(sl::EnsureMpi());
  const int u = at.u, v = at.v;
  std::vector<int> ranks = at.ranks;
  if (ranks.empty()) JAXMG_RETURN_IF_ERROR(sl::GatherMeshRanks(u * mc + v, mr * mc, &ranks));
  if (ranks[u * mc + v] != sl::WorldRank()) {
    return JAXMG_ERROR("mesh position (" + std::to_string(u) + ", " + std::to_string(v) +
                       ") is not this process's: JAX process indices must equal MPI ranks");
  }

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
  const sl::Grid* grid = nullptr;
  JAXMG_RETURN_IF_ERROR(sl::GetGrid(grid_ranks, nprow, npcol, &grid));
  const int myrow = grid->myrow, mycol = grid->mycol;
  const int64_t t = plan.tile, np = plan.padded_n;
  const int64_t lr = layout::EngineLocalExtent(plan, plan.rows, myrow);
  const int64_t lc = layout::EngineLocalExtent(plan, plan.cols, mycol);

  // 1. The engine-local matrix.
  std::vector<T> owned;
  T* work = a;
  if (plan.strategy == Strategy::kRelabel) {
    if (plan.padded) {
      owned.resize(static_cast<size_t>(lr * lc));
      work = owned.data();
    }
    std::vector<T> scratch(static_cast<size_t>(layout::PrepareLocalScratch(plan, u, v)));
    layout::PrepareLocal<T>(plan, u, v, a, work, scratch.data());
  } else {
    owned.resize(static_cast<size_t>(std::max<int64_t>(lr * lc, 1)));
    work = owned.data();
    sl::Descriptor src, dst;
    JAXMG_RETURN_IF_ERROR(sl::MakeDescriptor(*grid, plan.n, plan.n, plan.rows.shard,
                                             plan.cols.shard, plan.rows.shard, &src));
    JAXMG_RETURN_IF_ERROR(sl::MakeDescriptor(*grid, plan.n, plan.n, t, t, lr, &dst));
    JAXMG_RETURN_IF_ERROR(sl::Gemr2d<T>(plan.n, plan.n, a, src, work, dst, *grid));
  }

  // 2. Factor; every rank agrees on the status.
  sl::Descriptor desc_a;
  JAXMG_RETURN_IF_ERROR(sl::MakeDescriptor(*grid, np, np, t, t, lr, &desc_a));
  int info = 0;
  JAXMG_RETURN_IF_ERROR(sl::Potrf<T>(np, work, desc_a, &info));
  JAXMG_RETURN_IF_ERROR(sl::AllreduceMax(*grid, &info));

  // 3. log det A = 2 sum log L_ii (padding contributes log 1 = 0).
  R local_logdet = 0;
  if (info == 0) {
    for (int64_t c = 0; c < lc; ++c) {
      const int64_t gc = CyclicGlobal(c, t, npcol, mycol);
      const int64_t owner_row = (gc / t) % nprow;
      if (owner_row != myrow) continue;
      const int64_t r = (gc / t / nprow) * t + gc % t;
      local_logdet += std::log(RealPart(work[r + c * lr]));
    }
  }
  JAXMG_RETURN_IF_ERROR(sl::AllreduceSum<R>(*grid, &local_logdet, 1));

  // 4. Right-hand side: the engine holds conj(A) (see layout.h), so it solves conj(A) y = conj(b).
  const int64_t nrhs = at.nrhs;
  const int64_t shard_rows = plan.n / mr;
  std::vector<T> full(static_cast<size_t>(plan.n * nrhs), T(0));
  if (v == 0) {
    std::copy(b, b + shard_rows * nrhs, full.begin() + u * shard_rows * nrhs);
  }
  JAXMG_RETURN_IF_ERROR(sl::AllreduceSum<T>(*grid, full.data(), plan.n * nrhs));
  const int64_t lbc = CyclicLocalExtent(nrhs, t, mycol, npcol);
  std::vector<T> local_b(static_cast<size_t>(std::max<int64_t>(lr * lbc, 1)), T(0));
  std::vector<int64_t> row_global(static_cast<size_t>(lr));
  for (int64_t r = 0; r < lr; ++r) {
    row_global[r] = layout::EngineToGlobal(plan, plan.rows, myrow, LocalIndex{r}).value;
  }
  for (int64_t c = 0; c < lbc; ++c) {
    const int64_t j = CyclicGlobal(c, t, npcol, mycol);
    for (int64_t r = 0; r < lr; ++r) {
      if (row_global[r] >= 0) local_b[r + c * lr] = Conj(full[row_global[r] * nrhs + j]);
    }
  }

  // 5. Solve and bring the solution back to the JAX layout of b.
  if (info == 0) {
    sl::Descriptor desc_b;
    JAXMG_RETURN_IF_ERROR(sl::MakeDescriptor(*grid, np, nrhs, t, t, lr, &desc_b));
    int solve_info = 0;
    JAXMG_RETURN_IF_ERROR(
        sl::Potrs<T>(np, nrhs, work, desc_a, local_b.data(), desc_b, &solve_info));
  }
  std::fill(full.begin(), full.end(), T(0));
  for (int64_t c = 0; c < lbc; ++c) {
    const int64_t j = CyclicGlobal(c, t, npcol, mycol);
    for (int64_t r = 0; r < lr; ++r) {
      if (row_global[r] >= 0) full[row_global[r] * nrhs + j] = Conj(local_b[r + c * lr]);
    }
  }
  JAXMG_RETURN_IF_ERROR(sl::AllreduceSum<T>(*grid, full.data(), plan.n * nrhs));

  if (info != 0) {
    const R nan = std::numeric_limits<R>::quiet_NaN();
    std::fill(x, x + shard_rows * nrhs, T(nan));
    *logdet = nan;
  } else {
    std::copy(full.begin() + u * shard_rows * nrhs, full.begin() + (u + 1) * shard_rows * nrhs, x);
    *logdet = 2 * local_logdet;
  }
  *status = info;
  return Status();
}

ffi::Error PotrsDispatch(ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::Buffer<ffi::S32> position,
                         ffi::Result<ffi::AnyBuffer> a_work, ffi::Result<ffi::AnyBuffer> x,
                         ffi::Result<ffi::AnyBuffer> logdet,
                         ffi::Result<ffi::Buffer<ffi::S32>> status, int64_t n, int64_t mesh_rows,
                         int64_t mesh_cols, int64_t tile, int64_t pad,
                         ffi::Span<const int64_t> ranks) {
  if (ranks.size() != 0 && static_cast<int64_t>(ranks.size()) != mesh_rows * mesh_cols) {
    return ffi::Error::InvalidArgument("jaxmg_scalapack_potrs: ranks has the wrong size");
  }
  if (a.element_type() != b.element_type() || a.element_type() != x->element_type()) {
    return ffi::Error::InvalidArgument("jaxmg_scalapack_potrs: a, b and x must share a dtype");
  }
  auto b_dims = b.dimensions();
  if (b_dims.size() != 2)
    return ffi::Error::InvalidArgument("jaxmg_scalapack_potrs: b must be 2-D");
  if (position.element_count() != 2) {
    return ffi::Error::InvalidArgument("jaxmg_scalapack_potrs: position must hold (u, v)");
  }
  PotrsAttrs at{n,
                mesh_rows,
                mesh_cols,
                tile,
                b_dims[1],
                pad != 0,
                position.typed_data()[0],
                position.typed_data()[1],
                {}};
  at.ranks.assign(ranks.begin(), ranks.end());
  Status s = ffi_util::DispatchFloating(a.element_type(), "potrs", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using R = typename Real<T>::type;
    return PotrsImpl<T>(at, static_cast<T*>(a_work->untyped_data()),
                        static_cast<const T*>(b.untyped_data()), static_cast<T*>(x->untyped_data()),
                        static_cast<R*>(logdet->untyped_data()), status->typed_data());
  });
  return ffi_util::ToFfi(s);
}

}  // namespace
}  // namespace jaxmg

XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxmg_scalapack_potrs, jaxmg::PotrsDispatch,
                              jaxmg::ffi_util::BindPotrs(xla::ffi::Ffi::Bind()));

extern "C" {
__attribute__((visibility("default"))) int jaxmg_mpi_init(char* err, int err_len) {
  auto lock = jaxmg::scalapack::EngineLock();
  jaxmg::Status s = jaxmg::scalapack::EnsureMpi();
  if (s.ok()) return 0;
  if (err && err_len > 0) {
    snprintf(err, err_len, "%s", s.message().c_str());
  }
  return 1;
}
__attribute__((visibility("default"))) int jaxmg_mpi_rank() {
  return jaxmg::scalapack::WorldRank();
}
__attribute__((visibility("default"))) int jaxmg_mpi_size() {
  return jaxmg::scalapack::WorldSize();
}
__attribute__((visibility("default"))) void jaxmg_mpi_finalize() {
  jaxmg::scalapack::FinalizeMpi();
}
}
