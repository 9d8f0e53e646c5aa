// BatchNormBwdOp on the reference target: the manifest's formula in float32 with ATen, dx rounded once.
// Not at::native_batch_norm_backward: on CPU it divides by zero for an empty batch.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>

#include <vector>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::norm_batch_norm_bwd;

class BatchNormBwdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const op::View v(call);
    const at::Tensor x = v.x().to(at::kFloat);
    const at::Tensor dy = v.dy().to(at::kFloat);
    const int64_t c = x.size(1);
    std::vector<int64_t> per_channel(x.dim(), 1), dims{0};
    per_channel[1] = c;
    for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
    const at::Tensor mean = v.mean().view(per_channel), rstd = v.rstd().view(per_channel);
    const at::Tensor xh = (x - mean) * rstd;
    const at::Tensor db = dy.sum(dims), dw = (dy * xh).sum(dims);
    v.dbias().copy_(db);
    v.dweight().copy_(dw);
    if (x.numel() == 0) return;  // dx is empty; the sums above are zeros
    const double m = static_cast<double>(x.numel() / c);
    const at::Tensor dx =
        v.weight().view(per_channel) * rstd * (dy - db.view(per_channel) / m - xh * dw.view(per_channel) / m);
    v.dx().copy_(dx);
  }
};

KernelBuilder batch_norm_bwd_builder() { return stateless_builder<BatchNormBwdReference>("batch_norm_bwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, BatchNormBwdOp, batch_norm_bwd_builder);

}  // namespace
}  // namespace tileops::reference
