#include "jit/cuda_driver.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "common/log.h"
#include "jit/dl_symbol.h"
#include "jit/jit_error.h"

namespace tileops::jit {
namespace {

std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown dlopen error";
}

// ---- driver ----------------------------------------------------------------------------------
// Symbol names are spelled out: cuda.h #defines several API names to their versioned ABI symbols
// (cuCtxPushCurrent -> cuCtxPushCurrent_v2), and dlsym needs the ABI name.
std::string load_driver(DriverApi& api) {
  const char* lib_name = "libcuda.so.1";
  void* lib = dlopen(lib_name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return "no CUDA driver/GPU: cannot load " + std::string(lib_name) + " (" + dl_error() + ")";
  std::string missing;
  resolve(lib, "cuInit", api.cuInit, &missing);
  resolve(lib, "cuDriverGetVersion", api.cuDriverGetVersion, &missing);
  resolve(lib, "cuGetErrorName", api.cuGetErrorName, &missing);
  resolve(lib, "cuGetErrorString", api.cuGetErrorString, &missing);
  resolve(lib, "cuDeviceGet", api.cuDeviceGet, &missing);
  resolve(lib, "cuDeviceGetAttribute", api.cuDeviceGetAttribute, &missing);
  resolve(lib, "cuDevicePrimaryCtxRetain", api.cuDevicePrimaryCtxRetain, &missing);
  resolve(lib, "cuCtxGetCurrent", api.cuCtxGetCurrent, &missing);
  resolve(lib, "cuCtxSetCurrent", api.cuCtxSetCurrent, &missing);
  resolve(lib, "cuCtxPushCurrent_v2", api.cuCtxPushCurrent, &missing);
  resolve(lib, "cuCtxPopCurrent_v2", api.cuCtxPopCurrent, &missing);
  resolve(lib, "cuModuleLoadData", api.cuModuleLoadData, &missing);
  resolve(lib, "cuModuleUnload", api.cuModuleUnload, &missing);
  resolve(lib, "cuModuleGetFunction", api.cuModuleGetFunction, &missing);
  resolve(lib, "cuFuncSetAttribute", api.cuFuncSetAttribute, &missing);
  resolve(lib, "cuOccupancyMaxActiveBlocksPerMultiprocessor", api.cuOccupancyMaxActiveBlocksPerMultiprocessor,
          &missing);
  resolve(lib, "cuLaunchKernel", api.cuLaunchKernel, &missing);
  resolve(lib, "cuStreamIsCapturing", api.cuStreamIsCapturing, &missing);
  resolve(lib, "cuLaunchKernelEx", api.cuLaunchKernelEx, nullptr);  // CUDA >= 11.8 drivers only
  if (!missing.empty())
    return "CUDA driver " + std::string(lib_name) + " is too old: missing " + missing;
  CUresult r = api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    const char* text = nullptr;
    api.cuGetErrorName(r, &name);
    api.cuGetErrorString(r, &text);
    return "no CUDA driver/GPU: cuInit(0) failed: " + std::string(name ? name : "?") + ": " +
           (text ? text : "?");
  }
  // The handle is never closed: function pointers into it live for the whole process.
  return "";
}

struct DriverState {
  DriverApi api{};
  std::string error;  // empty on success; a failure is remembered and rethrown
};

const DriverState& driver_state() noexcept {
  static const DriverState state = [] {
    DriverState s;
    try {
      s.error = load_driver(s.api);
    } catch (const std::exception& e) {
      s.error = std::string("no CUDA driver/GPU: ") + e.what();
    }
    if (!s.error.empty()) log::debug("tileops: " + s.error);
    return s;
  }();
  return state;
}

// ---- NVRTC -----------------------------------------------------------------------------------
struct NvrtcState {
  std::mutex mu;
  std::vector<std::string> dirs;  // from add_library_search_dir
  size_t dirs_at_failure = 0;     // a failed load is retried only once new folders were added
  std::string error;
  NvrtcApi api{};
  std::atomic<bool> loaded{false};
};

NvrtcState& nvrtc_state() {
  static auto* s = new NvrtcState();  // leaked: may be used during static destruction
  return *s;
}

// libnvrtc dlopen()s "libnvrtc-builtins.so.<major>.<minor>" by name when it compiles, and it has
// no RUNPATH: loaded from a folder outside the loader's search path (the torch wheel's), it would
// fail with "failed to open libnvrtc-builtins". Loading the builtins from libnvrtc's own folder
// first makes that later dlopen find the already loaded library by its soname.
void preload_builtins(const NvrtcApi& api) {
  Dl_info info{};
  int major = 0, minor = 0;
  if (!dladdr(reinterpret_cast<void*>(api.nvrtcVersion), &info) || !info.dli_fname ||
      api.nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
    return;
  std::string dir = info.dli_fname;
  dir = dir.find('/') == std::string::npos ? "." : dir.substr(0, dir.rfind('/'));
  const std::string path =
      dir + "/libnvrtc-builtins.so." + std::to_string(major) + "." + std::to_string(minor);
  if (dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return;  // kept open for the process' life
  log::debug("tileops: no NVRTC builtins next to libnvrtc (" + dl_error() + "); relying on the loader");
}

// Opens one candidate and resolves every symbol; on failure appends a line to *tried.
bool try_nvrtc(const std::string& path, NvrtcApi& api, std::string* tried) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::string err = dl_error();  // glibc's message usually starts with the path already
    *tried += "\n  " + (err.rfind(path, 0) == 0 ? err : path + ": " + err);
    return false;
  }
  std::string missing;
  resolve(lib, "nvrtcVersion", api.nvrtcVersion, &missing);
  resolve(lib, "nvrtcGetErrorString", api.nvrtcGetErrorString, &missing);
  resolve(lib, "nvrtcCreateProgram", api.nvrtcCreateProgram, &missing);
  resolve(lib, "nvrtcDestroyProgram", api.nvrtcDestroyProgram, &missing);
  resolve(lib, "nvrtcAddNameExpression", api.nvrtcAddNameExpression, &missing);
  resolve(lib, "nvrtcCompileProgram", api.nvrtcCompileProgram, &missing);
  resolve(lib, "nvrtcGetLoweredName", api.nvrtcGetLoweredName, &missing);
  resolve(lib, "nvrtcGetProgramLogSize", api.nvrtcGetProgramLogSize, &missing);
  resolve(lib, "nvrtcGetProgramLog", api.nvrtcGetProgramLog, &missing);
  resolve(lib, "nvrtcGetCUBINSize", api.nvrtcGetCUBINSize, &missing);
  resolve(lib, "nvrtcGetCUBIN", api.nvrtcGetCUBIN, &missing);
  if (!missing.empty()) {
    *tried += "\n  " + path + ": missing " + missing;
    dlclose(lib);
    return false;
  }
  preload_builtins(api);
  log::debug("tileops: loaded NVRTC from " + path);
  return true;
}

// Candidates in order: $TILEOPS_NVRTC_LIBRARY, registered folders, the loader's default search,
// then the usual CUDA toolkit folder.
std::vector<std::string> nvrtc_candidates(const std::vector<std::string>& dirs) {
  static const char* const kNames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  std::vector<std::string> out;
  if (const char* env = std::getenv("TILEOPS_NVRTC_LIBRARY"); env && *env) out.push_back(env);
  for (const auto& d : dirs)
    for (const char* n : kNames) out.push_back(d + "/" + n);
  for (const char* n : kNames) out.push_back(n);
  for (const char* n : kNames) out.push_back(std::string("/usr/local/cuda/lib64/") + n);
  return out;
}

}  // namespace

