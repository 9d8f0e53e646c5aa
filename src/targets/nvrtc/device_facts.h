// What the nvrtc plans know about a device: a plain value, read from the driver for a present GPU or
// taken from a table for a named one (building kernels for a machine without its GPU).
#pragma once

#include <string>
#include <string_view>

namespace tileops::nvrtc {

struct DeviceFacts {
  int cc_major = 0, cc_minor = 0;
  std::string arch;              // exact CUBIN target: "sm_90a" on Hopper, else "sm_<major><minor>"
  int sm_count = 0;
  int max_smem_optin = 0;        // bytes of shared memory a block may opt into
  int threads_per_sm = 2048;
  int blocks_per_sm = 32;
  int smem_per_sm = 228 * 1024;  // shared memory per SM
  int reserved_smem = 1024;      // per CTA, taken by the system
  int sm() const { return cc_major * 10 + cc_minor; }
};

// Maps a CUDA compute capability to the arch NVRTC compiles for ("sm_90a" for 9.0: its
// architecture-specific features are usable, and the CUBIN runs only there, which is the point).
std::string arch_for(int cc_major, int cc_minor);

// Facts of a named device: "h100", "h200", "a100", "l40s", "a10", or an arch ("sm_90a", "sm_80",
// "sm_89", "sm_86"). Throws std::invalid_argument naming the known names for anything else.
DeviceFacts named_device_facts(std::string_view name);

}  // namespace tileops::nvrtc
