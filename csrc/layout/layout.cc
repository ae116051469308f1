#include "layout/layout.h"

#include <algorithm>
#include <complex>
#include <cstring>
#include <numeric>
#include <string>

namespace jaxmg::layout {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

void IdentityMaps(AxisPlan* axis) {
  axis->grid_of_mesh.resize(axis->procs);
  axis->mesh_of_grid.resize(axis->procs);
  for (int i = 0; i < axis->procs; ++i) axis->grid_of_mesh[i] = axis->mesh_of_grid[i] = i;
}

// An axis in the redistribution strategy: the engine lays it out block-cyclically itself.
void RedistributedAxis(int64_t extent, int64_t tile, AxisPlan* axis) {
  IdentityMaps(axis);
  axis->pieces = 1;
  axis->piece = extent;
  axis->padded_piece = extent;
  axis->padded_extent = extent;
  axis->padded_shard = axis->shard;
  axis->local_permutation = false;
  axis->source_tile.resize(CeilDiv(extent, tile));
  for (size_t i = 0; i < axis->source_tile.size(); ++i) {
    axis->source_tile[i] = static_cast<int64_t>(i);
  }
}

// Padding of a relabeled axis cut into `pieces` pieces. Fails when padding is needed but off.
Status PadAxis(int64_t tile, int64_t pieces, bool allow_pad, AxisPlan* axis, bool* padded) {
  axis->pieces = pieces;
  axis->piece = axis->extent / pieces;
  if (tile > axis->piece && !allow_pad) {
    return JAXMG_ERROR("tile " + std::to_string(tile) + " is larger than the piece (" +
                       std::to_string(axis->piece) +
                       ") each shard is cut into and padding is off: allow padding or use a tile "
                       "that divides " +
                       std::to_string(axis->piece));
  }
  axis->padded_piece = CeilDiv(axis->piece, tile) * tile;
  if (axis->padded_piece != axis->piece) {
    if (!allow_pad) {
      return JAXMG_ERROR("tile " + std::to_string(tile) + " does not divide the piece (" +
                         std::to_string(axis->piece) +
                         ") each shard is cut into and padding is off: allow padding or use a "
                         "tile that divides " +
                         std::to_string(axis->piece));
    }
    *padded = true;
  }
  axis->padded_extent = axis->padded_piece * pieces;
  axis->padded_shard = axis->padded_extent / axis->procs;
  return Status();
}

// The block -> cyclic relabeling of one axis on its own: engine tile I is the padded shard
// (I mod P)'s local tile I div P; the grid numbering is the mesh's.
void NaturalRelabel(int64_t tile, AxisPlan* axis) {
  IdentityMaps(axis);
  const int64_t tiles = axis->padded_extent / tile;
  const int64_t local_tiles = tiles / axis->procs;
  axis->source_tile.resize(tiles);
  for (int64_t i = 0; i < tiles; ++i) {
    axis->source_tile[i] = (i % axis->procs) * local_tiles + i / axis->procs;
  }
  axis->local_permutation = false;
}

Status CheckCommon(int64_t rows, int64_t cols, int mesh_rows, int mesh_cols, int64_t tile) {
  if (rows <= 0 || cols <= 0) {
    return JAXMG_ERROR("matrix order and extents must be positive, got " + std::to_string(rows) +
                       "x" + std::to_string(cols));
  }
  if (mesh_rows <= 0 || mesh_cols <= 0) return JAXMG_ERROR("mesh dimensions must be positive");
  if (rows % mesh_rows != 0 || cols % mesh_cols != 0) {
    return JAXMG_ERROR("matrix " + std::to_string(rows) + "x" + std::to_string(cols) +
                       " is not divisible by the mesh " + std::to_string(mesh_rows) + "x" +
                       std::to_string(mesh_cols));
  }
  if (tile <= 0) return JAXMG_ERROR("tile must be positive, got " + std::to_string(tile));
  return Status();
}

}  // namespace

