// InstanceNormFwdOp on the reference target: at::instance_norm on the input's statistics; with
// use_input_stats=False, at::batch_norm in eval mode on the running stats (what instance_norm
// computes then), in float32 so that a 16-bit x and weight meet the float32 stats.
#include <ATen/core/Tensor.h>
#include <ATen/ops/batch_norm.h>
#include <ATen/ops/instance_norm.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::norm_instance_norm_fwd;

std::optional<at::Tensor> as_float(const at::Tensor* t) {
  return t ? std::optional<at::Tensor>(t->to(at::kFloat)) : std::nullopt;
}

class InstanceNormReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const op::View v(call);
    if (v.use_input_stats()) {
      // No running stats here (the generated checks refuse them with use_input_stats): none updated.
      v.y().copy_(at::instance_norm(v.x(), maybe(v.weight()), maybe(v.bias()), std::nullopt, std::nullopt,
                                    /*use_input_stats=*/true, v.momentum(), v.eps(), /*cudnn_enabled=*/false));
      return;
    }
    // Eval mode reads the running stats and writes nothing back.
    v.y().copy_(at::batch_norm(v.x().to(at::kFloat), as_float(v.weight()), as_float(v.bias()),
                               maybe(v.running_mean()), maybe(v.running_var()), /*training=*/false, v.momentum(),
                               v.eps(), /*cudnn_enabled=*/false));
  }
};

KernelBuilder instance_norm_builder() {
  return stateless_builder<InstanceNormReference>("instance_norm_fwd (ATen)");
}
TILEOPS_BUILTIN_KERNEL(reference, InstanceNormFwdOp, instance_norm_builder);

}  // namespace
}  // namespace tileops::reference
