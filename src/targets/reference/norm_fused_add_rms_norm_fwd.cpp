// FusedAddRMSNormFwdOp on the reference target: its ref_api, step by step with ATen.
#include <ATen/core/Tensor.h>
#include <ATen/ops/add.h>
#include <ATen/ops/rms_norm.h>

#include <cfloat>

#include "targets/builtin.h"
#include "targets/reference/norm_rms_norm_f32.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::norm_fused_add_rms_norm_fwd;

class FusedAddRmsNormReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const op::View v(call);
    // Computed before anything is written: residual_out may be the residual input (in place).
    const at::Tensor sum = at::add(v.x(), v.residual());
    const at::Tensor* w = v.weight();
    const auto eps = v.eps();
    // A float32 weight beside a 16-bit x: written out in float32 (at::rms_norm would warn about the
    // mix and take its slow path anyway); eps=None is float32's epsilon, as in F.rms_norm.
    const at::Tensor y = w && w->scalar_type() != sum.scalar_type()
                             ? rms_norm_f32(sum, v.normalized_shape(), *w, 0.0, eps ? *eps : double{FLT_EPSILON})
                             : at::rms_norm(sum, v.normalized_shape(), maybe(w), eps);
    v.residual_out().copy_(sum);
    v.y().copy_(y);
  }
};

KernelBuilder fused_add_rms_norm_builder() {
  return stateless_builder<FusedAddRmsNormReference>("fused_add_rms_norm_fwd (ATen)");
}
TILEOPS_BUILTIN_KERNEL(reference, FusedAddRMSNormFwdOp, fused_add_rms_norm_builder);

}  // namespace
}  // namespace tileops::reference
