#include "targets/nvrtc/offline_plan.h"

#include <memory>
#include <utility>

namespace tileops::nvrtc {
namespace {
thread_local std::unique_ptr<OfflinePlan> t_plan;
}  // namespace

OfflinePlan* offline_plan() { return t_plan.get(); }

void begin_offline_plan(const std::string& device) {
  auto plan = std::make_unique<OfflinePlan>();
  plan->facts = named_device_facts(device);
  t_plan = std::move(plan);
}

std::vector<jit::KernelSource> end_offline_plan() {
  std::vector<jit::KernelSource> out;
  if (t_plan) out = std::move(t_plan->sources);
  t_plan.reset();
  return out;
}

}  // namespace tileops::nvrtc
