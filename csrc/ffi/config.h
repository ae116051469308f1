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
    integer(name, static_cast<int64_t>(Choice::kAuto),
            static_cast<int64_t>(Choice::kBf16x9FixedPoint), &v);
    *field = static_cast<Choice>(v);
  };
  constexpr int64_t kMax = int64_t{1} << 40;
  for (const ConfigField& f : kConfigFields) {
    if (f.kind == ConfigField::kChoice) {
      choice(f.name, &(c.*f.choice));
    } else if (f.kind == ConfigField::kCount) {
      integer(f.name, 0, kMax, &(c.*f.count));
    } else {  // test_fail, NUL-terminated
      known.push_back(f.name);
      auto text = d.get<std::string_view>(f.name);
      if (!text.has_value()) {
        if (bad.empty()) bad = std::string("no string field ") + f.name;
      } else if (text->size() >= sizeof(c.test_fail)) {
        if (bad.empty()) bad = std::string(f.name) + " is too long";
      } else {
        text->copy(c.test_fail, text->size());
      }
    }
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
