// Where torch's CUDA wheels keep the CUDA libraries (site-packages/nvidia/...): found from the file
// libc10_cuda was loaded from, so NVRTC and cuBLASLt load from the same wheels as torch's own.
#pragma once

#include <c10/cuda/CUDAStream.h>
#include <dlfcn.h>

#include <string>
#include <vector>

namespace tileops {

// Empty when torch does not sit in a site-packages folder (a source build).
inline std::vector<std::string> torch_wheel_library_dirs() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&c10::cuda::getCurrentCUDAStream), &info) || !info.dli_fname) return {};
  const std::string lib = info.dli_fname;               // .../site-packages/torch/lib/libc10_cuda.so
  const size_t at = lib.rfind("/torch/");
  if (at == std::string::npos) return {};
  const std::string nvidia = lib.substr(0, at) + "/nvidia/";
  return {nvidia + "cu" TILEOPS_BUILT_CUDA_MAJOR "/lib", nvidia + "cuda_nvrtc/lib", nvidia + "cublas/lib"};
}

}  // namespace tileops
