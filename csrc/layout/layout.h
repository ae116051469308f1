// Layout core: from a JAX block sharding to the engines' 2-D block-cyclic layout.
//
// No MPI, no CUDA: this file only does index arithmetic and local memory transforms, shared by
// every engine. See docs/layout.md for the derivation.
//
// Conventions.
// * The JAX mesh splits the matrix rows over `mesh_rows` devices and the columns over `mesh_cols`
//   devices; the device at mesh position (u, v) holds the row-major shard A[u-block, v-block].
// * Read column-major, that shard is the block (v, u) of Aᵀ. For symmetric (Hermitian) matrices
//   Aᵀ = A (= conj(A)), so the engine sees its matrix distributed over a grid of
//   `grid_rows = mesh_cols` by `grid_cols = mesh_rows` processes, mesh (u, v) holding engine
//   block (v, u). Nothing is copied to get there.
// * Along one engine axis with P processes, the JAX block layout is turned into a block-cyclic
//   layout of tile T by relabeling (a symmetric tile permutation Π, see MakeSymmetricPlan), by
//   local padding when T does not divide the shard, or, on grids where neither P_r nor P_c divides
//   the other, by a real redistribution done by the engine.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace jaxmg::layout {

// Distinct index types: most distributed linear algebra bugs are local/global mix-ups.
struct GlobalIndex {
  int64_t value;
};
struct LocalIndex {
  int64_t value;
};
inline constexpr int64_t kPadding = -1;  // GlobalIndex value of a padding row/column

enum class Strategy : int {
  kRelabel = 0,  // local arrays are used as they are (up to padding and a local tile permutation)
  kRedistribute = 1,  // the engine moves the data from the block layout to block-cyclic (p?gemr2d)
};

// What the routine assumes of its matrix, which decides the relabeling.
enum class Symmetry : int {
  // Symmetric/Hermitian routines (potrf, syevd, ...): the same Π on rows and columns. Relabels on
  // grids where one of Pr, Pc divides the other, redistributes on the others.
  kSymmetric = 0,
  // General routines (getrf, geqrf, ...): independent Π_r, Π_c. Relabels on every grid.
  kGeneral = 1,
  // General routines whose columns keep their order (QR: a column permutation changes R). The
  // rows relabel and pad as for kGeneral; the columns are one piece padded at its end, so they
  // must lie on one process (mesh_rows == 1), or the plan redistributes.
  kOrderedColumns = 2,
};

// One axis of the engine grid.
struct AxisPlan {
  int procs = 1;             // processes along this engine axis
  int64_t extent = 0;        // global extent along this axis (before padding)
  int64_t shard = 0;         // JAX shard extent along this axis (extent / procs)
  int64_t padded_shard = 0;  // local extent after padding (relabel); == shard otherwise
  // Padding: the axis is cut into `pieces` pieces of `piece` = extent / pieces, each padded to
  // `padded_piece` (a multiple of T); every shard is a whole number of pieces.
  int64_t pieces = 1;
  int64_t piece = 0;
  int64_t padded_piece = 0;
  int64_t padded_extent = 0;       // extent of the matrix the engine sees along this axis
  std::vector<int> grid_of_mesh;   // mesh coordinate -> grid coordinate on this axis
  std::vector<int> mesh_of_grid;   // inverse
  bool local_permutation = false;  // local tiles must be permuted (non-square symmetric grids)
  // source_tile[I] = the tile of the padded, mesh-ordered axis that the engine's tile I holds.
  // Identity for kRedistribute.
  std::vector<int64_t> source_tile;
};

// How a (mesh_rows*T..) matrix sharded over a JAX mesh becomes the engine's block-cyclic matrix.
// The engine matrix is the transpose of the JAX matrix (a row-major shard read column-major):
// engine rows run along the JAX columns (over mesh_cols), engine columns along the JAX rows.
struct Plan {
  Strategy strategy = Strategy::kRelabel;
  Symmetry symmetry = Symmetry::kSymmetric;
  int64_t tile = 0;  // T
  int mesh_rows = 1, mesh_cols = 1;
  bool padded = false;
  // Padded diagonal entries are 1 (square plans, whose padded rows and columns coincide: the
  // padded matrix stays nonsingular); zero elsewhere, and everywhere for the other plans.
  bool identity_padding = false;
  AxisPlan rows;  // engine rows: procs = mesh_cols, mesh coordinate v
  AxisPlan cols;  // engine cols: procs = mesh_rows, mesh coordinate u

  int grid_rows() const { return rows.procs; }
  int grid_cols() const { return cols.procs; }
  // The engine matrix's global extents (padded).
  int64_t engine_rows() const { return rows.padded_extent; }
  int64_t engine_cols() const { return cols.padded_extent; }
};
// The name the symmetric routines were first written with.
using SymmetricPlan = Plan;

// Plans a symmetric operation (potrf/potrs, syevd, ...) on an n x n matrix sharded over a
// mesh_rows x mesh_cols mesh with tile T. Fails with a message when the request cannot be met
// (e.g. T does not divide the shard and padding is not allowed). force_redistribute picks the
// redistribution even where relabeling would do (to exercise that path on any grid).
Status MakeSymmetricPlan(int64_t n, int mesh_rows, int mesh_cols, int64_t tile, bool allow_pad,
                         SymmetricPlan* plan, bool force_redistribute = false);

// Plans a general operation on the engine matrix of a JAX matrix of `jax_rows` x `jax_cols`
// (engine rows = jax_cols over mesh_cols, engine cols = jax_rows over mesh_rows). Square
// matrices are padded with identity on the diagonal (pieces of the same size on both axes).
Status MakeGeneralPlan(int64_t jax_rows, int64_t jax_cols, int mesh_rows, int mesh_cols,
                       int64_t tile, bool allow_pad, Plan* plan, bool force_redistribute = false,
                       bool ordered_cols = false);