void add_library_search_dir(const std::string& dir) {
  if (dir.empty()) return;
  NvrtcState& s = nvrtc_state();
  std::lock_guard<std::mutex> lock(s.mu);
  for (const auto& d : s.dirs)
    if (d == dir) return;
  s.dirs.push_back(dir);
}

const DriverApi& driver() {
  const DriverState& s = driver_state();
  if (!s.error.empty()) throw JitError("tileops: " + s.error);
  return s.api;
}

bool driver_available() noexcept { return driver_state().error.empty(); }

const NvrtcApi& nvrtc() {
  NvrtcState& s = nvrtc_state();
  if (s.loaded.load(std::memory_order_acquire)) return s.api;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.loaded.load(std::memory_order_relaxed)) return s.api;
  if (!s.error.empty() && s.dirs.size() == s.dirs_at_failure) throw JitError(s.error);
  std::string tried;
  for (const auto& path : nvrtc_candidates(s.dirs)) {
    NvrtcApi api{};
    if (try_nvrtc(path, api, &tried)) {
      s.api = api;
      s.loaded.store(true, std::memory_order_release);
      return s.api;
    }
  }
  s.error = "tileops: cannot load NVRTC (set TILEOPS_NVRTC_LIBRARY to the full path of libnvrtc.so, "
            "or install the CUDA toolkit / the nvidia-cuda-nvrtc wheel). Tried:" + tried;
  s.dirs_at_failure = s.dirs.size();
  throw JitError(s.error);
}

void check_cu(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  const DriverState& s = driver_state();
  if (s.api.cuGetErrorName) s.api.cuGetErrorName(r, &name);
  if (s.api.cuGetErrorString) s.api.cuGetErrorString(r, &text);
  std::string code = name ? name : "CUresult " + std::to_string(static_cast<int>(r));
  throw JitError(std::string(what) + ": " + code + ": " + (text ? text : "unknown error"));
}

int nvrtc_version() {
  static const int version = [] {
    int major = 0, minor = 0;
    nvrtcResult r = nvrtc().nvrtcVersion(&major, &minor);
    if (r != NVRTC_SUCCESS) throw JitError("tileops: nvrtcVersion failed");
    return major * 1000 + minor * 10;
  }();
  return version;
}

CUcontext primary_context(int device_ordinal) {
  constexpr int kMaxDevices = 64;
  static std::mutex mu;
  static CUcontext contexts[kMaxDevices] = {};
  if (device_ordinal < 0 || device_ordinal >= kMaxDevices)
    throw JitError("tileops: CUDA device ordinal " + std::to_string(device_ordinal) + " out of range");
  std::lock_guard<std::mutex> lock(mu);
  if (contexts[device_ordinal] == nullptr) {
    const DriverApi& d = driver();
    CUdevice dev;
    check_cu(d.cuDeviceGet(&dev, device_ordinal), "cuDeviceGet");
    check_cu(d.cuDevicePrimaryCtxRetain(&contexts[device_ordinal], dev), "cuDevicePrimaryCtxRetain");
  }
  return contexts[device_ordinal];
}

ScopedContext::ScopedContext(CUcontext ctx) {
  const DriverApi& d = driver();
  CUcontext current = nullptr;
  d.cuCtxGetCurrent(&current);
  if (current != ctx) {
    check_cu(d.cuCtxPushCurrent(ctx), "cuCtxPushCurrent");
    pushed_ = true;
  }
}

ScopedContext::~ScopedContext() {
  if (pushed_) {
    CUcontext popped;
    driver().cuCtxPopCurrent(&popped);
  }
}

}  // namespace tileops::jit
