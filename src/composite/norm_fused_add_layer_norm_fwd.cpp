// FusedAddLayerNormFwdOp: residual_out = x + residual (rounded to x's dtype), y = LayerNorm of it over
// the last dim. Registered CompositeImplicitAutograd (generated): the sub-ops are called through the
// dispatcher, so tracing records elementwise_add_fwd and norm_layer_norm_fwd, never this op.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include "tileops_generated/composite.h"

namespace tileops::composite {

std::tuple<at::Tensor, at::Tensor> norm_fused_add_layer_norm_fwd(const at::Tensor& x, const at::Tensor& residual,
                                                                 const std::optional<at::Tensor>& weight,
                                                                 const std::optional<at::Tensor>& bias, double eps) {
  static const auto add = c10::Dispatcher::singleton()
                              .findSchemaOrThrow("tileops::elementwise_add_fwd", "")
                              .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const c10::Scalar&,
                                                std::optional<c10::string_view>)>();
  static const auto layer_norm =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("tileops::norm_layer_norm_fwd", "")
          .typed<at::Tensor(const at::Tensor&, const std::optional<at::Tensor>&, const std::optional<at::Tensor>&,
                            c10::SymIntArrayRef, double, std::optional<c10::string_view>)>();
  const at::Tensor sum = add.call(x, residual, 1, std::nullopt);
  const c10::SymInt n = x.sym_size(-1);  // SymInt: dynamic shapes trace without specialising
  return {layer_norm.call(sum, weight, bias, c10::SymIntArrayRef(&n, 1), eps, std::nullopt), sum};
}

}  // namespace tileops::composite
