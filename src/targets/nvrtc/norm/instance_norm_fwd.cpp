// InstanceNormFwdOp on the nvrtc target: GroupNorm's kernels (group_norm.h) with a group a channel;
// with use_input_stats=False the running stats stand for each channel's mean and variance.
#include "targets/builtin.h"
#include "targets/nvrtc/norm/group_norm.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {
GroupNormArgs read_args(const OpCall& call) {
  const tileops::ops::norm_instance_norm_fwd::View v(call);
  // The generated checks refused running stats beside use_input_stats=True, and their absence without.
  const bool running = !v.use_input_stats();
  return {v.x(),    v.y(), v.weight(), v.bias(), running ? v.running_mean() : nullptr,
          running ? v.running_var() : nullptr, v.x().size(1), v.eps()};
}
}  // namespace

GroupNormFamily instance_norm_fwd_family() { return GroupNormFamily{read_args}; }

namespace {
KernelBuilder instance_norm_fwd_builder() { return spec_builder(instance_norm_fwd_family()); }
TILEOPS_BUILTIN_KERNEL(nvrtc, InstanceNormFwdOp, instance_norm_fwd_builder);
}  // namespace
}  // namespace tileops::nvrtc
