// GemmaRMSNormFwdOp and GemmaFusedAddRMSNormFwdOp on the nvrtc target: the RMSNorm rows (row_norm.h),
// scaled by 1 + weight.
#include "targets/builtin.h"
#include "targets/nvrtc/norm/row_norm_launch.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {
RowNormArgs read_rms_args(const OpCall& call) {
  const tileops::ops::norm_gemma_rms_norm_fwd::View v(call);
  return {v.x(), v.y(), &v.weight(), nullptr, nullptr, nullptr, v.normalized_shape(), v.eps()};
}
RowNormArgs read_fused_args(const OpCall& call) {
  const tileops::ops::norm_gemma_fused_add_rms_norm_fwd::View v(call);
  return {v.x(), v.y(), &v.weight(), nullptr, &v.residual(), &v.residual_out(), v.normalized_shape(), v.eps()};
}
}  // namespace

RowNormFamily gemma_rms_norm_fwd_family() { return RowNormFamily{RowNormOp::kRmsNorm, read_rms_args, true}; }
RowNormFamily gemma_fused_add_rms_norm_fwd_family() {
  return RowNormFamily{RowNormOp::kFusedAddRmsNorm, read_fused_args, true};
}

namespace {
KernelBuilder gemma_rms_norm_fwd_builder() { return spec_builder(gemma_rms_norm_fwd_family()); }
KernelBuilder gemma_fused_add_rms_norm_fwd_builder() { return spec_builder(gemma_fused_add_rms_norm_fwd_family()); }
TILEOPS_BUILTIN_KERNEL(nvrtc, GemmaRMSNormFwdOp, gemma_rms_norm_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, GemmaFusedAddRMSNormFwdOp, gemma_fused_add_rms_norm_fwd_builder);
}  // namespace
}  // namespace tileops::nvrtc
