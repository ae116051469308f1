// Helpers shared by the GPU engine's source files (not part of its interface): cuBLASMp
// descriptors, compute types, tile permutations and constants.
#pragma once

#include <cublasmp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/scalar.h"
#include "engines/cusolvermp/cusolvermp.h"
#include "engines/cusolvermp/vendor_wrappers.h"
#include "layout/layout.h"

namespace jaxmg::cusolvermp {

using layout::CyclicAxis;
using layout::LocalIndex;

// Tile permutations on the device: the layout core's cycle-following moves, one tile of scratch.
inline Status PermuteColumnTiles(char* a, int64_t ld, int64_t tile, size_t es,
                                 const std::vector<int64_t>& perm, char* scratch,
                                 cudaStream_t stream) {
  const size_t bytes = es * ld * tile;
  auto at = [&](int64_t j) { return j == layout::kScratchTile ? scratch : a + j * bytes; };
  for (const layout::TileMove& m : layout::TileMoves(perm)) {
    JAXMG_CUDA(cudaMemcpyAsync(at(m.dst), at(m.src), bytes, cudaMemcpyDeviceToDevice, stream));
  }
  return Status();
}

inline Status PermuteRowTiles(char* a, int64_t ld, int64_t cols, int64_t tile, size_t es,
                              const std::vector<int64_t>& perm, char* scratch,
                              cudaStream_t stream) {
  const size_t width = es * tile;
  auto at = [&](int64_t j) { return j == layout::kScratchTile ? scratch : a + j * width; };
  auto pitch = [&](int64_t j) { return j == layout::kScratchTile ? width : es * ld; };
  for (const layout::TileMove& m : layout::TileMoves(perm)) {
    JAXMG_CUDA(cudaMemcpy2DAsync(at(m.dst), pitch(m.dst), at(m.src), pitch(m.src), width, cols,
                                 cudaMemcpyDeviceToDevice, stream));
  }
  return Status();
}

// RAII cuBLASMp descriptor (for Gemr2D).
class BlasDescriptor {
 public:
  ~BlasDescriptor() {
    if (desc_) cublasMpMatrixDescriptorDestroy(desc_);
  }
  Status Create(Context& c, cudaDataType dt, int64_t m, int64_t n, int64_t mb, int64_t nb,
                int64_t lld) {
    JAXMG_BLASMP(cublasMpMatrixDescriptorCreate(m, n, mb, nb, 0, 0, lld, dt, c.blas_grid, &desc_));
    return Status();
  }
  cublasMpMatrixDescriptor_t get() const { return desc_; }

 private:
  cublasMpMatrixDescriptor_t desc_ = nullptr;
};

using vendor::ComputeOf;

// NonFinite's value when every entry is finite (its buffer is set with the byte 0x7f).
constexpr int32_t kNoColumn = 0x7f7f7f7f;

// RowsOut's chunks: bounded so that its scratch stays small.
constexpr size_t kRowsOutChunkBytes = size_t{1} << 30;

struct GesvdOptions {
  cusolverMpGesvdDescriptor_t d = nullptr;
  ~GesvdOptions() {
    if (d) cusolverMpGesvdDescriptorDestroy(d);
  }
};

}  // namespace jaxmg::cusolvermp
