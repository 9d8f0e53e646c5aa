// GemmFwdOp on the reference target: ATen's mm over the operands as their flags lay them out
// (transposed views, no copies), written into the output.
#include <ATen/core/Tensor.h>
#include <ATen/ops/mm.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::gemm_fwd;

class GemmReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const op::View v(call);
    at::Tensor d = v.d();
    at::mm_out(d, v.trans_a() ? v.a().t() : v.a(), v.trans_b() ? v.b().t() : v.b());
  }
};

KernelBuilder gemm_fwd_builder() { return stateless_builder<GemmReference>("gemm_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, GemmFwdOp, gemm_fwd_builder);

}  // namespace
}  // namespace tileops::reference
