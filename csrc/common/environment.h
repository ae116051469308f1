// The two settings the native libraries read from the environment, each once per process. All
// else that changes what a call does (algorithm choices, tuning, test hooks) comes with the call
// as its `config` attribute (common/config.h), and no other file reads the environment.
#pragma once

#include <cstdlib>

namespace jaxmg {

// JAXMG_CALL_TIMEOUT: how many seconds a process waits for the other processes of a mesh to join
// a call (or a GPU context's creation) before it gives up with an error. Default 600. Once every
// process has joined, the call's work itself is not timed.
// Not an attribute: it bounds the wait *before* the call agreement (a process cannot agree on it
// with peers that have not come) and also the GPU contexts' creation, which is no FFI call.
// jaxmg/_core/config.py reads the same variable for Python's own waits.
inline double CallTimeoutSeconds() {
  static const double seconds = [] {
    const char* env = std::getenv("JAXMG_CALL_TIMEOUT");
    const double v = env == nullptr ? 0.0 : std::atof(env);
    return v > 0 ? v : 600.0;
  }();
  return seconds;
}

// JAXMG_DEBUG: 0 (unset), 1 (the GPU engine prints each step's time and workspace sizes, QDWH its
// schedule) or 2 (also the sums of a step's parts), to stderr.
// Not an attribute: a diagnostic that changes no result and no collective, read by timers deep
// in the GPU engine that see no call attributes; it should not recompile a program either.
inline int DebugLevel() {
  static const int level = [] {
    const char* v = std::getenv("JAXMG_DEBUG");
    if (v == nullptr) return 0;
    const int n = std::atoi(v);
    return n >= 2 ? 2 : 1;  // set (any value but a number of 2 or more): 1
  }();
  return level;
}

}  // namespace jaxmg
