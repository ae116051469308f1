// Local failures carried to an algorithm's next agreement point, and the test hook that injects
// one.
//
// An algorithm over several ranks meets its peers in collectives (broadcasts, all-reduces,
// library calls that are collective themselves). A rank that returned on a local error (an
// allocation, a local BLAS/LAPACK call, a kernel launch) while the others wait in the next
// collective would leave them waiting for good. So a rank keeps its first local error in a
// Deferred, skips its local work from then on, still enters every collective with the buffers it
// agreed on, and the ranks agree on the outcome at the algorithm's next agreement point (one
// small all-reduce), where every rank returns the same error.
//
// The test hook: a call's config.test_fail = "<algorithm>:<rank>:<step>" (common/config.h; set
// by jaxmg._core.testing for the fault-injection tests, tests/gpu/fault_gpu.py and
// tests/test_reliability.py, and by nothing else) makes rank `rank` of the named algorithm record
// an injected failure at step `step` (the algorithms name their steps: a tile column, a block, an
// iteration). The FFI layer installs the call's point on the thread that runs the call, for the
// call's duration (TestFailureScope); the algorithms' Deferred::Step reads it there.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include "common/status.h"

namespace jaxmg {

struct TestFailurePoint {
  std::string algorithm;
  int rank = -1;
  int64_t step = -1;
};

// The point a test_fail value names (algorithm empty: not of the form above).
inline TestFailurePoint ParseTestFailure(const std::string& s) {
  TestFailurePoint p;
  const size_t a = s.find(':'), b = a == std::string::npos ? a : s.find(':', a + 1);
  if (a == std::string::npos || b == std::string::npos || a == 0 || b + 1 == s.size()) return p;
  char* end = nullptr;
  const long rank = std::strtol(s.c_str() + a + 1, &end, 10);
  if (end != s.c_str() + b) return p;
  const long long step = std::strtoll(s.c_str() + b + 1, &end, 10);
  if (*end != '\0') return p;
  p.algorithm = s.substr(0, a);
  p.rank = static_cast<int>(rank);
  p.step = static_cast<int64_t>(step);
  return p;
}

// The point of the call this thread runs (nullptr: none, and outside a call). One per thread: a
// process that drives several GPUs runs each device's call on a thread of its own.
inline const TestFailurePoint*& ActiveTestFailure() {
  thread_local const TestFailurePoint* point = nullptr;
  return point;
}

// Installs a call's test_fail point on this thread for the scope's life (ffi/families.h
// RunRoutine).
class TestFailureScope {
 public:
  explicit TestFailureScope(const char* setting)
      : point_(ParseTestFailure(setting)), saved_(ActiveTestFailure()) {
    ActiveTestFailure() = point_.algorithm.empty() ? nullptr : &point_;
  }
  ~TestFailureScope() { ActiveTestFailure() = saved_; }
  TestFailureScope(const TestFailureScope&) = delete;
  TestFailureScope& operator=(const TestFailureScope&) = delete;

 private:
  TestFailurePoint point_;
  const TestFailurePoint* saved_;
};

// An injected error where the call's test_fail names (algorithm, rank, step); ok otherwise.
inline Status TestFailure(const char* algorithm, int rank, int64_t step) {
  const TestFailurePoint* p = ActiveTestFailure();
  if (p == nullptr || p->rank != rank || p->step != step || p->algorithm != algorithm) {
    return Status();
  }
  return Status::Error("jaxmg: injected failure (test_fail=" + p->algorithm + ":" +
                       std::to_string(rank) + ":" + std::to_string(step) + ")");
}

// This rank's first local error of an algorithm, kept until its next agreement point.
class Deferred {
 public:
  bool ok() const { return first_.ok(); }
  const Status& status() const { return first_; }
  // Keeps s when it is the first error; true while no error is kept.
  bool Keep(const Status& s) {
    if (first_.ok() && !s.ok()) first_ = s;
    return first_.ok();
  }
  // Runs f (which returns a Status) unless an error is kept; true while none is.
  template <typename F>
  bool Run(F&& f) {
    if (first_.ok()) Keep(std::forward<F>(f)());
    return first_.ok();
  }
  // The test hook's point (algorithm, rank, step): keeps the injected error there.
  bool Step(const char* algorithm, int rank, int64_t step) {
    return Keep(TestFailure(algorithm, rank, step));
  }

 private:
  Status first_;
};

// The agreement's wire form: slot 0 is (nranks − rank) of a failing rank (0: none), so that a max
// over the ranks names the lowest failing one; then its message, 7 bytes to a slot (so every slot
// stays non-negative and a max over zeros and it is it).
constexpr size_t kMessageSlots = 63;
inline void PackMessage(const std::string& message, int64_t* slots) {
  for (size_t i = 0; i < kMessageSlots; ++i) {
    int64_t v = 0;
    for (size_t j = 0; j < 7; ++j) {
      const size_t at = i * 7 + j;
      const unsigned char c = at < message.size() ? static_cast<unsigned char>(message[at]) : 0;
      v |= static_cast<int64_t>(c) << (8 * j);
    }
    slots[i] = v;
  }
}
inline std::string UnpackMessage(const int64_t* slots) {
  std::string s;
  for (size_t i = 0; i < kMessageSlots; ++i) {
    for (size_t j = 0; j < 7; ++j) {
      const char c = static_cast<char>((slots[i] >> (8 * j)) & 0xff);
      if (c == '\0') return s;
      s.push_back(c);
    }
  }
  return s;
}

// The agreed error every rank returns: the lowest failing rank's message, and which rank it was.
inline Status AgreedError(const char* algorithm, const std::string& message, int rank, int nranks) {
  std::string s = message;
  if (nranks > 1) {
    s += " [" + std::string(algorithm) + ": on rank " + std::to_string(rank) + " of " +
         std::to_string(nranks) + "; every rank stopped with this error]";
  }
  return Status::Error(s);
}

}  // namespace jaxmg
