// RMSNormBwdOp on the reference target: the manifest's formula in float32 with ATen, rounded once.
// The correctness oracle for the NVRTC backward kernels.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/rsqrt.h>

#include <limits>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::norm_rms_norm_bwd;

class RmsNormBwdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const op::View v(call);
    // F.rms_norm's eps=None is the computation dtype's epsilon (float32), not the input's.
    const double eps = v.eps().value_or(std::numeric_limits<float>::epsilon());
    const int64_t n = c10::multiply_integers(v.normalized_shape());
    const at::Tensor& dx_out = v.dx();
    const at::Tensor* dw_out = v.dweight();  // nullptr in the _without_dweight branch
    const at::Tensor x = v.x().to(at::kFloat).reshape({-1, n});
    const at::Tensor dy = v.dy().to(at::kFloat).reshape({-1, n});
    const at::Tensor* w = v.weight();

    const at::Tensor r = at::rsqrt(x.square().mean(-1, /*keepdim=*/true) + eps);
    const at::Tensor g = w ? dy * w->to(at::kFloat).reshape({n}) : dy;
    const at::Tensor dx = r * (g - x * r.square() * (g * x).mean(-1, /*keepdim=*/true));
    dx_out.copy_(dx.view(dx_out.sizes()));
    if (dw_out) dw_out->copy_((dy * x * r).sum(0).view(dw_out->sizes()));
  }
};

KernelBuilder rms_norm_bwd_builder() { return stateless_builder<RmsNormBwdReference>("rms_norm_bwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, RMSNormBwdOp, rms_norm_bwd_builder);

}  // namespace
}  // namespace tileops::reference
