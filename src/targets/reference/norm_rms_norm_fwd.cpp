// RMSNormFwdOp on the reference target: ref_api itself (at::rms_norm), the correctness oracle.
#include <ATen/ATen.h>

#include <memory>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::norm_rms_norm_fwd;

class RmsNormReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const at::Tensor& w = call.inputs[op::weight];
    const at::Tensor y = at::rms_norm(call.inputs[op::x], call.params[op::normalized_shape].as_ints(),
                                      w.defined() ? std::optional<at::Tensor>(w) : std::nullopt,
                                      call.params[op::eps].as_optional_real());
    call.outputs[op::y].copy_(y);
  }
};

}  // namespace

KernelBuilder rms_norm_fwd_builder() { return stateless_builder<RmsNormReference>("rms_norm_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, RMSNormFwdOp, rms_norm_fwd_builder);

}  // namespace tileops::reference
