// TileOPs' Neox rotary embedding at explicit positions, shared by RopeNeoxPositionIdsFwdOp and the ops
// that fuse it (GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp): its table cos/sin(p * f_i), f_i =
// 1 / base^(i / half), in float32 rounded to the table dtype (TileOPs keeps the table in x's dtype),
// then the rotation in float32.
#pragma once

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/pow.h>

namespace tileops::reference {

// x [tokens, heads, D] of any float dtype, positions [tokens] (any integer dtype): x in float32 with
// its first `rot` dims of each head rotated (x1 = x[:half], x2 = x[half:rot] become x1*cos - x2*sin
// and x2*cos + x1*sin), the rest as they are. The caller rounds once.
inline at::Tensor rope_neox_float(const at::Tensor& x, const at::Tensor& positions, double base, int64_t rot,
                                  c10::ScalarType table_dtype) {
  at::Tensor out = x.to(at::kFloat).clone();
  const int64_t half = rot / 2;
  if (half == 0 || x.numel() == 0) return out;
  const auto f32 = x.options().dtype(at::kFloat);
  const at::Tensor freqs = at::pow(base, at::arange(half, f32) / static_cast<double>(half)).reciprocal();
  const at::Tensor angles = positions.to(at::kFloat).unsqueeze(1) * freqs.unsqueeze(0);  // [tokens, half]
  const at::Tensor cos = angles.cos().to(table_dtype).to(at::kFloat).unsqueeze(1);
  const at::Tensor sin = angles.sin().to(table_dtype).to(at::kFloat).unsqueeze(1);
  const at::Tensor x1 = out.narrow(2, 0, half).clone(), x2 = out.narrow(2, half, half).clone();
  out.narrow(2, 0, half).copy_(x1 * cos - x2 * sin);
  out.narrow(2, half, half).copy_(x2 * cos + x1 * sin);
  return out;
}

}  // namespace tileops::reference
