// FusedAddRMSNormFwdOp on the nvrtc target: the RMSNorm row with the residual add fused in. Both
// branches use the same kernel: in place, residual_out is the residual input itself.
#include "targets/builtin.h"
#include "targets/nvrtc/norm/row_norm_launch.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {
RowNormArgs read_args(const OpCall& call) {
  const tileops::ops::norm_fused_add_rms_norm_fwd::View v(call);
  return {v.x(), v.y(), v.weight(), nullptr, &v.residual(), &v.residual_out(), v.normalized_shape(), v.eps()};
}
}  // namespace

RowNormFamily fused_add_rms_norm_fwd_family() { return RowNormFamily{RowNormOp::kFusedAddRmsNorm, read_args}; }

namespace {
KernelBuilder fused_add_rms_norm_fwd_builder() { return spec_builder(fused_add_rms_norm_fwd_family()); }
TILEOPS_BUILTIN_KERNEL(nvrtc, FusedAddRMSNormFwdOp, fused_add_rms_norm_fwd_builder);
}  // namespace
}  // namespace tileops::nvrtc
