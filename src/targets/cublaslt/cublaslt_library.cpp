#include "targets/cublaslt/cublaslt_library.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>
#include <dlfcn.h>

#include <array>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"
#include "jit/cuda_driver.h"
#include "jit/dl_symbol.h"
#include "targets/torch_wheel.h"

namespace tileops::cublaslt {
namespace {

// The soname of the CUDA major torch was built for; the loaded copy first, then the torch wheel's
// nvidia/ folders, then the loader's search path.
LtApi load(std::string* error) {
  const std::string major = TILEOPS_BUILT_CUDA_MAJOR;
  LtApi api{};
  if (major == "none") {
    *error = "cuBLASLt: this torch was built without CUDA";
    return api;
  }
  const std::string soname = "libcublasLt.so." + major;
  std::vector<std::string> candidates{soname};
  for (const std::string& dir : torch_wheel_library_dirs()) candidates.push_back(dir + "/" + soname);
  std::string tried;
  void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  for (size_t i = 0; lib == nullptr && i < candidates.size(); ++i) {
    lib = dlopen(candidates[i].c_str(), RTLD_NOW | RTLD_LOCAL);
    const char* why = lib ? nullptr : dlerror();
    if (!lib) tried += "\n  " + candidates[i] + ": " + (why ? why : "not found");
  }
  if (lib == nullptr) {
    *error = "cannot load cuBLASLt (" + soname + ", shipped by torch's CUDA wheels as nvidia-cublas); tried:" + tried;
    return api;
  }
  std::string missing;
  using jit::resolve;
  resolve(lib, "cublasLtCreate", api.create, &missing);
  resolve(lib, "cublasLtGetVersion", api.get_version, &missing);
  resolve(lib, "cublasLtGetStatusName", api.status_name, &missing);
  resolve(lib, "cublasLtMatmulDescCreate", api.desc_create, &missing);
  resolve(lib, "cublasLtMatmulDescDestroy", api.desc_destroy, &missing);
  resolve(lib, "cublasLtMatmulDescSetAttribute", api.desc_set, &missing);
  resolve(lib, "cublasLtMatrixLayoutCreate", api.layout_create, &missing);
  resolve(lib, "cublasLtMatrixLayoutDestroy", api.layout_destroy, &missing);
  resolve(lib, "cublasLtMatrixLayoutSetAttribute", api.layout_set, &missing);
  resolve(lib, "cublasLtMatmulPreferenceCreate", api.pref_create, &missing);
  resolve(lib, "cublasLtMatmulPreferenceDestroy", api.pref_destroy, &missing);
  resolve(lib, "cublasLtMatmulPreferenceSetAttribute", api.pref_set, &missing);
  resolve(lib, "cublasLtMatmulAlgoGetHeuristic", api.heuristic, &missing);
  resolve(lib, "cublasLtMatmul", api.matmul, &missing);
  if (!missing.empty()) *error = soname + " lacks " + missing;
  else log::info("tileops: cuBLASLt " + std::to_string(api.get_version()) + " loaded");
  return api;  // the handle stays open: the pointers live for the process
}

struct Loaded {
  LtApi api;
  std::string error;
};

const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded r;
    r.api = load(&r.error);
    return r;
  }();
  return l;
}

constexpr int kMaxDevices = 64;

}  // namespace

const LtApi& lt() {
  const Loaded& l = loaded();
  TORCH_CHECK(l.error.empty(), "tileops: target 'cublaslt': ", l.error);
  return l.api;
}

void check(cublasStatus_t s, const char* op, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const char* name = lt().status_name ? lt().status_name(s) : nullptr;
  TORCH_CHECK(false, op, ": cuBLASLt ", what, " failed: ", name ? name : "status " + std::to_string(int(s)));
}

cublasLtHandle_t handle(c10::DeviceIndex device) {
  static std::array<std::once_flag, kMaxDevices> once;
  static std::array<cublasLtHandle_t, kMaxDevices> handles{};
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "tileops: target 'cublaslt': device index ", int(device),
              " is out of range");
  std::call_once(once[device], [&] {
    const c10::cuda::CUDAGuard guard(device);
    check(lt().create(&handles[device]), "tileops: target 'cublaslt'", "cublasLtCreate");
  });
  return handles[device];
}

size_t workspace_bytes(c10::DeviceIndex device) {
  static std::array<std::once_flag, kMaxDevices> once;
  static std::array<size_t, kMaxDevices> bytes{};
  std::call_once(once[device], [&] {
    int major = 0;
    CUdevice dev = 0;
    jit::check_cu(jit::driver().cuDeviceGet(&dev, device), "cuDeviceGet");
    jit::check_cu(jit::driver().cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                  "cuDeviceGetAttribute");
    // Hopper's stream-K and split-K plans want more scratch than earlier parts (torch's size too).
    bytes[device] = size_t(major >= 9 ? 32 : 4) << 20;
  });
  return bytes[device];
}

Workspace workspace(const c10::cuda::CUDAStream& stream) {
  static std::mutex mu;
  // Leaked: the buffers outlive every stream, and freeing at exit could follow CUDA's teardown.
  static auto& buffers = *new std::map<std::pair<int, cudaStream_t>, c10::DataPtr>();
  const auto key = std::make_pair(int(stream.device_index()), stream.stream());
  const size_t size = workspace_bytes(stream.device_index());
  std::lock_guard<std::mutex> lock(mu);
  auto it = buffers.find(key);
  if (it != buffers.end()) return {it->second.get(), size};
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  {
    jit::ScopedContext ctx(jit::primary_context(stream.device_index()));
    jit::check_cu(jit::driver().cuStreamIsCapturing(stream.stream(), &status), "cuStreamIsCapturing");
  }
  if (status != CU_STREAM_CAPTURE_STATUS_NONE) return {};
  const c10::cuda::CUDAStreamGuard guard(stream);  // the caching allocator ties the block to this stream
  c10::DataPtr buf = c10::cuda::CUDACachingAllocator::get()->allocate(size);
  void* ptr = buf.get();
  buffers.emplace(key, std::move(buf));
  return {ptr, size};
}

}  // namespace tileops::cublaslt