// The plan of a routine of this symmetry on the JAX matrix handed to it, `rows` x `cols`
// (square for the symmetric routines).
Status MakePlan(Symmetry symmetry, int64_t rows, int64_t cols, int mesh_rows, int mesh_cols,
                int64_t tile, bool allow_pad, bool force_redistribute, Plan* plan);

// Number of engine-local rows (cols) held by grid coordinate `grid_coord` on that axis.
int64_t EngineLocalExtent(const SymmetricPlan& plan, const AxisPlan& axis, int grid_coord);

// The original global index of engine-local index `local` on grid coordinate `grid_coord`, or
// kPadding.
GlobalIndex EngineToGlobal(const SymmetricPlan& plan, const AxisPlan& axis, int grid_coord,
                           LocalIndex local);
// The original global index of engine-global index `engine` on an axis, or kPadding.
GlobalIndex EngineGlobalToOriginal(const Plan& plan, const AxisPlan& axis, int64_t engine);

// For a relabeled axis with a local permutation: perm[j] = the local tile (in the padded JAX
// shard) that engine-local tile j holds. Identity when the axis needs no permutation.
std::vector<int64_t> LocalTilePermutation(const SymmetricPlan& plan, const AxisPlan& axis,
                                          int grid_coord);

// Prepares this process's engine-local column-major array (kRelabel only).
// `shard` is the JAX row-major shard of mesh position (u, v), i.e. a column-major array of
// rows.shard x cols.shard; `out` has EngineLocalExtent rows x cols, leading dimension = rows.
// With no padding `out` may equal `shard` (in place). `scratch` must hold
// tile * max(local rows, local cols) elements when a local permutation is needed.
// conj_pad_identity: identity is written on padded diagonal entries.
template <typename T>
void PrepareLocal(const SymmetricPlan& plan, int mesh_u, int mesh_v, const T* shard, T* out,
                  T* scratch);

// Elements of scratch PrepareLocal needs (0 when none).
int64_t PrepareLocalScratch(const SymmetricPlan& plan, int mesh_u, int mesh_v);

// The parity (0 even, 1 odd) of the plan's relabeling: of Π_r and Π_c together, as permutations
// of the engine's padded indices (the tile permutations of whole tiles). det B = det M' · (-1)^it
// for the engine matrix B and M' = the padded matrix in mesh order.
int RelabelParity(const Plan& plan);

// One axis of a block-cyclic distribution: tiles of `tile` indices dealt to `procs` processes in
// turn from process 0, seen from process `coord`. Its maps take and give tagged indices (a local
// index cannot stand where a global one is meant), and the axis names its process count and
// coordinate (they cannot be swapped).
struct CyclicAxis {
  int64_t tile = 1;
  int procs = 1;
  int coord = 0;
  // The engine-global index of this process's local index.
  GlobalIndex Global(LocalIndex local) const {
    return GlobalIndex{((local.value / tile) * procs + coord) * tile + local.value % tile};
  }
  // The process that holds global index g.
  int Owner(GlobalIndex g) const { return static_cast<int>((g.value / tile) % procs); }
  // Global index g's local index on its owner (Owner(g)).
  LocalIndex Local(GlobalIndex g) const {
    return LocalIndex{(g.value / tile / procs) * tile + g.value % tile};
  }
  // The first of this process's local indices whose global index is g or later: the count of
  // those before g (Extent(g.value); Extent(n) for g = n, past the last).
  LocalIndex LocalFrom(GlobalIndex g) const { return LocalIndex{Extent(g.value)}; }
  // How many of n indices this process holds (ScaLAPACK's numroc).
  int64_t Extent(int64_t n) const {
    const int64_t blocks = n / tile;
    int64_t local = (blocks / procs) * tile;
    const int64_t extra = blocks % procs;
    if (coord < extra) {
      local += tile;
    } else if (coord == extra) {
      local += n % tile;
    }
    return local;
  }
};

// One axis of a copy between two block-cyclic distributions over the same process grid (blocks
// of bf indices before, bt after, over `procs` processes): for every process q, the local
// indices, by increasing global index, of the n indices that this process (`me`) holds before
// and q after (send[q], local before), and that q holds before and this process after (recv[q],
// local after). Rows and columns of a matrix are independent, so what process p sends process q
// is rows.send[q_row] x cols.send[q_col], in the order that q reads as rows.recv[p_row] x
// cols.recv[p_col] (the GPU engine's Remap).
struct AxisExchange {
  std::vector<std::vector<int64_t>> send, recv;
  AxisExchange(int64_t n, int64_t bf, int64_t bt, int procs, int me);
};

// One copy of a cycle-following tile permutation: tile `src` -> tile `dst`, where kScratchTile
// stands for one tile of scratch. Executing TileMoves(perm) in order permutes tiles in place so
// that destination tile j receives source tile perm[j]; engines run the moves with their own copy
// (memcpy on the host, cudaMemcpy(2D)Async on the device).
inline constexpr int64_t kScratchTile = -1;
struct TileMove {
  int64_t dst, src;
};
std::vector<TileMove> TileMoves(const std::vector<int64_t>& perm);

// Permutes tiles of `tile` columns (rows) of a column-major array in place; scratch holds one
// tile of columns (rows).
template <typename T>
void PermuteColumnTiles(T* a, int64_t ld, int64_t tile, const std::vector<int64_t>& perm,
                        T* scratch);
template <typename T>
void PermuteRowTiles(T* a, int64_t ld, int64_t cols, int64_t tile, const std::vector<int64_t>& perm,
                     T* scratch);

}  // namespace jaxmg::layout
