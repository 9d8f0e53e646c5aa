// GemmFwdOp, BmmFwdOp, GemmFp8FwdOp and BmmFp8FwdOp on the reference target: ATen's mm / bmm (cuBLAS on CUDA)
// written into the output; GEMM's transpose flags become transposed views, never copies.
#include <ATen/core/Tensor.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/mm.h>

#include "targets/builtin.h"
#include "targets/reference/gemm_fp8.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace gemm = tileops::ops::gemm_fwd;
namespace bmm = tileops::ops::gemm_bmm_fwd;
namespace fp8 = tileops::ops::gemm_fp8_fwd;
namespace bmm_fp8 = tileops::ops::gemm_bmm_fp8_fwd;

// A scale of 1 element, or one per row and 128-wide block of K, as a factor per element of x [R, K].
at::Tensor per_element(const at::Tensor& scale, int64_t rows, int64_t k) {
  const int64_t blocks = (k + 127) / 128;
  return scale.expand({rows, blocks}).repeat_interleave(128, 1).narrow(1, 0, k);
}

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

class GemmFp8Reference final : public Kernel {
 public:
  void launch(const OpCall& call) const override { gemm_fp8_fwd_aten(call); }
};

// Float32 products and sums, the two scales' product applied once, one rounding into d.
class BmmFp8Reference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const bmm_fp8::View v(call);
    const at::Tensor a = v.a().to(at::kFloat), b = v.b().to(at::kFloat);
    at::Tensor acc = at::bmm(a, v.trans_b() ? b.transpose(1, 2) : b).mul_(v.scale_a().mul(v.scale_b()));
    at::Tensor d = v.d();
    d.copy_(acc);
  }
};

KernelBuilder gemm_fwd_builder() { return stateless_builder<GemmReference>("gemm_fwd (ATen)"); }
KernelBuilder bmm_fwd_builder() { return stateless_builder<BmmReference>("bmm_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, GemmFwdOp, gemm_fwd_builder);
KernelBuilder gemm_fp8_fwd_builder() { return stateless_builder<GemmFp8Reference>("gemm_fp8_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, BmmFwdOp, bmm_fwd_builder);
TILEOPS_BUILTIN_KERNEL(reference, GemmFp8FwdOp, gemm_fp8_fwd_builder);
KernelBuilder bmm_fp8_fwd_builder() { return stateless_builder<BmmFp8Reference>("bmm_fp8_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, BmmFp8FwdOp, bmm_fp8_fwd_builder);

}  // namespace

// Float32 throughout: per-tensor scales multiply the product, per-block ones the operands (the same
// sum of block products times their scales, up to float32 rounding); one rounding into d.
void gemm_fp8_fwd_aten(const OpCall& call) {
  const fp8::View v(call);
  const int64_t m = v.a().size(0), n = v.b().size(0), k = v.a().size(1);
  at::Tensor a = v.a().to(at::kFloat), b = v.b().to(at::kFloat), acc;
  if (v.scale_a().numel() == 1 && v.scale_b().numel() == 1) {
    acc = at::mm(a, b.t()).mul_(v.scale_a().reshape({}).mul(v.scale_b().reshape({})));
  } else {
    acc = at::mm(a.mul_(per_element(v.scale_a(), m, k)), b.mul_(per_element(v.scale_b(), n, k)).t());
  }
  if (const at::Tensor* bias = v.bias()) acc.add_(bias->to(at::kFloat));
  at::Tensor d = v.d();
  d.copy_(acc);
}

}  // namespace tileops::reference