Status MakeSymmetricPlan(int64_t n, int mesh_rows, int mesh_cols, int64_t tile, bool allow_pad,
                         SymmetricPlan* plan, bool force_redistribute) {
  JAXMG_RETURN_IF_ERROR(CheckCommon(n, n, mesh_rows, mesh_cols, tile));
  if (n % mesh_cols != 0 || n % mesh_rows != 0) {
    return JAXMG_ERROR("matrix order " + std::to_string(n) + " is not divisible by the mesh " +
                       std::to_string(mesh_rows) + "x" + std::to_string(mesh_cols));
  }
  Plan p;
  p.symmetry = Symmetry::kSymmetric;
  p.identity_padding = true;
  p.tile = tile;
  p.mesh_rows = mesh_rows;
  p.mesh_cols = mesh_cols;
  p.rows.procs = mesh_cols;  // shards are read transposed: see layout.h
  p.cols.procs = mesh_rows;
  p.rows.extent = p.cols.extent = n;
  p.rows.shard = n / mesh_cols;
  p.cols.shard = n / mesh_rows;

  const int big = std::max(mesh_rows, mesh_cols);
  const int small = std::min(mesh_rows, mesh_cols);
  if (big % small != 0 || force_redistribute) {
    // No relabeling keeps every tile on its owner: the engine redistributes.
    if (tile > n) return JAXMG_ERROR("tile " + std::to_string(tile) + " exceeds the order");
    p.strategy = Strategy::kRedistribute;
    RedistributedAxis(n, tile, &p.rows);
    RedistributedAxis(n, tile, &p.cols);
    *plan = std::move(p);
    return Status();
  }

  p.strategy = Strategy::kRelabel;
  // Padding granularity: `big` pieces, so every shard (rows and cols) is whole pieces.
  JAXMG_RETURN_IF_ERROR(PadAxis(tile, big, allow_pad, &p.rows, &p.padded));
  JAXMG_RETURN_IF_ERROR(PadAxis(tile, big, allow_pad, &p.cols, &p.padded));

  const int64_t tiles = p.rows.padded_extent / tile;  // K
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
  std::vector<int64_t> source(tiles);
  for (int64_t i = 0; i < tiles; ++i) {
    source[i] = big_axis->mesh_of_grid[i % big] * big_local_tiles + i / big;
  }
  p.rows.source_tile = source;
  p.cols.source_tile = std::move(source);
  small_axis->local_permutation = k > 1;
  big_axis->local_permutation = false;
  *plan = std::move(p);
  return Status();
}

Status MakeGeneralPlan(int64_t jax_rows, int64_t jax_cols, int mesh_rows, int mesh_cols,
                       int64_t tile, bool allow_pad, Plan* plan, bool force_redistribute,
                       bool ordered_cols) {
  JAXMG_RETURN_IF_ERROR(CheckCommon(jax_rows, jax_cols, mesh_rows, mesh_cols, tile));
  if (ordered_cols && mesh_rows > 1 && !force_redistribute) {
    return JAXMG_ERROR(
        "a routine whose columns keep their order redistributes a matrix whose "
        "columns are split over " +
        std::to_string(mesh_rows) + " processes");
  }
  Plan p;
  p.symmetry = Symmetry::kGeneral;
  p.tile = tile;
  p.mesh_rows = mesh_rows;
  p.mesh_cols = mesh_cols;
  p.rows.procs = mesh_cols;
  p.cols.procs = mesh_rows;
  p.rows.extent = jax_cols;
  p.cols.extent = jax_rows;
  p.rows.shard = jax_cols / mesh_cols;
  p.cols.shard = jax_rows / mesh_rows;
  if (force_redistribute) {
    if (tile > std::max(jax_rows, jax_cols)) {
      return JAXMG_ERROR("tile " + std::to_string(tile) + " exceeds the matrix");
    }
    p.strategy = Strategy::kRedistribute;
    RedistributedAxis(p.rows.extent, tile, &p.rows);
    RedistributedAxis(p.cols.extent, tile, &p.cols);
    *plan = std::move(p);
    return Status();
  }
  p.strategy = Strategy::kRelabel;
  // A square matrix is cut into the same pieces on both axes, so padded rows and columns
  // coincide (identity on the padded diagonal); a rectangular one per axis.
  // Ordered columns: one piece (on one process), padded at its end.
  int64_t row_pieces = mesh_cols, col_pieces = mesh_rows;
  if (jax_rows == jax_cols && !ordered_cols) {
    row_pieces = col_pieces = std::lcm(mesh_rows, mesh_cols);
    p.identity_padding = true;
  }
  JAXMG_RETURN_IF_ERROR(PadAxis(tile, row_pieces, allow_pad, &p.rows, &p.padded));
  JAXMG_RETURN_IF_ERROR(PadAxis(tile, col_pieces, allow_pad, &p.cols, &p.padded));
  NaturalRelabel(tile, &p.rows);
  NaturalRelabel(tile, &p.cols);
  *plan = std::move(p);
  return Status();
}

