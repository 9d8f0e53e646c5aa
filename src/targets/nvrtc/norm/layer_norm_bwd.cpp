// LayerNormBwdOp on the nvrtc target: a norm backward (norm_bwd.h) with dbias as a second partial row.
#include "targets/builtin.h"
#include "targets/nvrtc/norm/norm_bwd_launch.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {
namespace op = tileops::ops::norm_layer_norm_bwd;
}  // namespace

NormBwdFamily layer_norm_bwd_family() {
  return NormBwdFamily{
      NormBwdSlots{true, op::dy, op::x, op::weight, op::dx, op::dweight, op::dbias, op::normalized_shape, op::eps}};
}

namespace {
KernelBuilder layer_norm_bwd_builder() { return spec_builder(layer_norm_bwd_family()); }
TILEOPS_BUILTIN_KERNEL(nvrtc, LayerNormBwdOp, layer_norm_bwd_builder);
}  // namespace
}  // namespace tileops::nvrtc
