// GemmFwdOp and BmmFwdOp on the reference target: ATen's mm / bmm (cuBLAS on CUDA) written into the
// output; GEMM's transpose flags become transposed views, never copies.
#include <ATen/core/Tensor.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/mm.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace gemm = tileops::ops::gemm_fwd;
namespace bmm = tileops::ops::gemm_bmm_fwd;

class GemmReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gemm::View v(call);
    at::Tensor d = v.d();
    at::mm_out(d, v.trans_a() ? v.a().t() : v.a(), v.trans_b() ? v.b().t() : v.b());
  }
};

class BmmReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const bmm::View v(call);
    at::Tensor d = v.d();
    at::bmm_out(d, v.a(), v.b());
  }
};

KernelBuilder gemm_fwd_builder() { return stateless_builder<GemmReference>("gemm_fwd (ATen)"); }
KernelBuilder bmm_fwd_builder() { return stateless_builder<BmmReference>("bmm_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, GemmFwdOp, gemm_fwd_builder);
TILEOPS_BUILTIN_KERNEL(reference, BmmFwdOp, bmm_fwd_builder);

}  // namespace
}  // namespace tileops::reference
