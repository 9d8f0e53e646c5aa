// AdaLayerNormFwdOp: y = LayerNorm(x) * scale + shift, each step rounded to x's dtype. Registered
// CompositeImplicitAutograd (generated): tracing records norm_layer_norm_fwd, elementwise_mul_fwd and
// elementwise_add_fwd (ada_layer_norm_ops.h), never this op.
#include "composite/ada_layer_norm_ops.h"
#include "tileops_generated/composite.h"

namespace tileops::composite {

at::Tensor norm_ada_layer_norm_fwd(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps) {
  return ada_layer_norm::modulate(x, scale, shift, eps);
}

}  // namespace tileops::composite
