// What the NVRTC compile tests (tests/kernels/test_*_nvrtc.cpp) share: a named device's facts with
// another arch, and a kernel source whose register spills fail its compile.
#pragma once

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/device_facts.h"

namespace tileops::test {

// H200's facts with `arch` (and, given, its compute capability: the plans read it).
inline nvrtc::DeviceFacts facts_for(const char* arch, int major = -1, int minor = -1) {
  nvrtc::DeviceFacts f = nvrtc::named_device_facts("h200");
  f.arch = arch;
  if (major >= 0) f.cc_major = major, f.cc_minor = minor;
  return f;
}

// Spills are warnings of ptxas; made errors, a kernel whose registers do not fit fails its compile.
inline jit::KernelSource strict(jit::KernelSource src) {
  src.options.push_back("--ptxas-options=--warn-on-spills");
  src.options.push_back("--ptxas-options=--warning-as-error");
  return src;
}

}  // namespace tileops::test
