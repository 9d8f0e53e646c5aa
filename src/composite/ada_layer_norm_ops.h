// The sub-op calls AdaLayerNormFwdOp and AdaLayerNormZeroFwdOp share: LayerNorm over the last dim
// without an affine, then the modulation by scale and shift, each through the dispatcher.
#pragma once

#include <ATen/core/Tensor.h>

#include "tileops_generated/callers.h"

namespace tileops::composite::ada_layer_norm {

inline at::Tensor product(const at::Tensor& a, const at::Tensor& b) { return call::elementwise_mul_fwd(a, b); }

// LayerNorm(x) * scale + shift.
inline at::Tensor modulate(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps) {
  const c10::SymInt n = x.sym_size(-1);  // SymInt: dynamic shapes trace without specialising
  const at::Tensor normed = call::norm_layer_norm_fwd(x, std::nullopt, std::nullopt, c10::SymIntArrayRef(&n, 1), eps);
  return call::elementwise_add_fwd(product(normed, scale), shift, 1);
}

}  // namespace tileops::composite::ada_layer_norm
