// GroupNormFwdOp on the reference target: ref_api itself (at::group_norm).
#include <ATen/core/Tensor.h>
#include <ATen/ops/group_norm.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::norm_group_norm_fwd;

class GroupNormReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const op::View v(call);
    v.y().copy_(at::group_norm(v.x(), v.num_groups(), maybe(v.weight()), maybe(v.bias()), v.eps(),
                               /*cudnn_enabled=*/false));
  }
};

KernelBuilder group_norm_builder() { return stateless_builder<GroupNormReference>("group_norm_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, GroupNormFwdOp, group_norm_builder);

}  // namespace
}  // namespace tileops::reference
