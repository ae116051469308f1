// Status values returned (never thrown) by every layer below the FFI handlers.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

namespace jaxmg {

class Status {
 public:
  Status() = default;
  static Status Error(std::string message) { return Status(std::move(message)); }
  bool ok() const { return message_.empty(); }
  const std::string& message() const { return message_; }

 private:
  explicit Status(std::string message) : message_(std::move(message)) {
    if (message_.empty()) message_ = "unknown error";
  }
  std::string message_;
};

inline std::string SourceLocation(const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line);
}

#define JAXMG_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::jaxmg::Status jaxmg_status_ = (expr);        \
    if (!jaxmg_status_.ok()) return jaxmg_status_; \
  } while (0)

#define JAXMG_ERROR(msg) \
  ::jaxmg::Status::Error(::jaxmg::SourceLocation(__FILE__, __LINE__) + ": " + (msg))

// Narrows an int64 extent to int (ScaLAPACK and BLACS take int) or fails with a message.
inline Status CheckedInt(int64_t value, const char* what, int* out) {
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
    return Status::Error(std::string(what) + " = " + std::to_string(value) +
                         " does not fit in a 32-bit int, which this engine requires");
  }
  *out = static_cast<int>(value);
  return Status();
}

}  // namespace jaxmg
