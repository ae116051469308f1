// The configuration of one call: its algorithm choices, tuning and test hooks, from jaxmg.config
// (jaxmg/_core/config.py, where the environment's JAXMG_* defaults are read). Python hands it to
// every call as the `config` attribute; the FFI layer decodes it once (ffi/config.h) into
// CallAttrs::config, and the engines read it from there. So it is part of the jit cache key, and
// the call agreement's fingerprint hashes it whole (ConfigHash): ranks configured differently get
// the agreement's error instead of pairing different collectives.
//
// Adding a field: a member here (8 bytes, so that the struct has no padding and hashes as its
// bytes) and its line in kConfigFields below, which the decoder (ffi/config.h) and the names the
// libraries export (jaxmg_<engine>_config_fields) read; and its field in jaxmg/_core/config.py,
// which tests/test_config.py holds to the exported names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace jaxmg {

// An algorithm choice. Each field admits the values jaxmg/_core/config.py lists for it.
enum class Choice : int64_t {
  kAuto = 0,     // "auto": the engine's measured default for the grid
  kLibrary = 1,  // the vendor library's routine: "scalapack" (CPU), "cusolvermp" (GPU)
  kOwn = 2,      // jaxmg's own algorithm where it applies: "two-stage", "blocked"
  // gpu_math's products on tensor cores (the math modes: csrc/engines/cusolvermp/local_blas.cc):
  kTf32 = 3,              // "tf32": float32 products of jaxmg's own algorithms in TF32
  kBf16x9 = 4,            // "bf16x9": float32 products emulated with BF16 (cuSOLVER, cuBLAS)
  kFixedPoint = 5,        // "fixed-point": float64 products emulated in fixed point
  kBf16x9FixedPoint = 6,  // "bf16x9+fixed-point": both emulations (the largest code)
};

struct Config {
  // Algorithm choices (jaxmg.config's fields of the same names; environment JAXMG_<NAME>).
  Choice cpu_lu = Choice::kAuto;          // kLibrary: p?getrf everywhere (else the 1-D LU on 1 x P)
  Choice cpu_cholesky = Choice::kAuto;    // kOwn: the 1-D Cholesky on 1 x P (else p?potrf)
  Choice cpu_qr = Choice::kAuto;          // kLibrary: p?geqrf, p?orgqr (else the 1-D QR on 1 x P)
  Choice cpu_inverses = Choice::kAuto;    // kOwn: both blocked; kLibrary: both ScaLAPACK's
  Choice cpu_eigh = Choice::kAuto;        // kOwn: the two stages; kLibrary: p?syevd
  Choice gpu_lu = Choice::kAuto;          // kLibrary: cuSOLVERMp's Getrf everywhere
  Choice gpu_cholesky = Choice::kAuto;    // kOwn: the 1-D Cholesky on 1 x P (else the library's)
  Choice gpu_qr = Choice::kAuto;          // kLibrary: cuSOLVERMp's Geqrf and Orgqr everywhere
  Choice gpu_eigh = Choice::kAuto;        // with vectors: kOwn the two stages, kLibrary Syevd
  Choice gpu_eigvals = Choice::kAuto;     // eigenvalues alone: the same
  Choice gpu_one_device = Choice::kAuto;  // kLibrary: cuSOLVERMp on a 1 x 1 grid too
  Choice eig_q2 = Choice::kAuto;          // kOwn ("fused"): Q₂'s blocks by WaveApply
  Choice gpu_math = Choice::kAuto;        // kAuto: native float32 and float64 products
  // Tuning of the two-stage eigensolver.
  int64_t eig_band = 0;      // the widest band tried (0: the engine's measured default)
  int64_t eig_q2_group = 0;  // sweeps per Q₂ block (0: the band's width)
  int64_t eig_q1_width = 0;  // columns of the panels joined in Q₁ (0: the tile)
  // Test hooks (jaxmg._core.testing; never set otherwise).
  int64_t rows_per_chunk = 0;  // rows a gathering step takes at a time (0: by bytes, chunk.h)
  // "<algorithm>:<rank>:<step>": that rank of that algorithm records an injected failure at that
  // step (common/deferred.h); empty: none. NUL-terminated.
  char test_fail[48] = {};
};

