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

// The algorithm switches (environment variables that choose between engine algorithms with
// different collectives), hashed: every rank of a call must see the same ones.
inline int64_t AlgorithmSwitches() {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over "NAME=value;" of each one set
  for (const char* name :
       {"JAXMG_GPU_LU", "JAXMG_CPU_LU", "JAXMG_CPU_INVERSES", "JAXMG_CPU_QR", "JAXMG_CPU_EIGH",
        "JAXMG_GPU_QR", "JAXMG_GPU_EIGVALS", "JAXMG_GPU_EIGH", "JAXMG_EIG_BAND",
        "JAXMG_EIG_Q1_WIDTH", "JAXMG_QR_PANEL", "JAXMG_GPU_ONE_DEVICE"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    for (const char* part : {name, "=", value, ";"}) {
      for (const char* c = part; *c; ++c) h = (h ^ static_cast<uint8_t>(*c)) * 1099511628211ull;
    }
  }
  return static_cast<int64_t>(h >> 1);
}

inline int64_t RowsPerChunk(int64_t bytes, int64_t row_bytes, int64_t rows) {
  int64_t chunk = bytes / std::max<int64_t>(row_bytes, 1);
  if (RowsPerChunkOverride() > 0) chunk = RowsPerChunkOverride();
  return std::clamp<int64_t>(chunk, 1, std::max<int64_t>(rows, 1));
}

}  // namespace jaxmg
