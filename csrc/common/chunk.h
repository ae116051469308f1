// How many rows of `row_bytes` bytes a step gathers at a time (LeadingRowsOut): about `bytes`
// worth, at least one, at most `rows`; a positive `fixed` (the call's config.rows_per_chunk, a
// test hook that drives several chunks through small matrices) overrides it.
#pragma once

#include <algorithm>
#include <cstdint>

namespace jaxmg {

inline int64_t RowsPerChunk(int64_t bytes, int64_t row_bytes, int64_t rows, int64_t fixed) {
  int64_t chunk = bytes / std::max<int64_t>(row_bytes, 1);
  if (fixed > 0) chunk = fixed;
  return std::clamp<int64_t>(chunk, 1, std::max<int64_t>(rows, 1));
}

}  // namespace jaxmg
