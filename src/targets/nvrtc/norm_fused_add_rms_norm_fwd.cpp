// FusedAddRMSNormFwdOp on the nvrtc target: the RMSNorm kernel with the residual add fused in
// (src/kernels/norm/rms_norm_fwd.cuh, fused_add_rms_norm_fwd). Both branches use the same kernel:
// in place, residual_out is the residual input itself.
#include "targets/builtin.h"
#include "targets/nvrtc/norm_rms_norm_fwd.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace op = tileops::ops::norm_fused_add_rms_norm_fwd;

KernelBuilder fused_add_rms_norm_builder() {
  return make_rms_norm_builder(
      RmsNormSlots{op::x, op::residual, op::weight, op::y, op::residual_out, op::normalized_shape, op::eps});
}
TILEOPS_BUILTIN_KERNEL(nvrtc, FusedAddRMSNormFwdOp, fused_add_rms_norm_builder);

}  // namespace
}  // namespace tileops::nvrtc
