// RMSNormStaticQuantFwdOp, FusedAddRMSNormStaticQuantFwdOp, RMSNormDynamicQuantFwdOp and
// FusedAddRMSNormDynamicQuantFwdOp on the nvrtc target: the register-resident RMSNorm rows
// (row_norm.h) with a quantised output (src/kernels/norm/rms_norm_fwd.cuh, quant_epilogue).
#include "targets/builtin.h"
#include "targets/nvrtc/norm/row_norm_launch.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {
namespace rs = tileops::ops::norm_rms_norm_static_quant_fwd;
namespace fs = tileops::ops::norm_fused_add_rms_norm_static_quant_fwd;
namespace rd = tileops::ops::norm_rms_norm_dynamic_quant_fwd;
namespace fd = tileops::ops::norm_fused_add_rms_norm_dynamic_quant_fwd;

RowNormArgs read_rs(const OpCall& call) {
  const rs::View v(call);
  return {v.x(), v.q(), &v.weight(), nullptr, nullptr, nullptr, v.normalized_shape(), v.eps(), &v.scale()};
}
RowNormArgs read_fs(const OpCall& call) {
  const fs::View v(call);
  return {v.x(),           v.q(),        &v.weight(), nullptr, &v.residual(), &v.residual_out(),
          v.normalized_shape(), v.eps(), &v.scale()};
}
RowNormArgs read_rd(const OpCall& call) {
  const rd::View v(call);
  return {v.x(), v.q(), &v.weight(), nullptr, nullptr, nullptr, v.normalized_shape(), v.eps(), v.scale_ub(),
          &v.scales()};
}
RowNormArgs read_fd(const OpCall& call) {
  const fd::View v(call);
  return {v.x(),          v.q(),         &v.weight(), nullptr, &v.residual(), &v.residual_out(),
          v.normalized_shape(), v.eps(), v.scale_ub(), &v.scales()};
}
}  // namespace

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
KernelBuilder rs_builder() { return spec_builder(rms_norm_static_quant_fwd_family()); }
KernelBuilder fs_builder() { return spec_builder(fused_add_rms_norm_static_quant_fwd_family()); }
KernelBuilder rd_builder() { return spec_builder(rms_norm_dynamic_quant_fwd_family()); }
KernelBuilder fd_builder() { return spec_builder(fused_add_rms_norm_dynamic_quant_fwd_family()); }
TILEOPS_BUILTIN_KERNEL(nvrtc, RMSNormStaticQuantFwdOp, rs_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, FusedAddRMSNormStaticQuantFwdOp, fs_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, RMSNormDynamicQuantFwdOp, rd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, FusedAddRMSNormDynamicQuantFwdOp, fd_builder);
}  // namespace
}  // namespace tileops::nvrtc
