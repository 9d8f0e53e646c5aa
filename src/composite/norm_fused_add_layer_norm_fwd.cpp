// FusedAddLayerNormFwdOp: residual_out = x + residual (rounded to x's dtype), y = LayerNorm of it over
// the last dim. Registered CompositeImplicitAutograd (generated): the sub-ops are called through the
// dispatcher, so tracing records elementwise_add_fwd and norm_layer_norm_fwd, never this op.
#include <ATen/core/Tensor.h>

#include "tileops_generated/callers.h"
#include "tileops_generated/composite.h"

namespace tileops::composite {

std::tuple<at::Tensor, at::Tensor> norm_fused_add_layer_norm_fwd(const at::Tensor& x, const at::Tensor& residual,
                                                                 const std::optional<at::Tensor>& weight,
                                                                 const std::optional<at::Tensor>& bias, double eps) {
  const at::Tensor sum = call::elementwise_add_fwd(x, residual, 1);
  const c10::SymInt n = x.sym_size(-1);  // SymInt: dynamic shapes trace without specialising
  return {call::norm_layer_norm_fwd(sum, weight, bias, c10::SymIntArrayRef(&n, 1), eps), sum};
}

}  // namespace tileops::composite
