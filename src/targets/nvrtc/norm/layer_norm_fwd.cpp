// LayerNormFwdOp on the nvrtc target: a row norm (row_norm.h) with mean and bias; on sm_90+ rows of
// 8 KB to 64 KB with 16-byte accesses are staged in shared memory.
#include "targets/builtin.h"
#include "targets/nvrtc/norm/row_norm_launch.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {
RowNormArgs read_args(const OpCall& call) {
  const tileops::ops::norm_layer_norm_fwd::View v(call);
  return {v.x(), v.y(), v.weight(), v.bias(), nullptr, nullptr, v.normalized_shape(), v.eps()};
}
}  // namespace

RowNormFamily layer_norm_fwd_family() { return RowNormFamily{RowNormOp::kLayerNorm, read_args}; }

namespace {
KernelBuilder layer_norm_fwd_builder() { return spec_builder(layer_norm_fwd_family()); }
TILEOPS_BUILTIN_KERNEL(nvrtc, LayerNormFwdOp, layer_norm_fwd_builder);
}  // namespace
}  // namespace tileops::nvrtc
