// LayerNormFwdOp on the reference target: ref_api itself (at::layer_norm).
#include <ATen/ATen.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::norm_layer_norm_fwd;

class LayerNormReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const op::View v(call);
    v.y().copy_(at::layer_norm(v.x(), v.normalized_shape(), maybe(v.weight()), maybe(v.bias()), v.eps()));
  }
};

KernelBuilder layer_norm_builder() { return stateless_builder<LayerNormReference>("layer_norm_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, LayerNormFwdOp, layer_norm_builder);

}  // namespace
}  // namespace tileops::reference
