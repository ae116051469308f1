// The operands, results and attributes every engine's potrs handler binds, in signature order,
// so the CPU and GPU targets take the same call from jaxmg/_potrs.py.
#pragma once

#include <cstdint>
#include <utility>

#include "xla/ffi/api/ffi.h"

namespace jaxmg::ffi_util {

template <typename Binding>
auto BindPotrs(Binding binding) {
  namespace ffi = ::xla::ffi;
  return std::move(binding)
      .template Arg<ffi::AnyBuffer>()         // a: local shard (n/Pr x n/Pc)
      .template Arg<ffi::AnyBuffer>()         // b: local rows (n/Pr x nrhs)
      .template Arg<ffi::Buffer<ffi::S32>>()  // (u, v): this shard's mesh position
      .template Ret<ffi::AnyBuffer>()         // a_work: aliases a
      .template Ret<ffi::AnyBuffer>()         // x: like b
      .template Ret<ffi::AnyBuffer>()         // logdet: real scalar
      .template Ret<ffi::Buffer<ffi::S32>>()  // status
      .template Attr<int64_t>("n")
      .template Attr<int64_t>("mesh_rows")
      .template Attr<int64_t>("mesh_cols")
      .template Attr<int64_t>("tile")
      .template Attr<int64_t>("pad")
      .template Attr<ffi::Span<const int64_t>>("ranks");  // MPI rank per mesh position, or empty
}

}  // namespace jaxmg::ffi_util
