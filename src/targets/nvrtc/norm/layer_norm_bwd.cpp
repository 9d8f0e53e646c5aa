// LayerNormBwdOp on the nvrtc target: a norm backward (norm_bwd.h) with dbias as a second partial row.
#include "targets/builtin.h"
#include "targets/nvrtc/norm/norm_bwd_launch.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {
NormBwdArgs read_args(const OpCall& call) {
  const tileops::ops::norm_layer_norm_bwd::View v(call);
  return {v.dy(), v.x(), v.dx(), v.weight(), v.dweight(), v.dbias(), v.normalized_shape(), v.eps()};
}
}  // namespace

NormBwdFamily layer_norm_bwd_family() { return NormBwdFamily{true, read_args}; }

namespace {
KernelBuilder layer_norm_bwd_builder() { return spec_builder(layer_norm_bwd_family()); }
TILEOPS_BUILTIN_KERNEL(nvrtc, LayerNormBwdOp, layer_norm_bwd_builder);
}  // namespace
}  // namespace tileops::nvrtc