Status MakePlan(Symmetry symmetry, int64_t rows, int64_t cols, int mesh_rows, int mesh_cols,
                int64_t tile, bool allow_pad, bool force_redistribute, Plan* plan) {
  if (symmetry == Symmetry::kSymmetric) {
    if (rows != cols) return JAXMG_ERROR("a symmetric routine takes a square matrix");
    return MakeSymmetricPlan(rows, mesh_rows, mesh_cols, tile, allow_pad, plan, force_redistribute);
  }
  return MakeGeneralPlan(rows, cols, mesh_rows, mesh_cols, tile, allow_pad, plan,
                         force_redistribute, symmetry == Symmetry::kOrderedColumns);
}

int64_t EngineLocalExtent(const SymmetricPlan& plan, const AxisPlan& axis, int grid_coord) {
  if (plan.strategy == Strategy::kRelabel) return axis.padded_shard;
  return CyclicAxis{plan.tile, axis.procs, grid_coord}.Extent(axis.extent);
}

GlobalIndex EngineGlobalToOriginal(const Plan& plan, const AxisPlan& axis, int64_t engine) {
  if (plan.strategy == Strategy::kRedistribute) return {engine};
  const int64_t t = plan.tile;
  const int64_t padded = axis.source_tile[engine / t] * t + engine % t;
  const int64_t piece = padded / axis.padded_piece;
  const int64_t within = padded % axis.padded_piece;
  if (within >= axis.piece) return {kPadding};
  return {piece * axis.piece + within};
}

GlobalIndex EngineToGlobal(const SymmetricPlan& plan, const AxisPlan& axis, int grid_coord,
                           LocalIndex local) {
  return EngineGlobalToOriginal(
      plan, axis,
      CyclicAxis{plan.tile, axis.procs, grid_coord}.Global(LocalIndex{local.value}).value);
}

std::vector<int64_t> LocalTilePermutation(const SymmetricPlan& plan, const AxisPlan& axis,
                                          int grid_coord) {
  const int64_t local_tiles = axis.padded_shard / plan.tile;
  std::vector<int64_t> perm(local_tiles);
  for (int64_t j = 0; j < local_tiles; ++j) {
    perm[j] =
        axis.local_permutation ? axis.source_tile[j * axis.procs + grid_coord] % local_tiles : j;
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
    const int64_t rse = plan.rows.piece, rps = plan.rows.padded_piece;
    const int64_t cse = plan.cols.piece, cps = plan.cols.padded_piece;
    std::fill(out, out + out_rows * out_cols, T(0));
    for (int64_t c = 0; c < in_cols; ++c) {
      const int64_t oc = (c / cse) * cps + c % cse;
      for (int64_t piece = 0; piece < in_rows / rse; ++piece) {
        std::memcpy(out + oc * out_rows + piece * rps, shard + c * in_rows + piece * rse,
                    sizeof(T) * rse);
      }
    }
    // Identity on padded diagonal entries (padded-global row == padded-global col).
    const int64_t row0 = static_cast<int64_t>(mesh_v) * out_rows;
    const int64_t col0 = static_cast<int64_t>(mesh_u) * out_cols;
    for (int64_t r = 0; r < out_rows; ++r) {
      const int64_t g = row0 + r;
      if (!plan.identity_padding) break;  // zeros only
      if (g % rps < rse || g < col0 || g >= col0 + out_cols) continue;
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

namespace {
int Parity(const std::vector<int64_t>& perm) {
  std::vector<char> seen(perm.size(), 0);
  int64_t transpositions = 0;
  for (size_t i = 0; i < perm.size(); ++i) {
    if (seen[i]) continue;
    int64_t length = 0;
    for (size_t j = i; !seen[j]; j = static_cast<size_t>(perm[j])) {
      seen[j] = 1;
      ++length;
    }
    transpositions += length - 1;
  }
  return static_cast<int>(transpositions % 2);
}
}  // namespace

int RelabelParity(const Plan& plan) {
  // A transposition of two tiles of T indices is T transpositions of indices.
  const int tiles = Parity(plan.rows.source_tile) + Parity(plan.cols.source_tile);
  return static_cast<int>((tiles * (plan.tile % 2)) % 2);
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

AxisExchange::AxisExchange(int64_t n, int64_t bf, int64_t bt, int procs, int me)
    : send(procs), recv(procs) {
  for (int64_t g = 0; g < n; ++g) {
    const int before = static_cast<int>((g / bf) % procs);
    const int after = static_cast<int>((g / bt) % procs);
    if (before == me) send[after].push_back((g / (bf * procs)) * bf + g % bf);
    if (after == me) recv[before].push_back((g / (bt * procs)) * bt + g % bt);
  }
}

}  // namespace jaxmg::layout
