// Decodes a call's `config` attribute (the dictionary jaxmg/_core/config.py builds from
// jaxmg.config) into common/config.h's Config, once per call, for CallAttrs::config.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "xla/ffi/api/ffi.h"

namespace jaxmg::ffi_util {

// `target` names the call in the error.
inline Status DecodeConfig(const char* target, const ::xla::ffi::Dictionary& d, Config* out) {
  Config c;
  std::vector<std::string_view> known;
  std::string bad;  // the first problem
  auto integer = [&](const char* name, int64_t lowest, int64_t highest, int64_t* field) {
    known.push_back(name);
    auto v = d.get<int64_t>(name);
    if (!v.has_value()) {
      if (bad.empty()) bad = std::string("no int64 field ") + name;
    } else if (*v < lowest || *v > highest) {
      if (bad.empty()) bad = std::string(name) + " = " + std::to_string(*v) + " is out of range";
    } else {
      *field = *v;
    }
  };
  auto choice = [&](const char* name, Choice* field) {
    int64_t v = 0;
    integer(name, static_cast<int64_t>(Choice::kAuto), static_cast<int64_t>(Choice::kOwn), &v);
    *field = static_cast<Choice>(v);
  };
  constexpr int64_t kMax = int64_t{1} << 40;
  choice("cpu_lu", &c.cpu_lu);
  choice("cpu_qr", &c.cpu_qr);
  choice("cpu_inverses", &c.cpu_inverses);
  choice("cpu_eigh", &c.cpu_eigh);
  choice("gpu_lu", &c.gpu_lu);
  choice("gpu_qr", &c.gpu_qr);
  choice("gpu_eigh", &c.gpu_eigh);
  choice("gpu_eigvals", &c.gpu_eigvals);
  choice("gpu_one_device", &c.gpu_one_device);
  choice("eig_q2", &c.eig_q2);
  integer("eig_band", 0, kMax, &c.eig_band);
  integer("eig_q2_group", 0, kMax, &c.eig_q2_group);
  integer("eig_q1_width", 0, kMax, &c.eig_q1_width);
  integer("rows_per_chunk", 0, kMax, &c.rows_per_chunk);
  known.push_back("test_fail");
  auto fail = d.get<std::string_view>("test_fail");
  if (!fail.has_value()) {
    if (bad.empty()) bad = "no string field test_fail";
  } else if (fail->size() >= sizeof(c.test_fail)) {
    if (bad.empty()) bad = "test_fail is too long";
  } else {
    fail->copy(c.test_fail, fail->size());
  }
  for (auto it = d.begin(); it != d.end() && bad.empty(); ++it) {
    bool found = false;
    for (std::string_view k : known) found = found || k == *it;
    if (!found) bad = "unknown field " + std::string(*it);
  }
  if (!bad.empty()) {
    return Status::Error(std::string(target) +
                         ": the call's config attribute does not fit this native library (" + bad +
                         "): the Python package and libjaxmg come from different builds; "
                         "reinstall jaxmg");
  }
  *out = c;
  return Status();
}

}  // namespace jaxmg::ffi_util
