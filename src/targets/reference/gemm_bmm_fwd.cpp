// BmmFwdOp on the reference target: ATen's bmm (cuBLAS on CUDA), written into the output.
#include <ATen/core/Tensor.h>
#include <ATen/ops/bmm.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::gemm_bmm_fwd;

class BmmReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const op::View v(call);
    at::Tensor d = v.d();
    at::bmm_out(d, v.a(), v.b());
  }
};

KernelBuilder bmm_fwd_builder() { return stateless_builder<BmmReference>("bmm_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, BmmFwdOp, bmm_fwd_builder);

}  // namespace
}  // namespace tileops::reference
