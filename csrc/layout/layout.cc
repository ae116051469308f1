#include "layout/layout.h"

#include <algorithm>
#include <complex>
#include <cstring>
#include <string>

namespace jaxmg::layout {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

void IdentityMaps(AxisPlan* axis) {
  axis->grid_of_mesh.resize(axis->procs);
  axis->mesh_of_grid.resize(axis->procs);
  for (int i = 0; i < axis->procs; ++i) axis->grid_of_mesh[i] = axis->mesh_of_grid[i] = i;
}

}  // namespace

Status MakeSymmetricPlan(int64_t n, int mesh_rows, int mesh_cols, int64_t tile, bool allow_pad,
                         SymmetricPlan* plan) {
  if (n <= 0) return JAXMG_ERROR("matrix order must be positive, got " + std::to_string(n));
  if (mesh_rows <= 0 || mesh_cols <= 0) return JAXMG_ERROR("mesh dimensions must be positive");
  if (n % mesh_rows != 0 || n % mesh_cols != 0) {
    return JAXMG_ERROR("matrix order " + std::to_string(n) + " is not divisible by the mesh " +
                       std::to_string(mesh_rows) + "x" + std::to_string(mesh_cols));
  }
  if (tile <= 0) return JAXMG_ERROR("tile must be positive, got " + std::to_string(tile));
  SymmetricPlan p;
  p.n = n;
  p.tile = tile;
  p.mesh_rows = mesh_rows;
  p.mesh_cols = mesh_cols;
  p.rows.procs = mesh_cols;  // shards are read transposed: see layout.h
  p.cols.procs = mesh_rows;
  p.rows.shard = n / mesh_cols;
  p.cols.shard = n / mesh_rows;

  const int big = std::max(mesh_rows, mesh_cols);
  const int small = std::min(mesh_rows, mesh_cols);
  if (big % small != 0) {
    // No relabeling keeps every tile on its owner: the engine redistributes.
    if (tile > n) return JAXMG_ERROR("tile " + std::to_string(tile) + " exceeds the order");
    p.strategy = Strategy::kRedistribute;
    p.super_blocks = 1;
    p.super_extent = n;
    p.padded_super = n;
    p.padded_n = n;
    IdentityMaps(&p.rows);
    IdentityMaps(&p.cols);
    p.rows.padded_shard = p.rows.shard;
    p.cols.padded_shard = p.cols.shard;
    p.source_tile.resize(CeilDiv(n, tile));
    for (size_t i = 0; i < p.source_tile.size(); ++i) p.source_tile[i] = static_cast<int64_t>(i);
    *plan = std::move(p);
    return Status();
  }

  p.strategy = Strategy::kRelabel;
  // Padding granularity: `big` pieces, so every shard (rows and cols) is whole pieces.
  p.super_blocks = big;
  p.super_extent = n / big;
  if (tile > p.super_extent && !allow_pad) {
    return JAXMG_ERROR("tile " + std::to_string(tile) + " is larger than the shard (" +
                       std::to_string(p.super_extent) + ")");
  }
  p.padded_super = CeilDiv(p.super_extent, tile) * tile;
  p.padded = p.padded_super != p.super_extent;
  if (p.padded && !allow_pad) {
    return JAXMG_ERROR("tile " + std::to_string(tile) + " does not divide the shard extent " +
                       std::to_string(p.super_extent) + " and padding is off");
  }
  p.padded_n = p.padded_super * big;
  p.rows.padded_shard = p.padded_n / p.rows.procs;
  p.cols.padded_shard = p.padded_n / p.cols.procs;

  const int64_t tiles = p.padded_n / tile;  // K
  AxisPlan* big_axis = p.rows.procs == big ? &p.rows : &p.cols;
  AxisPlan* small_axis = big_axis == &p.rows ? &p.cols : &p.rows;
  if (big == small) big_axis = &p.rows, small_axis = &p.cols;
  const int k = big / small;
  IdentityMaps(small_axis);
  big_axis->grid_of_mesh.resize(big);
  big_axis->mesh_of_grid.resize(big);
  for (int x = 0; x < big; ++x) {
    const int g = (x % k) * small + x / k;
    big_axis->grid_of_mesh[x] = g;
    big_axis->mesh_of_grid[g] = x;
  }
  const int64_t big_local_tiles = tiles / big;
  p.source_tile.resize(tiles);
  for (int64_t i = 0; i < tiles; ++i) {
    p.source_tile[i] = big_axis->mesh_of_grid[i % big] * big_local_tiles + i / big;
  }
  small_axis->local_permutation = k > 1;
  big_axis->local_permutation = false;
  *plan = std::move(p);
  return Status();
}

int64_t EngineLocalExtent(const SymmetricPlan& plan, const AxisPlan& axis, int grid_coord) {
  if (plan.strategy == Strategy::kRelabel) return axis.padded_shard;
  return CyclicLocalExtent(plan.n, plan.tile, grid_coord, axis.procs);
}

GlobalIndex EngineToGlobal(const SymmetricPlan& plan, const AxisPlan& axis, int grid_coord,
                           LocalIndex local) {
  const int64_t t = plan.tile;
  const int64_t engine_tile = (local.value / t) * axis.procs + grid_coord;
  const int64_t offset = local.value % t;
  if (plan.strategy == Strategy::kRedistribute) return {engine_tile * t + offset};
  const int64_t padded = plan.source_tile[engine_tile] * t + offset;
  const int64_t piece = padded / plan.padded_super;
  const int64_t within = padded % plan.padded_super;
  if (within >= plan.super_extent) return {kPadding};
  return {piece * plan.super_extent + within};
}

