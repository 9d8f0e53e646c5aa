// AdaLayerNormZeroFwdOp: y = gate * (LayerNorm(x) * scale + shift), each step rounded to x's dtype.
// Registered CompositeImplicitAutograd (generated): tracing records the sub-ops, never this op.
#include "composite/ada_layer_norm_ops.h"
#include "tileops_generated/composite.h"

namespace tileops::composite {

at::Tensor norm_ada_layer_norm_zero_fwd(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift,
                                        const at::Tensor& gate, double eps) {
  return ada_layer_norm::product(gate, ada_layer_norm::modulate(x, scale, shift, eps));
}

}  // namespace tileops::composite
