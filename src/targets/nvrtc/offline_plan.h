// Planning for a named device without its GPU (the offline warm-up from the manifests' workloads):
// while a plan is active on a thread, an op call made there with CPU tensors goes through the whole
// generated boundary, then the nvrtc target only collects the sources it would build on that device
// (the same disk-cache keys as a build there) and nothing is built or launched.
#pragma once

#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/device_facts.h"

namespace tileops::nvrtc {

struct OfflinePlan {
  DeviceFacts facts;
  std::vector<jit::KernelSource> sources;  // in call order; a kernel planned twice appears twice
};

// This thread's active plan, or null (every ordinary call).
OfflinePlan* offline_plan();
// Starts a plan on this thread for a named device (named_device_facts; throws std::invalid_argument
// for an unknown name) and ends it, returning what was collected.
void begin_offline_plan(const std::string& device);
std::vector<jit::KernelSource> end_offline_plan();

}  // namespace tileops::nvrtc
