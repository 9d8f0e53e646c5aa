#include "targets/nvrtc/device_facts.h"

#include <stdexcept>

namespace tileops::nvrtc {

std::string arch_for(int cc_major, int cc_minor) {
  std::string arch = "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
  if (cc_major == 9 && cc_minor == 0) arch += "a";
  return arch;
}

namespace {
struct Named {
  const char* names[2];
  int cc_major, cc_minor, sm_count, max_smem_optin, threads_per_sm, blocks_per_sm, smem_per_sm;
};
// The CUDA programming guide's per-architecture limits; SM counts of the named boards.
constexpr Named kNamed[] = {
    {{"h100", "sm_90a"}, 9, 0, 132, 227 * 1024, 2048, 32, 228 * 1024},
    {{"h200", nullptr}, 9, 0, 132, 227 * 1024, 2048, 32, 228 * 1024},
    {{"a100", "sm_80"}, 8, 0, 108, 163 * 1024, 2048, 32, 164 * 1024},
    {{"l40s", "sm_89"}, 8, 9, 142, 99 * 1024, 1536, 24, 100 * 1024},
    {{"a10", "sm_86"}, 8, 6, 72, 99 * 1024, 1536, 16, 100 * 1024},
};
}  // namespace

DeviceFacts named_device_facts(std::string_view name) {
  std::string known;
  for (const auto& d : kNamed) {
    for (const char* n : d.names) {
      if (!n) continue;
      if (name == n) {
        DeviceFacts f;
        f.cc_major = d.cc_major;
        f.cc_minor = d.cc_minor;
        f.arch = arch_for(d.cc_major, d.cc_minor);
        f.sm_count = d.sm_count;
        f.max_smem_optin = d.max_smem_optin;
        f.threads_per_sm = d.threads_per_sm;
        f.blocks_per_sm = d.blocks_per_sm;
        f.smem_per_sm = d.smem_per_sm;
        return f;
      }
      known += std::string(known.empty() ? "" : ", ") + n;
    }
  }
  throw std::invalid_argument("tileops: no facts for device '" + std::string(name) + "'; known: " + known);
}

}  // namespace tileops::nvrtc
