// LayerNormFwdOp on the reference target: ref_api itself (at::layer_norm).
#include <ATen/ATen.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::norm_layer_norm_fwd;

std::optional<at::Tensor> maybe(const at::Tensor& t) { return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt; }

class LayerNormReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    call.outputs[op::y].copy_(at::layer_norm(call.inputs[op::x], call.params[op::normalized_shape].as_ints(),
                                             maybe(call.inputs[op::weight]), maybe(call.inputs[op::bias]),
                                             call.params[op::eps].as_real()));
  }
};

KernelBuilder layer_norm_builder() { return stateless_builder<LayerNormReference>("layer_norm_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, LayerNormFwdOp, layer_norm_builder);

}  // namespace
}  // namespace tileops::reference
