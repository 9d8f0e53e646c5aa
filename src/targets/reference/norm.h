// RMSNorm rows written out in float32 for the reference target: a weight of x's dtype or float32,
// optionally offset (Gemma's 1 + w), the result rounded once to x's dtype.
#pragma once

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/rsqrt.h>

#include <vector>

namespace tileops::reference {

inline at::Tensor rms_norm_f32(const at::Tensor& x, at::IntArrayRef normalized_shape, const at::Tensor& weight,
                               double weight_offset, double eps) {
  std::vector<int64_t> dims;
  for (int64_t d = x.dim() - static_cast<int64_t>(normalized_shape.size()); d < x.dim(); ++d) dims.push_back(d);
  const at::Tensor xf = x.to(at::kFloat);
  at::Tensor y = xf * at::rsqrt(xf.square().mean(dims, /*keepdim=*/true) + eps);
  if (weight.defined()) y = y * (weight.to(at::kFloat) + weight_offset);
  return y.to(x.scalar_type());
}

}  // namespace tileops::reference
