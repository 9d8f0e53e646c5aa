// LayerNormBwdOp on the reference target: the manifest's formula in float32 with ATen, rounded once.
// The correctness oracle for the NVRTC backward kernels.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/rsqrt.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::norm_layer_norm_bwd;

class LayerNormBwdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const op::View v(call);
    const int64_t n = c10::multiply_integers(v.normalized_shape());
    const double eps = v.eps();
    const at::Tensor& dx_out = v.dx();
    const at::Tensor* dw_out = v.dweight();  // nullptr when the branch drops it
    const at::Tensor* db_out = v.dbias();
    const at::Tensor x = v.x().to(at::kFloat).reshape({-1, n});
    const at::Tensor dy = v.dy().to(at::kFloat).reshape({-1, n});
    const at::Tensor* w = v.weight();

    const at::Tensor mu = x.mean(-1, /*keepdim=*/true);
    const at::Tensor xc = x - mu;
    const at::Tensor r = at::rsqrt(xc.square().mean(-1, /*keepdim=*/true) + eps);  // biased variance
    const at::Tensor xh = xc * r;
    const at::Tensor g = w ? dy * w->to(at::kFloat).reshape({n}) : dy;
    const at::Tensor dx = r * (g - g.mean(-1, /*keepdim=*/true) - xh * (g * xh).mean(-1, /*keepdim=*/true));
    dx_out.copy_(dx.view(dx_out.sizes()));
    if (dw_out) dw_out->copy_((dy * xh).sum(0).view(dw_out->sizes()));
    if (db_out) db_out->copy_(dy.sum(0).view(db_out->sizes()));
  }
};

KernelBuilder layer_norm_bwd_builder() { return stateless_builder<LayerNormBwdReference>("layer_norm_bwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, LayerNormBwdOp, layer_norm_bwd_builder);

}  // namespace
}  // namespace tileops::reference
