// How many rows of `row_bytes` bytes a step gathers at a time (LeadingRowsOut): about `bytes`
// worth, at least one, at most `rows`; JAXMG_ROWS_PER_CHUNK overrides it (the tests use it to
// drive several chunks through small matrices).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace jaxmg {

// The JAXMG_ROWS_PER_CHUNK override, or 0 (part of every call's agreement: processes that
// chunk differently would pair different collectives).
inline int64_t RowsPerChunkOverride() {
  const char* env = std::getenv("JAXMG_ROWS_PER_CHUNK");
  return env == nullptr ? 0 : std::max<int64_t>(std::atoll(env), 0);
}

inline int64_t RowsPerChunk(int64_t bytes, int64_t row_bytes, int64_t rows) {
  int64_t chunk = bytes / std::max<int64_t>(row_bytes, 1);
  if (RowsPerChunkOverride() > 0) chunk = RowsPerChunkOverride();
  return std::clamp<int64_t>(chunk, 1, std::max<int64_t>(rows, 1));
}

}  // namespace jaxmg
