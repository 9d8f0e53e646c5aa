// RMSNormBwdOp on the nvrtc target: a norm backward (norm_bwd.h) without bias.
#include "targets/builtin.h"
#include "targets/nvrtc/norm/norm_bwd_launch.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {
NormBwdArgs read_args(const OpCall& call) {
  const tileops::ops::norm_rms_norm_bwd::View v(call);
  return {v.dy(), v.x(), v.dx(), v.weight(), v.dweight(), nullptr, v.normalized_shape(), v.eps()};
}
}  // namespace

NormBwdFamily rms_norm_bwd_family() { return NormBwdFamily{false, read_args}; }

namespace {
KernelBuilder rms_norm_bwd_builder() { return spec_builder(rms_norm_bwd_family()); }
TILEOPS_BUILTIN_KERNEL(nvrtc, RMSNormBwdOp, rms_norm_bwd_builder);
}  // namespace
}  // namespace tileops::nvrtc
