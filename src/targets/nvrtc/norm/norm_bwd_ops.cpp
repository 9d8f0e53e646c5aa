// The norm backward ops on the nvrtc target (norm_bwd.h, norm_bwd_launch.h): each op's view read into
// NormBwdArgs, its NormBwdFamily and its registration. RMSNormBwdOp has no bias; LayerNormBwdOp sums
// dbias as a second partial row.
#include "targets/builtin.h"
#include "targets/nvrtc/norm/norm_bwd_launch.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {
NormBwdArgs read_rms(const OpCall& call) {
  const tileops::ops::norm_rms_norm_bwd::View v(call);
  return {v.dy(), v.x(), v.dx(), v.weight(), v.dweight(), nullptr, v.normalized_shape(), v.eps()};
}
NormBwdArgs read_ln(const OpCall& call) {
  const tileops::ops::norm_layer_norm_bwd::View v(call);
  return {v.dy(), v.x(), v.dx(), v.weight(), v.dweight(), v.dbias(), v.normalized_shape(), v.eps()};
}
}  // namespace

NormBwdFamily rms_norm_bwd_family() { return NormBwdFamily{false, read_rms}; }
NormBwdFamily layer_norm_bwd_family() { return NormBwdFamily{true, read_ln}; }

namespace {
KernelBuilder rms_norm_bwd_builder() { return spec_builder(rms_norm_bwd_family()); }
KernelBuilder layer_norm_bwd_builder() { return spec_builder(layer_norm_bwd_family()); }
TILEOPS_BUILTIN_KERNEL(nvrtc, RMSNormBwdOp, rms_norm_bwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, LayerNormBwdOp, layer_norm_bwd_builder);
}  // namespace
}  // namespace tileops::nvrtc
