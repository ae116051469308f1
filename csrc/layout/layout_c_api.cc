// A small C interface to the layout core, used by the tests (through ctypes) to check the index
// maps and the local transforms against a NumPy model. Not used by the engines.
#include <cstdint>
#include <cstring>

#include "layout/layout.h"

namespace {

using jaxmg::Status;
using jaxmg::layout::Plan;
using jaxmg::layout::Symmetry;

// kind: bit 0 = general (else symmetric), bit 1 = force the redistribution.
Status MakePlan(int64_t n, int mesh_rows, int mesh_cols, int64_t tile, int allow_pad, int kind,
                Plan* plan) {
  return jaxmg::layout::MakePlan((kind & 1) ? Symmetry::kGeneral : Symmetry::kSymmetric, n, n,
                                 mesh_rows, mesh_cols, tile, allow_pad != 0, (kind & 2) != 0, plan);
}

int Fail(const Status& s, char* err, int err_len) {
  if (err && err_len > 0) {
    std::strncpy(err, s.message().c_str(), err_len - 1);
    err[err_len - 1] = 0;
  }
  return 1;
}

}  // namespace

extern "C" {

// info[0..7] = strategy, padded order, grid_rows, grid_cols, padded (0/1),
//              row local permutation (0/1), col local permutation (0/1), engine tiles per axis
__attribute__((visibility("default"))) int jaxmg_layout_plan(int64_t n, int mesh_rows,
                                                             int mesh_cols, int64_t tile,
                                                             int allow_pad, int kind, int64_t* info,
                                                             char* err, int err_len) {
  Plan plan;
  Status s = MakePlan(n, mesh_rows, mesh_cols, tile, allow_pad, kind, &plan);
  if (!s.ok()) return Fail(s, err, err_len);
  info[0] = static_cast<int64_t>(plan.strategy);
  info[1] = plan.rows.padded_extent;
  info[2] = plan.grid_rows();
  info[3] = plan.grid_cols();
  info[4] = plan.padded;
  info[5] = plan.rows.local_permutation;
  info[6] = plan.cols.local_permutation;
  info[7] = static_cast<int64_t>(plan.rows.source_tile.size());
  return 0;
}

// For mesh position (u, v): grid[0..1] = its engine grid (row, col); extents[0..1] = engine-local
// rows, cols; row_map / col_map (sized by extents) = original global index or -1 for padding.
__attribute__((visibility("default"))) int jaxmg_layout_process(
    int64_t n, int mesh_rows, int mesh_cols, int64_t tile, int allow_pad, int kind, int u, int v,
    int* grid, int64_t* extents, int64_t* row_map, int64_t* col_map, char* err, int err_len) {
  Plan plan;
  Status s = MakePlan(n, mesh_rows, mesh_cols, tile, allow_pad, kind, &plan);
  if (!s.ok()) return Fail(s, err, err_len);
  grid[0] = plan.rows.grid_of_mesh[v];
  grid[1] = plan.cols.grid_of_mesh[u];
  extents[0] = jaxmg::layout::EngineLocalExtent(plan, plan.rows, grid[0]);
  extents[1] = jaxmg::layout::EngineLocalExtent(plan, plan.cols, grid[1]);
  if (row_map) {
    for (int64_t i = 0; i < extents[0]; ++i) {
      row_map[i] = jaxmg::layout::EngineToGlobal(plan, plan.rows, grid[0], {i}).value;
    }
  }
  if (col_map) {
    for (int64_t i = 0; i < extents[1]; ++i) {
      col_map[i] = jaxmg::layout::EngineToGlobal(plan, plan.cols, grid[1], {i}).value;
    }
  }
  return 0;
}

// Runs the engines' local preparation (padding + local tile permutation) on a float64 shard
// (row-major, n/mesh_rows x n/mesh_cols) into `out` (column-major engine-local array).
__attribute__((visibility("default"))) int jaxmg_layout_prepare_local_f64(
    int64_t n, int mesh_rows, int mesh_cols, int64_t tile, int allow_pad, int kind, int u, int v,
    const double* shard, double* out, char* err, int err_len) {
  Plan plan;
  Status s = MakePlan(n, mesh_rows, mesh_cols, tile, allow_pad, kind, &plan);
  if (!s.ok()) return Fail(s, err, err_len);
  if (plan.strategy != jaxmg::layout::Strategy::kRelabel) {
    return Fail(Status::Error("local preparation applies to relabeled plans only"), err, err_len);
  }
  std::vector<double> scratch(jaxmg::layout::PrepareLocalScratch(plan, u, v));
  jaxmg::layout::PrepareLocal<double>(plan, u, v, shard, out, scratch.data());
  return 0;
}

// One axis of a block-cyclic remap (layout::AxisExchange) for process `me` of `procs`:
// counts[q] = |send[q]| and counts[procs + q] = |recv[q]|; with `lists`, the send lists one after
// the other, then the recv lists (sum of counts entries).
__attribute__((visibility("default"))) int jaxmg_layout_axis_exchange(int64_t n, int64_t bf,
                                                                      int64_t bt, int procs, int me,
                                                                      int64_t* counts,
                                                                      int64_t* lists) {
  if (n < 0 || bf < 1 || bt < 1 || procs < 1 || me < 0 || me >= procs) return 1;
  const jaxmg::layout::AxisExchange x(n, bf, bt, procs, me);
  for (int q = 0; q < procs; ++q) {
    counts[q] = static_cast<int64_t>(x.send[q].size());
    counts[procs + q] = static_cast<int64_t>(x.recv[q].size());
  }
  if (lists) {
    for (const auto* side : {&x.send, &x.recv}) {
      for (const auto& v : *side) {
        for (int64_t i : v) *lists++ = i;
      }
    }
  }
  return 0;
}

}  // extern "C"
