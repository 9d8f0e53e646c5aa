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
    const op::View v(call);
    // Computed before anything is written: residual_out may be the residual input (in place).
    const at::Tensor sum = at::add(v.x(), v.residual());
    const at::Tensor y = at::rms_norm(sum, v.normalized_shape(), maybe(v.weight()), v.eps());
    v.residual_out().copy_(sum);
    v.y().copy_(y);
  }
};

KernelBuilder fused_add_rms_norm_builder() {
  return stateless_builder<FusedAddRmsNormReference>("fused_add_rms_norm_fwd (ATen)");
}
TILEOPS_BUILTIN_KERNEL(reference, FusedAddRMSNormFwdOp, fused_add_rms_norm_builder);

}  // namespace
}  // namespace tileops::reference
