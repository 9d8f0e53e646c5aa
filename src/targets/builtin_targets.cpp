// The in-tree targets and the kernels each serves: one place to bind a new op (vLLM-style).
#include "targets/nvrtc/norm_rms_norm_fwd.h"
#include "targets/reference/reference.h"
#include "targets/registry.h"

namespace tileops::registry {

void register_builtin_targets() {
  // Fallbacks: an out-of-tree target that claims a device wins over these.
  TargetRegistration nvrtc("nvrtc");
  nvrtc.fallback().detector([](const c10::Device& d) { return d.is_cuda(); });
  nvrtc.kernel("RMSNormFwdOp", nvrtc::rms_norm_fwd_builder());
  nvrtc.commit();

  TargetRegistration reference("reference");
  reference.fallback().detector([](const c10::Device& d) { return d.is_cpu(); });
  reference.kernel("RMSNormFwdOp", reference::rms_norm_fwd_builder());
  reference.commit();
}

}  // namespace tileops::registry