// One field of Config: its name (jaxmg.config's field and the call attribute's key), its kind
// and its member (an algorithm choice, a count of at least 0, or test_fail's text).
struct ConfigField {
  enum Kind { kChoice, kCount, kText };
  const char* name;
  Kind kind;
  Choice Config::* choice = nullptr;
  int64_t Config::* count = nullptr;
};

// Every field of Config, in its order: the one list of them.
inline constexpr ConfigField kConfigFields[] = {
    {"cpu_lu", ConfigField::kChoice, &Config::cpu_lu},
    {"cpu_cholesky", ConfigField::kChoice, &Config::cpu_cholesky},
    {"cpu_qr", ConfigField::kChoice, &Config::cpu_qr},
    {"cpu_inverses", ConfigField::kChoice, &Config::cpu_inverses},
    {"cpu_eigh", ConfigField::kChoice, &Config::cpu_eigh},
    {"gpu_lu", ConfigField::kChoice, &Config::gpu_lu},
    {"gpu_cholesky", ConfigField::kChoice, &Config::gpu_cholesky},
    {"gpu_qr", ConfigField::kChoice, &Config::gpu_qr},
    {"gpu_eigh", ConfigField::kChoice, &Config::gpu_eigh},
    {"gpu_eigvals", ConfigField::kChoice, &Config::gpu_eigvals},
    {"gpu_one_device", ConfigField::kChoice, &Config::gpu_one_device},
    {"eig_q2", ConfigField::kChoice, &Config::eig_q2},
    {"gpu_math", ConfigField::kChoice, &Config::gpu_math},
    {"eig_band", ConfigField::kCount, nullptr, &Config::eig_band},
    {"eig_q2_group", ConfigField::kCount, nullptr, &Config::eig_q2_group},
    {"eig_q1_width", ConfigField::kCount, nullptr, &Config::eig_q1_width},
    {"rows_per_chunk", ConfigField::kCount, nullptr, &Config::rows_per_chunk},
    {"test_fail", ConfigField::kText},
};

// Every member is listed once: the members' bytes add up to the struct's.
constexpr size_t ConfigFieldBytes() {
  size_t bytes = 0;
  for (const ConfigField& f : kConfigFields) {
    bytes += f.kind == ConfigField::kText ? sizeof(Config::test_fail) : sizeof(int64_t);
  }
  return bytes;
}
static_assert(ConfigFieldBytes() == sizeof(Config), "a Config member missing in kConfigFields");

// "name kind" lines of kConfigFields (kind: choice, count, text), for the libraries' exported
// jaxmg_<engine>_config_fields.
inline const char* ConfigFieldLines() {
  static const std::string lines = [] {
    std::string out;
    for (const ConfigField& f : kConfigFields) {
      const char* kind = f.kind == ConfigField::kChoice  ? "choice"
                         : f.kind == ConfigField::kCount ? "count"
                                                         : "text";
      out += std::string(f.name) + " " + kind + "\n";
    }
    return out;
  }();
  return lines.c_str();
}

static_assert(std::is_trivially_copyable_v<Config> &&
                  std::has_unique_object_representations_v<Config>,
              "Config hashes as its bytes: no padding, no pointers");

// FNV-1a of the whole configuration (every rank of a call must have the same).
inline int64_t ConfigHash(const Config& c) {
  unsigned char bytes[sizeof(Config)];
  std::memcpy(bytes, &c, sizeof(Config));
  uint64_t h = 1469598103934665603ull;
  for (unsigned char b : bytes) h = (h ^ b) * 1099511628211ull;
  return static_cast<int64_t>(h >> 1);
}

}  // namespace jaxmg
