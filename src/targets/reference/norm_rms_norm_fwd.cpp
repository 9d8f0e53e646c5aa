// RMSNormFwdOp on the reference target: ref_api itself (at::rms_norm), the correctness oracle; a
// float32 weight beside a 16-bit x is written out in float32 (at::rms_norm warns on the mix).
#include <ATen/core/Tensor.h>
#include <ATen/ops/rms_norm.h>

#include <limits>
#include <memory>

#include "targets/builtin.h"
#include "targets/reference/norm_rms_norm_f32.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::norm_rms_norm_fwd;

class RmsNormReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const op::View v(call);
    const at::Tensor* w = v.weight();
    if (w && w->scalar_type() != v.x().scalar_type()) {  // a float32 weight: in float32, rounded once to x's dtype
      const double eps = v.eps().value_or(std::numeric_limits<float>::epsilon());
      v.y().copy_(rms_norm_f32(v.x(), v.normalized_shape(), *w, 0.0, eps));
      return;
    }
    v.y().copy_(at::rms_norm(v.x(), v.normalized_shape(), maybe(w), v.eps()));
  }
};

}  // namespace

KernelBuilder rms_norm_fwd_builder() { return stateless_builder<RmsNormReference>("rms_norm_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, RMSNormFwdOp, rms_norm_fwd_builder);

}  // namespace tileops::reference
