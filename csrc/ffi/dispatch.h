// The library's one dtype dispatch and its one "unsupported dtype" message.
#pragma once

#include <complex>
#include <exception>
#include <new>
#include <string>

#include "common/status.h"
#include "xla/ffi/api/ffi.h"

namespace jaxmg::ffi_util {

namespace ffi = ::xla::ffi;

template <typename T>
struct TypeTag {
  using type = T;
};

inline std::string DtypeName(ffi::DataType dt) {
  switch (dt) {
    case ffi::DataType::F32:
      return "float32";
    case ffi::DataType::F64:
      return "float64";
    case ffi::DataType::C64:
      return "complex64";
    case ffi::DataType::C128:
      return "complex128";
    default:
      return "dtype #" + std::to_string(static_cast<int>(dt));
  }
}

// Calls fn(TypeTag<T>{}) for the four floating types; fails for anything else.
template <typename Fn>
Status DispatchFloating(ffi::DataType dt, const char* op, Fn&& fn) {
  switch (dt) {
    case ffi::DataType::F32:
      return fn(TypeTag<float>{});
    case ffi::DataType::F64:
      return fn(TypeTag<double>{});
    case ffi::DataType::C64:
      return fn(TypeTag<std::complex<float>>{});
    case ffi::DataType::C128:
      return fn(TypeTag<std::complex<double>>{});
    default:
      return Status::Error(std::string("unsupported dtype ") + DtypeName(dt) + " in " + op +
                           " (use float32, float64, complex64 or complex128)");
  }
}

// Runs a handler body; a C++ exception (std::bad_alloc from a host allocation, ...) becomes an
// error of the call instead of crossing the FFI boundary.
template <typename Fn>
ffi::Error NoThrow(const char* target, Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return ffi::Error(ffi::ErrorCode::kResourceExhausted,
                      std::string(target) + ": jaxmg engine failure: out of host memory");
  } catch (const std::exception& e) {
    return ffi::Error(ffi::ErrorCode::kInternal,
                      std::string(target) + ": jaxmg engine failure: " + e.what());
  } catch (...) {
    return ffi::Error(ffi::ErrorCode::kInternal,
                      std::string(target) + ": jaxmg engine failure: unknown C++ exception");
  }
}

inline ffi::Error ToFfi(const Status& s) {
  if (s.ok()) return ffi::Error::Success();
  return ffi::Error(ffi::ErrorCode::kInternal, s.message());
}

}  // namespace jaxmg::ffi_util
