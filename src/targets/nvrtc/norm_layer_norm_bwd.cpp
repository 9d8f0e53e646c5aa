// LayerNormBwdOp on the nvrtc target: src/kernels/norm/layer_norm_bwd.cuh, planned, launched and
// reduced like RMSNormBwdOp (norm_rms_norm_bwd.cpp), with dbias as a second partial row.
#include "targets/builtin.h"
#include "targets/nvrtc/norm_rms_norm_bwd.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace op = tileops::ops::norm_layer_norm_bwd;

KernelBuilder layer_norm_bwd_builder() {
  return make_norm_bwd_builder(
      NormBwdSlots{true, op::dy, op::x, op::weight, op::dx, op::dweight, op::dbias, op::normalized_shape, op::eps});
}

TILEOPS_BUILTIN_KERNEL(nvrtc, LayerNormBwdOp, layer_norm_bwd_builder);

}  // namespace
}  // namespace tileops::nvrtc
