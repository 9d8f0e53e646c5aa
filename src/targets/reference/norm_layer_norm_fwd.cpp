// LayerNormFwdOp on the reference target: ref_api itself (at::layer_norm).
#include <ATen/core/Tensor.h>
#include <ATen/ops/layer_norm.h>

#include <optional>

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
    const at::Tensor& x = v.x();
    const bool mixed = (v.weight() && v.weight()->scalar_type() != x.scalar_type()) ||
                       (v.bias() && v.bias()->scalar_type() != x.scalar_type());
    if (mixed) {  // float32 weight/bias beside a 16-bit x: torch's CUDA kernel refuses the mix, so in float32
      const auto f = [](const at::Tensor* t) { return t ? std::optional<at::Tensor>(t->to(at::kFloat)) : std::nullopt; };
      v.y().copy_(at::layer_norm(x.to(at::kFloat), v.normalized_shape(), f(v.weight()), f(v.bias()), v.eps()));
      return;
    }
    v.y().copy_(at::layer_norm(x, v.normalized_shape(), maybe(v.weight()), maybe(v.bias()), v.eps()));
  }
};

KernelBuilder layer_norm_builder() { return stateless_builder<LayerNormReference>("layer_norm_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, LayerNormFwdOp, layer_norm_builder);

}  // namespace
}  // namespace tileops::reference
