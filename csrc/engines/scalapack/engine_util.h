// What the CPU engine's files share: typed views of its buffers and the cyclic index maps.
#pragma once

#include "layout/layout.h"

namespace jaxmg::scalapack {

using layout::CyclicAxis;
using layout::LocalIndex;

template <typename T>
T* As(void* p) {
  return static_cast<T*>(p);
}

}  // namespace jaxmg::scalapack
