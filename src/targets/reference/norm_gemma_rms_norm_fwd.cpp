// GemmaRMSNormFwdOp and GemmaFusedAddRMSNormFwdOp on the reference target: their ref_api with ATen,
// in float32 (norm_rms_norm_f32.h).
#include <ATen/core/Tensor.h>
#include <ATen/ops/add.h>

#include "targets/builtin.h"
#include "targets/reference/norm_rms_norm_f32.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace rms = tileops::ops::norm_gemma_rms_norm_fwd;
namespace fused = tileops::ops::norm_gemma_fused_add_rms_norm_fwd;

class GemmaRmsNormReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const rms::View v(call);
    v.y().copy_(rms_norm_f32(v.x(), v.normalized_shape(), v.weight(), 1.0, v.eps()));
  }
};

class GemmaFusedAddRmsNormReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const fused::View v(call);
    // Computed before anything is written: residual_out may be the residual input (in place).
    const at::Tensor sum = at::add(v.x(), v.residual());
    const at::Tensor y = rms_norm_f32(sum, v.normalized_shape(), v.weight(), 1.0, v.eps());
    v.residual_out().copy_(sum);
    v.y().copy_(y);
  }
};

KernelBuilder gemma_rms_norm_builder() { return stateless_builder<GemmaRmsNormReference>("gemma_rms_norm_fwd (ATen)"); }
KernelBuilder gemma_fused_add_rms_norm_builder() {
  return stateless_builder<GemmaFusedAddRmsNormReference>("gemma_fused_add_rms_norm_fwd (ATen)");
}
TILEOPS_BUILTIN_KERNEL(reference, GemmaRMSNormFwdOp, gemma_rms_norm_builder);
TILEOPS_BUILTIN_KERNEL(reference, GemmaFusedAddRMSNormFwdOp, gemma_fused_add_rms_norm_builder);

}  // namespace
}  // namespace tileops::reference
