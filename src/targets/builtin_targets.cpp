// The in-tree targets. Their kernels come from TILEOPS_BUILTIN_KERNEL lines in the per-op files.
#include "targets/builtin.h"
#include "targets/registry.h"

namespace tileops::registry {

std::vector<BuiltinKernel>& builtin_kernels() {
  static std::vector<BuiltinKernel> kernels;  // filled by static initializers, read once below
  return kernels;
}

void register_builtin_targets() {
  // Fallbacks: an out-of-tree target that claims a device wins over these.
  TargetRegistration nvrtc("nvrtc");
  nvrtc.fallback().detector([](const c10::Device& d) { return d.is_cuda(); });
  TargetRegistration reference("reference");
  // ATen runs on every device: the reference serves CUDA calls of ops whose nvrtc kernel is missing or pending.
  reference.fallback().backstop().detector([](const c10::Device& d) { return d.is_cpu(); });
  for (const BuiltinKernel& k : builtin_kernels()) {
    TargetRegistration& r = std::string_view(k.target) == "nvrtc" ? nvrtc : reference;
    r.kernel(k.op, k.make(), k.status);
  }
  nvrtc.commit();
  reference.commit();
}

}  // namespace tileops::registry
