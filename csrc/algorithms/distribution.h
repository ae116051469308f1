// The one distribution the algorithms take: this rank's part of a rows x cols matrix,
// block-cyclic in tiles over the backend's process grid (ScaLAPACK's layout, from grid position
// (0, 0)), column-major with leading dimension ld. Its two axes (layout::CyclicAxis: tile,
// process count, this rank's coordinate) map indices both ways with typed indices, a local index
// never standing where a global one is meant:
//   col_axis.Owner(GlobalIndex{c})      the grid column holding global column c
//   col_axis.Local(GlobalIndex{c})      c's local column on that owner
//   col_axis.LocalFrom(GlobalIndex{c})  this rank's first local column at global c or later
//   col_axis.Global(LocalIndex{j})      local column j's global column
// The algorithms on 1 x P grids (lu_1d.h, qr_1d.h) and on 1 x P or P x 1 grids (band_reduce.h,
// band_chase.h, band_eigh.h) read the distributed axis (cyclic()); the blocked inverses
// (inverses.h) and QDWH (qdwh.h) take it for their 2-D grid's descriptors. What an algorithm
// needs besides (a panel's block width, a band's width, the chase's blocks: ChaseShape) is its
// own parameter, not part of the distribution.
#pragma once

#include <cstdint>

#include "layout/layout.h"

namespace jaxmg::algorithms {

using layout::CyclicAxis;
using layout::GlobalIndex;
using layout::LocalIndex;

struct Distribution {
  int64_t rows = 0, cols = 0;
  CyclicAxis row_axis, col_axis;  // the grid's rows and columns, seen from this rank
  int64_t ld = 1;                 // local leading dimension (>= 1)
  int rank = 0;                   // this process, in the test hook's step names

  // The distribution of a rows x cols matrix in t x t tiles over a procs_r x procs_c grid, from
  // grid position (row, col); ld: the local leading dimension, at least the local rows.
  static Distribution Of(int64_t rows, int64_t cols, int64_t t, int procs_r, int row, int procs_c,
                         int col, int64_t ld, int rank) {
    Distribution d;
    d.rows = rows, d.cols = cols;
    d.row_axis = CyclicAxis{t, procs_r, row};
    d.col_axis = CyclicAxis{t, procs_c, col};
    d.ld = ld > 1 ? ld : 1;
    d.rank = rank;
    return d;
  }
  int64_t tile() const { return col_axis.tile; }
  int64_t local_rows() const { return row_axis.Extent(rows); }
  int64_t local_cols() const { return col_axis.Extent(cols); }
  // Tiles of columns (the last may be narrower).
  int64_t col_tiles() const { return (cols + tile() - 1) / tile(); }

  // The algorithms of one distributed axis: on a 1 x P grid the columns are dealt out, on a
  // P x 1 grid the rows (by_rows); cyclic() is that axis, held() this rank's share of it.
  bool by_rows() const { return row_axis.procs > 1; }
  const CyclicAxis& cyclic() const { return by_rows() ? row_axis : col_axis; }
  int64_t held() const { return by_rows() ? local_rows() : local_cols(); }
};

}  // namespace jaxmg::algorithms
