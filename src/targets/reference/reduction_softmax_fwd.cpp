// SoftmaxFwdOp on the reference target: ref_api itself (at::softmax with dtype=None), the oracle.
#include <ATen/core/Tensor.h>
#include <ATen/ops/softmax.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::reduction_softmax_fwd;

class SoftmaxReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const op::View v(call);
    v.y().copy_(at::softmax(v.x(), v.dim()));
  }
};

KernelBuilder softmax_fwd_builder() { return stateless_builder<SoftmaxReference>("softmax_fwd (ATen)"); }

}  // namespace

TILEOPS_BUILTIN_KERNEL(reference, SoftmaxFwdOp, softmax_fwd_builder);

}  // namespace tileops::reference
