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
    const op::View v(call);
    v.y().copy_(at::rms_norm(v.x(), v.normalized_shape(), maybe(v.weight()), v.eps()));
  }
};

}  // namespace

KernelBuilder rms_norm_fwd_builder() { return stateless_builder<RmsNormReference>("rms_norm_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, RMSNormFwdOp, rms_norm_fwd_builder);

}  // namespace tileops::reference
