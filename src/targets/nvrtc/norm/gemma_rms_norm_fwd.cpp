// GemmaRMSNormFwdOp and GemmaFusedAddRMSNormFwdOp on the nvrtc target: the RMSNorm rows (row_norm.h),
// scaled by 1 + weight.
#include "targets/builtin.h"
#include "targets/nvrtc/norm/row_norm_launch.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {
namespace rms = tileops::ops::norm_gemma_rms_norm_fwd;
namespace fused = tileops::ops::norm_gemma_fused_add_rms_norm_fwd;
}  // namespace

RowNormFamily gemma_rms_norm_fwd_family() {
  return RowNormFamily{RowNormOp::kRmsNorm,
                       RowNormSlots{rms::x, -1, rms::weight, -1, rms::y, -1, rms::normalized_shape, rms::eps}, true};
}

RowNormFamily gemma_fused_add_rms_norm_fwd_family() {
  return RowNormFamily{RowNormOp::kFusedAddRmsNorm,
                       RowNormSlots{fused::x, fused::residual, fused::weight, -1, fused::y, fused::residual_out,
                                    fused::normalized_shape, fused::eps},
                       true};
}

namespace {
KernelBuilder gemma_rms_norm_fwd_builder() { return spec_builder(gemma_rms_norm_fwd_family()); }
KernelBuilder gemma_fused_add_rms_norm_fwd_builder() { return spec_builder(gemma_fused_add_rms_norm_fwd_family()); }
TILEOPS_BUILTIN_KERNEL(nvrtc, GemmaRMSNormFwdOp, gemma_rms_norm_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, GemmaFusedAddRMSNormFwdOp, gemma_fused_add_rms_norm_fwd_builder);
}  // namespace
}  // namespace tileops::nvrtc
