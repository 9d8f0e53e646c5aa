// RMSNormFwdOp on the nvrtc target: a row norm (row_norm.h) without residual or bias.
#include "targets/builtin.h"
#include "targets/nvrtc/norm/row_norm_launch.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {
RowNormArgs read_args(const OpCall& call) {
  const tileops::ops::norm_rms_norm_fwd::View v(call);
  return {v.x(), v.y(), v.weight(), nullptr, nullptr, nullptr, v.normalized_shape(), v.eps()};
}
}  // namespace

RowNormFamily rms_norm_fwd_family() { return RowNormFamily{RowNormOp::kRmsNorm, read_args}; }

namespace {
KernelBuilder rms_norm_fwd_builder() { return spec_builder(rms_norm_fwd_family()); }
TILEOPS_BUILTIN_KERNEL(nvrtc, RMSNormFwdOp, rms_norm_fwd_builder);
}  // namespace
}  // namespace tileops::nvrtc
