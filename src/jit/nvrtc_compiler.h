// Compiles one kernel specialisation to CUBIN with NVRTC. Torch-free.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tileops::jit {

// A JIT specialisation: a value with a readable name (e.g. "rms_norm_fwd__bf16__n4096__sm_90a").
struct KernelSource {
  std::string name;             // readable specialisation name, used in logs, errors and disk keys
  std::string source;           // translation unit text
  std::vector<std::pair<std::string, std::string>> headers;  // include name -> content
  std::string name_expression;  // e.g. "tileops::rms_norm_fwd<float, 4096>"; its lowered name is looked up
  std::vector<std::string> options;  // extra NVRTC options (e.g. "-DX=1"); the arch option is added
  std::string arch;             // "sm_90a", "sm_80", ...: CUBIN for exactly this architecture
  // headers_digest(headers) when the caller already knows it (0: disk_key computes it): the
  // library's header set is the same for every kernel, so it is hashed once a process.
  uint64_t headers_digest = 0;
};

struct Cubin {
  std::string image;         // the CUBIN bytes
  std::string lowered_name;  // mangled symbol of name_expression
};

// Throws JitError naming the specialisation, the options, the NVRTC log and the numbered source.
Cubin compile_to_cubin(const KernelSource& src);

// Key for the on-disk cache: "<name>-<16 hex>" where the hash covers everything the CUBIN depends
// on: the source and every header (for the library's kernels: all embedded kernel sources, so a
// library whose kernels differ gets other keys), the name expression, every NVRTC option (the
// implicit ones too), the arch and the cache-format version. Computing it does not load NVRTC; the
// disk cache keeps user entries per NVRTC version and records the version in every entry.
std::string disk_key(const KernelSource& src);

// The part of the key that covers the headers (their names and contents, in order).
uint64_t headers_digest(const std::vector<std::pair<std::string, std::string>>& headers);

}  // namespace tileops::jit
