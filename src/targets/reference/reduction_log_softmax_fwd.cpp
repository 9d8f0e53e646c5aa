// LogSoftmaxFwdOp on the reference target: ref_api itself (at::log_softmax with dtype=None), the oracle.
#include <ATen/core/Tensor.h>
#include <ATen/ops/log_softmax.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::reduction_log_softmax_fwd;

class LogSoftmaxReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const op::View v(call);
    v.y().copy_(at::log_softmax(v.x(), v.dim()));
  }
};

KernelBuilder log_softmax_fwd_builder() { return stateless_builder<LogSoftmaxReference>("log_softmax_fwd (ATen)"); }

}  // namespace

TILEOPS_BUILTIN_KERNEL(reference, LogSoftmaxFwdOp, log_softmax_fwd_builder);

}  // namespace tileops::reference
