// RMSNormBwdOp on the nvrtc target: a norm backward (norm_bwd.h) without bias.
#include "targets/builtin.h"
#include "targets/nvrtc/norm/norm_bwd_launch.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {
namespace op = tileops::ops::norm_rms_norm_bwd;
}  // namespace

NormBwdFamily rms_norm_bwd_family() {
  return NormBwdFamily{
      NormBwdSlots{false, op::dy, op::x, op::weight, op::dx, op::dweight, -1, op::normalized_shape, op::eps}};
}

namespace {
KernelBuilder rms_norm_bwd_builder() { return spec_builder(rms_norm_bwd_family()); }
TILEOPS_BUILTIN_KERNEL(nvrtc, RMSNormBwdOp, rms_norm_bwd_builder);
}  // namespace
}  // namespace tileops::nvrtc
