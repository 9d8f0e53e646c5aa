// The sub-op calls AdaLayerNormFwdOp and AdaLayerNormZeroFwdOp share: LayerNorm over the last dim
// without an affine, then the modulation by scale and shift, each through the dispatcher.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

namespace tileops::composite::ada_layer_norm {

inline at::Tensor product(const at::Tensor& a, const at::Tensor& b) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("tileops::elementwise_mul_fwd", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&, std::optional<c10::string_view>)>();
  return op.call(a, b, std::nullopt);
}

// LayerNorm(x) * scale + shift.
inline at::Tensor modulate(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps) {
  static const auto layer_norm =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("tileops::norm_layer_norm_fwd", "")
          .typed<at::Tensor(const at::Tensor&, const std::optional<at::Tensor>&, const std::optional<at::Tensor>&,
                            c10::SymIntArrayRef, double, std::optional<c10::string_view>)>();
  static const auto add = c10::Dispatcher::singleton()
                              .findSchemaOrThrow("tileops::elementwise_add_fwd", "")
                              .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const c10::Scalar&,
                                                std::optional<c10::string_view>)>();
  const c10::SymInt n = x.sym_size(-1);  // SymInt: dynamic shapes trace without specialising
  const at::Tensor normed = layer_norm.call(x, std::nullopt, std::nullopt, c10::SymIntArrayRef(&n, 1), eps, std::nullopt);
  return add.call(product(normed, scale), shift, 1, std::nullopt);
}

}  // namespace tileops::composite::ada_layer_norm
