// The row norm forward ops on the nvrtc target (row_norm.h, row_norm_launch.h): each op's view read
// into RowNormArgs, its RowNormFamily and its registration. RMSNormFwdOp, FusedAddRMSNormFwdOp (both
// branches run one kernel: in place, residual_out is the residual itself), LayerNormFwdOp (mean and
// bias), the Gemma forms (scaled by 1 + weight) and the four quantised RMSNorm rows (register rows
// only; src/kernels/norm/rms_norm_fwd.cuh, quant_epilogue).
#include "targets/builtin.h"
#include "targets/nvrtc/norm/row_norm_launch.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {
namespace rms = tileops::ops::norm_rms_norm_fwd;
namespace fused = tileops::ops::norm_fused_add_rms_norm_fwd;
namespace ln = tileops::ops::norm_layer_norm_fwd;
namespace gemma = tileops::ops::norm_gemma_rms_norm_fwd;
namespace gemma_fused = tileops::ops::norm_gemma_fused_add_rms_norm_fwd;
namespace rs = tileops::ops::norm_rms_norm_static_quant_fwd;
namespace fs = tileops::ops::norm_fused_add_rms_norm_static_quant_fwd;
namespace rd = tileops::ops::norm_rms_norm_dynamic_quant_fwd;
namespace fd = tileops::ops::norm_fused_add_rms_norm_dynamic_quant_fwd;

RowNormArgs read_rms(const OpCall& call) {
  const rms::View v(call);
  return {.x = v.x(), .y = v.y(), .weight = v.weight(), .normalized_shape = v.normalized_shape(), .eps = v.eps()};
}
RowNormArgs read_fused(const OpCall& call) {
  const fused::View v(call);
  return {.x = v.x(), .y = v.y(), .weight = v.weight(), .residual = &v.residual(), .residual_out = &v.residual_out(),
          .normalized_shape = v.normalized_shape(), .eps = v.eps()};
}
RowNormArgs read_ln(const OpCall& call) {
  const ln::View v(call);
  return {.x = v.x(), .y = v.y(), .weight = v.weight(), .bias = v.bias(), .normalized_shape = v.normalized_shape(),
          .eps = v.eps()};
}
RowNormArgs read_gemma(const OpCall& call) {
  const gemma::View v(call);
  return {.x = v.x(), .y = v.y(), .weight = &v.weight(), .normalized_shape = v.normalized_shape(), .eps = v.eps()};
}
RowNormArgs read_gemma_fused(const OpCall& call) {
  const gemma_fused::View v(call);
  return {.x = v.x(), .y = v.y(), .weight = &v.weight(), .residual = &v.residual(), .residual_out = &v.residual_out(),
          .normalized_shape = v.normalized_shape(), .eps = v.eps()};
}
RowNormArgs read_rs(const OpCall& call) {
  const rs::View v(call);
  return {.x = v.x(), .y = v.q(), .weight = &v.weight(), .normalized_shape = v.normalized_shape(), .eps = v.eps(),
          .scale = &v.scale()};
}
RowNormArgs read_fs(const OpCall& call) {
  const fs::View v(call);
  return {.x = v.x(), .y = v.q(), .weight = &v.weight(), .residual = &v.residual(), .residual_out = &v.residual_out(),
          .normalized_shape = v.normalized_shape(), .eps = v.eps(), .scale = &v.scale()};
}
RowNormArgs read_rd(const OpCall& call) {
  const rd::View v(call);
  return {.x = v.x(), .y = v.q(), .weight = &v.weight(), .normalized_shape = v.normalized_shape(), .eps = v.eps(),
          .scale = v.scale_ub(), .scales = &v.scales()};
}
RowNormArgs read_fd(const OpCall& call) {
  const fd::View v(call);
  return {.x = v.x(), .y = v.q(), .weight = &v.weight(), .residual = &v.residual(), .residual_out = &v.residual_out(),
          .normalized_shape = v.normalized_shape(), .eps = v.eps(), .scale = v.scale_ub(), .scales = &v.scales()};
}
}  // namespace

RowNormFamily rms_norm_fwd_family() { return RowNormFamily{RowNormOp::kRmsNorm, read_rms}; }
RowNormFamily fused_add_rms_norm_fwd_family() { return RowNormFamily{RowNormOp::kFusedAddRmsNorm, read_fused}; }
RowNormFamily layer_norm_fwd_family() { return RowNormFamily{RowNormOp::kLayerNorm, read_ln}; }
RowNormFamily gemma_rms_norm_fwd_family() { return RowNormFamily{RowNormOp::kRmsNorm, read_gemma, true}; }
RowNormFamily gemma_fused_add_rms_norm_fwd_family() {
  return RowNormFamily{RowNormOp::kFusedAddRmsNorm, read_gemma_fused, true};
}
RowNormFamily rms_norm_static_quant_fwd_family() {
  return RowNormFamily{RowNormOp::kRmsNorm, read_rs, false, RowNormQuant::kStatic};
}
RowNormFamily fused_add_rms_norm_static_quant_fwd_family() {
  return RowNormFamily{RowNormOp::kFusedAddRmsNorm, read_fs, false, RowNormQuant::kStatic};
}
RowNormFamily rms_norm_dynamic_quant_fwd_family() {
  return RowNormFamily{RowNormOp::kRmsNorm, read_rd, false, RowNormQuant::kDynamic};
}
RowNormFamily fused_add_rms_norm_dynamic_quant_fwd_family() {
  return RowNormFamily{RowNormOp::kFusedAddRmsNorm, read_fd, false, RowNormQuant::kDynamic};
}

namespace {
KernelBuilder rms_norm_fwd_builder() { return spec_builder(rms_norm_fwd_family()); }
KernelBuilder fused_add_rms_norm_fwd_builder() { return spec_builder(fused_add_rms_norm_fwd_family()); }
KernelBuilder layer_norm_fwd_builder() { return spec_builder(layer_norm_fwd_family()); }
KernelBuilder gemma_rms_norm_fwd_builder() { return spec_builder(gemma_rms_norm_fwd_family()); }
KernelBuilder gemma_fused_add_rms_norm_fwd_builder() { return spec_builder(gemma_fused_add_rms_norm_fwd_family()); }
KernelBuilder rms_norm_static_quant_fwd_builder() { return spec_builder(rms_norm_static_quant_fwd_family()); }
KernelBuilder fused_add_rms_norm_static_quant_fwd_builder() {
  return spec_builder(fused_add_rms_norm_static_quant_fwd_family());
}
KernelBuilder rms_norm_dynamic_quant_fwd_builder() { return spec_builder(rms_norm_dynamic_quant_fwd_family()); }
KernelBuilder fused_add_rms_norm_dynamic_quant_fwd_builder() {
  return spec_builder(fused_add_rms_norm_dynamic_quant_fwd_family());
}
TILEOPS_BUILTIN_KERNEL(nvrtc, RMSNormFwdOp, rms_norm_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, FusedAddRMSNormFwdOp, fused_add_rms_norm_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, LayerNormFwdOp, layer_norm_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, GemmaRMSNormFwdOp, gemma_rms_norm_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, GemmaFusedAddRMSNormFwdOp, gemma_fused_add_rms_norm_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, RMSNormStaticQuantFwdOp, rms_norm_static_quant_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, FusedAddRMSNormStaticQuantFwdOp, fused_add_rms_norm_static_quant_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, RMSNormDynamicQuantFwdOp, rms_norm_dynamic_quant_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, FusedAddRMSNormDynamicQuantFwdOp, fused_add_rms_norm_dynamic_quant_fwd_builder);
}  // namespace
}  // namespace tileops::nvrtc
