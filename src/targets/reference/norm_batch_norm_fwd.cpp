// BatchNormFwdOp on the reference target: at::batch_norm on float32 x (a 16-bit x then meets float32
// statistics, and y is rounded once), which updates the given running stats in place when training.
#include <ATen/core/Tensor.h>
#include <ATen/ops/batch_norm.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::norm_batch_norm_fwd;

std::optional<at::Tensor> as_float(const at::Tensor* t) {
  return t ? std::optional<at::Tensor>(t->to(at::kFloat)) : std::nullopt;
}

class BatchNormReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const op::View v(call);
    v.y().copy_(at::batch_norm(v.x().to(at::kFloat), as_float(v.weight()), as_float(v.bias()),
                               maybe(v.running_mean()), maybe(v.running_var()), v.training(), v.momentum(), v.eps(),
                               /*cudnn_enabled=*/false));
  }
};

KernelBuilder batch_norm_builder() { return stateless_builder<BatchNormReference>("batch_norm_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, BatchNormFwdOp, batch_norm_builder);

}  // namespace
}  // namespace tileops::reference
