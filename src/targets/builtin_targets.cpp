// The in-tree targets. Their kernels come from TILEOPS_BUILTIN_KERNEL lines in the per-op files.
#include "targets/builtin.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/registry.h"

#include <c10/util/Exception.h>

namespace tileops::registry {

std::vector<BuiltinKernel>& builtin_kernels() {
  static std::vector<BuiltinKernel> kernels;  // filled by static initializers, read once below
  return kernels;
}

void register_builtin_targets() {
  // Fallbacks: an out-of-tree target that claims a device wins over these.
  TargetRegistration nvrtc("nvrtc");
  nvrtc.fallback().detector([](const c10::Device& d) { return d.is_cuda(); });
  // Library-backed CUDA kernels (GEMM through cuBLASLt): never detected, asked first for the CUDA
  // calls of ops with no verified nvrtc kernel.
  TargetRegistration cublaslt("cublaslt");
  cublaslt.backstop_on([](const c10::Device& d) { return d.is_cuda(); });
  TargetRegistration reference("reference");
  // ATen runs on every device: the reference serves what neither of the others has verified.
  reference.fallback().backstop().detector([](const c10::Device& d) { return d.is_cpu(); });
  for (const BuiltinKernel& k : builtin_kernels()) {
    const std::string_view t = k.target;
    TORCH_CHECK(t == "nvrtc" || t == "cublaslt" || t == "reference", "tileops: in-tree kernel for ", k.op,
                " names an unknown target '", t, "'");
    TargetRegistration& r = t == "nvrtc" ? nvrtc : t == "cublaslt" ? cublaslt : reference;
    r.kernel(k.op, k.make(), k.status);
  }
  on_clear_kernel_caches(&nvrtc::clear_cubin_cache);
  nvrtc.commit();
  cublaslt.commit();
  reference.commit();
}

}  // namespace tileops::registry
