// The bound on waiting for the other processes of a mesh.
#pragma once

#include <cstdlib>

namespace jaxmg {

// JAXMG_CALL_TIMEOUT: how many seconds a process waits for the other processes of a mesh to join
// a call (or a GPU context's creation) before it gives up with an error. Default 600. Once every
// process has joined, the call's work itself is not timed.
inline double CallTimeoutSeconds() {
  const char* env = std::getenv("JAXMG_CALL_TIMEOUT");
  const double v = env == nullptr ? 0.0 : std::atof(env);
  return v > 0 ? v : 600.0;
}

}  // namespace jaxmg
