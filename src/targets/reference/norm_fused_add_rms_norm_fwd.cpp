// FusedAddRMSNormFwdOp on the reference target: its ref_api, step by step with ATen.
#include <ATen/ATen.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::norm_fused_add_rms_norm_fwd;

class FusedAddRmsNormReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const at::Tensor& w = call.inputs[op::weight];
    // Computed before anything is written: residual_out may be the residual input (in place).
    const at::Tensor sum = at::add(call.inputs[op::x], call.inputs[op::residual]);
    const at::Tensor y = at::rms_norm(sum, call.params[op::normalized_shape].as_ints(),
                                      w.defined() ? std::optional<at::Tensor>(w) : std::nullopt,
                                      call.params[op::eps].as_optional_real());
    call.outputs[op::residual_out].copy_(sum);
    call.outputs[op::y].copy_(y);
  }
};

KernelBuilder fused_add_rms_norm_builder() {
  return stateless_builder<FusedAddRmsNormReference>("fused_add_rms_norm_fwd (ATen)");
}
TILEOPS_BUILTIN_KERNEL(reference, FusedAddRMSNormFwdOp, fused_add_rms_norm_builder);

}  // namespace
}  // namespace tileops::reference
