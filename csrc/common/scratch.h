// Device scratch memory for one call, from whatever hosts the call (the GPU targets adapt XLA's
// scratch allocator, csrc/ffi/cuda_targets.cc): the engines see only this interface, so that
// they do not depend on XLA's headers.
#pragma once

#include <cstddef>

namespace jaxmg {

class ScratchSource {
 public:
  virtual ~ScratchSource() = default;
  // `bytes` aligned to `align`, alive until the call returns; null when none is left.
  virtual void* Allocate(size_t bytes, size_t align) = 0;
};

}  // namespace jaxmg