std::vector<int64_t> LocalTilePermutation(const SymmetricPlan& plan, const AxisPlan& axis,
                                          int grid_coord) {
  const int64_t local_tiles = axis.padded_shard / plan.tile;
  std::vector<int64_t> perm(local_tiles);
  for (int64_t j = 0; j < local_tiles; ++j) {
    perm[j] =
        axis.local_permutation ? plan.source_tile[j * axis.procs + grid_coord] % local_tiles : j;
  }
  return perm;
}

int64_t PrepareLocalScratch(const SymmetricPlan& plan, int mesh_u, int mesh_v) {
  (void)mesh_u;
  (void)mesh_v;
  if (plan.strategy != Strategy::kRelabel) return 0;
  if (plan.rows.local_permutation) return plan.tile * plan.cols.padded_shard;
  if (plan.cols.local_permutation) return plan.tile * plan.rows.padded_shard;
  return 0;
}

std::vector<TileMove> TileMoves(const std::vector<int64_t>& perm) {
  const int64_t count = static_cast<int64_t>(perm.size());
  std::vector<char> done(count, 0);
  std::vector<TileMove> moves;
  for (int64_t start = 0; start < count; ++start) {
    if (done[start] || perm[start] == start) continue;
    moves.push_back({kScratchTile, start});
    int64_t cur = start;
    // perm is a permutation (checked by the tests), so every cycle returns to its start.
    for (int64_t steps = 0; steps < count; ++steps) {
      done[cur] = 1;
      const int64_t src = perm[cur];
      moves.push_back({cur, src == start ? kScratchTile : src});
      if (src == start) break;
      cur = src;
    }
  }
  return moves;
}

template <typename T>
void PermuteColumnTiles(T* a, int64_t ld, int64_t tile, const std::vector<int64_t>& perm,
                        T* scratch) {
  auto at = [&](int64_t j) { return j == kScratchTile ? scratch : a + j * tile * ld; };
  for (const TileMove& m : TileMoves(perm)) {
    std::memcpy(at(m.dst), at(m.src), sizeof(T) * ld * tile);
  }
}

template <typename T>
void PermuteRowTiles(T* a, int64_t ld, int64_t cols, int64_t tile, const std::vector<int64_t>& perm,
                     T* scratch) {
  // The scratch tile is tile x cols with leading dimension `tile`.
  auto at = [&](int64_t j) { return j == kScratchTile ? scratch : a + j * tile; };
  auto pitch = [&](int64_t j) { return j == kScratchTile ? tile : ld; };
  for (const TileMove& m : TileMoves(perm)) {
    for (int64_t c = 0; c < cols; ++c) {
      std::memcpy(at(m.dst) + c * pitch(m.dst), at(m.src) + c * pitch(m.src), sizeof(T) * tile);
    }
  }
}

template <typename T>
void PrepareLocal(const SymmetricPlan& plan, int mesh_u, int mesh_v, const T* shard, T* out,
                  T* scratch) {
  const int64_t in_rows = plan.rows.shard, in_cols = plan.cols.shard;
  const int64_t out_rows = plan.rows.padded_shard, out_cols = plan.cols.padded_shard;
  if (!plan.padded) {
    if (out != shard) std::memcpy(out, shard, sizeof(T) * in_rows * in_cols);
  } else {
    const int64_t se = plan.super_extent, ps = plan.padded_super;
    std::fill(out, out + out_rows * out_cols, T(0));
    for (int64_t c = 0; c < in_cols; ++c) {
      const int64_t oc = (c / se) * ps + c % se;
      for (int64_t piece = 0; piece < in_rows / se; ++piece) {
        std::memcpy(out + oc * out_rows + piece * ps, shard + c * in_rows + piece * se,
                    sizeof(T) * se);
      }
    }
    // Identity on padded diagonal entries (padded-global row == padded-global col).
    const int64_t row0 = static_cast<int64_t>(mesh_v) * out_rows;
    const int64_t col0 = static_cast<int64_t>(mesh_u) * out_cols;
    for (int64_t r = 0; r < out_rows; ++r) {
      const int64_t g = row0 + r;
      if (g % ps < se || g < col0 || g >= col0 + out_cols) continue;
      out[r + (g - col0) * out_rows] = T(1);
    }
  }
  if (plan.rows.local_permutation) {
    const int coord = plan.rows.grid_of_mesh[mesh_v];
    PermuteRowTiles(out, out_rows, out_cols, plan.tile,
                    LocalTilePermutation(plan, plan.rows, coord), scratch);
  }
  if (plan.cols.local_permutation) {
    const int coord = plan.cols.grid_of_mesh[mesh_u];
    PermuteColumnTiles(out, out_rows, plan.tile, LocalTilePermutation(plan, plan.cols, coord),
                       scratch);
  }
}

#define JAXMG_INSTANTIATE(T)                                                                  \
  template void PrepareLocal<T>(const SymmetricPlan&, int, int, const T*, T*, T*);            \
  template void PermuteColumnTiles<T>(T*, int64_t, int64_t, const std::vector<int64_t>&, T*); \
  template void PermuteRowTiles<T>(T*, int64_t, int64_t, int64_t, const std::vector<int64_t>&, T*);
JAXMG_INSTANTIATE(float)
JAXMG_INSTANTIATE(double)
JAXMG_INSTANTIATE(std::complex<float>)
JAXMG_INSTANTIATE(std::complex<double>)
#undef JAXMG_INSTANTIATE

}  // namespace jaxmg::layout
