// The kernel sources (src/kernels/**/*.cuh), embedded at build time for NVRTC.
#pragma once
#include <c10/util/ArrayRef.h>

namespace tileops::nvrtc {
struct KernelFile {
  const char* name;  // path under src/kernels, e.g. "norm/rms_norm_fwd.cuh"
  const char* text;
};
c10::ArrayRef<KernelFile> kernel_files();
}  // namespace tileops::nvrtc
