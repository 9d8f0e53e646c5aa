#include "targets/nvrtc/nvrtc_target.h"

#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "common/counters.h"
#include "common/log.h"
#include "jit/cuda_driver.h"
#include "jit/disk_cache.h"
#include "jit/kernel_record.h"
#include "targets/nvrtc/kernel_sources.h"
#include "targets/torch_wheel.h"
#include "tileops/op_call.h"

namespace tileops::nvrtc {
namespace {

constexpr int kMaxDevices = 64;
std::array<std::unique_ptr<DeviceInfo>, kMaxDevices> g_devices;
std::mutex g_devices_mu;

std::mutex g_cubin_mu;
std::unordered_map<std::string, jit::Cubin> g_cubins;  // disk key -> CUBIN (shared by same-arch devices)

// NVRTC ships in the torch wheel (nvidia/cu13/lib): look beside libtorch first.
void add_wheel_search_dirs() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const std::string& dir : torch_wheel_library_dirs()) jit::add_library_search_dir(dir);
#ifdef TILEOPS_NVRTC_HINT_DIR
    jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
#endif
  });
}

double us_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

// Every kernel includes the same embedded headers: they are hashed once, when the library loads, so
// that no first call pays for it.
uint64_t kernel_headers_digest() {
  static const uint64_t digest = [] {
    std::vector<std::pair<std::string, std::string>> headers;
    for (const auto& f : kernel_files()) headers.emplace_back(f.name, f.text);
    return jit::headers_digest(headers);
  }();
  return digest;
}
[[maybe_unused]] const uint64_t kHeadersDigestAtLoad = kernel_headers_digest();

jit::Cubin get_cubin(const jit::KernelSource& src) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string key = jit::disk_key(src);
  const double key_us = us_since(t0);
  {
    std::lock_guard<std::mutex> lock(g_cubin_mu);
    auto it = g_cubins.find(key);
    if (it != g_cubins.end()) return it->second;
  }
  add_wheel_search_dirs();
  bool built = false;
  const auto t1 = std::chrono::steady_clock::now();
  jit::Cubin cubin = jit::DiskCache::global().get_or_build(
      key, [&] { return jit::compile_to_cubin(src); }, &built);
  counters::bump(built ? counters::kNvrtcCompiles : counters::kDiskCacheHits);
  jit::record_kernel(src);  // TILEOPS_RECORD_KERNELS: what the offline warm-up replays
  // Timed so that a slow first call can be read off the debug log (key, disk or compile).
  log::debug(std::string("tileops: ") + (built ? "compiled " : "disk cache hit for ") + src.name + " (key " +
             std::to_string(static_cast<int>(key_us)) + " us, " + (built ? "compile " : "read ") +
             std::to_string(static_cast<int>(us_since(t1))) + " us)");
  std::lock_guard<std::mutex> lock(g_cubin_mu);
  return g_cubins.emplace(key, std::move(cubin)).first->second;
}

}  // namespace

void clear_cubin_cache() {
  std::lock_guard<std::mutex> lock(g_cubin_mu);
  g_cubins.clear();
}

const char* kernel_type_name(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Half: return "tileops::f16";
    case c10::ScalarType::BFloat16: return "tileops::bf16";
    case c10::ScalarType::Float: return "float";
    case c10::ScalarType::Double: return "double";
    // Integer and bool inputs (e.g. SigmoidFwdOp): plain C++ types, converted by to_float overloads.
    case c10::ScalarType::Byte: return "unsigned char";
    case c10::ScalarType::Char: return "signed char";
    case c10::ScalarType::Short: return "short";
    case c10::ScalarType::Int: return "int";
    case c10::ScalarType::Long: return "long long";
    case c10::ScalarType::Bool: return "bool";
    default: TORCH_CHECK(false, "tileops: the nvrtc kernels have no storage type for dtype ", t);
  }
}

const char* short_type_name(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Half: return "f16";
    case c10::ScalarType::BFloat16: return "bf16";
    case c10::ScalarType::Byte: return "u8";
    case c10::ScalarType::Char: return "i8";
    case c10::ScalarType::Short: return "i16";
    case c10::ScalarType::Int: return "i32";
    case c10::ScalarType::Long: return "i64";
    case c10::ScalarType::Bool: return "b8";
    case c10::ScalarType::Double: return "f64";
    default: return "f32";
  }
}

int next_pow2(int64_t v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}

int access_width(std::initializer_list<const void*> ptrs, int elem_size) {
  uintptr_t bits = 0;
  for (const void* p : ptrs) bits |= reinterpret_cast<uintptr_t>(p);
  int bytes = 16;
  while (bytes > elem_size && (bits % bytes) != 0) bytes /= 2;
  return std::max(1, bytes / elem_size);
}

int row_access_width(c10::ScalarType dtype, int64_t n, int max_vec) {
  int vec = std::max(1, std::min(16 / static_cast<int>(c10::elementSize(dtype)), max_vec));
  while (vec > 1 && n % vec != 0) vec /= 2;
  return vec;
}

const DeviceInfo& device_info(int index) {
  TORCH_CHECK(index >= 0 && index < kMaxDevices, "tileops: CUDA device index ", index, " out of range");
  if (const DeviceInfo* d = g_devices[index].get()) return *d;
  std::lock_guard<std::mutex> lock(g_devices_mu);
  if (g_devices[index]) return *g_devices[index];
  const auto& drv = jit::driver();
  CUdevice dev;
  jit::check_cu(drv.cuDeviceGet(&dev, index), "cuDeviceGet");
  auto info = std::make_unique<DeviceInfo>();
  info->index = index;
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    jit::check_cu(drv.cuDeviceGetAttribute(&v, a, dev), "cuDeviceGetAttribute");
    return v;
  };
  info->cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info->cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info->sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info->max_smem_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  info->threads_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  info->blocks_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
  info->smem_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  info->reserved_smem = attr(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
  info->arch = arch_for(info->cc_major, info->cc_minor);
  info->context = jit::primary_context(index);
  g_devices[index] = std::move(info);
  return *g_devices[index];
}

jit::KernelSource make_source(const std::string& name, const std::string& header, const std::string& name_expression,
                              const std::string& arch) {
  jit::KernelSource src;
  src.name = name;
  src.source = "#include \"" + header + "\"\n";
  for (const auto& f : kernel_files()) src.headers.emplace_back(f.name, f.text);
  src.headers_digest = kernel_headers_digest();
  src.name_expression = name_expression;
  src.arch = arch;
  return src;
}

LoadedKernel load(const jit::KernelSource& src, int device_index) {
  const DeviceInfo& dev = device_info(device_index);
  TORCH_CHECK(src.arch == dev.arch, "tileops: kernel ", src.name, " was specialised for ", src.arch, " but cuda:",
              device_index, " is ", dev.arch);
  jit::Cubin cubin = get_cubin(src);
  const auto& drv = jit::driver();
  LoadedKernel k;
  k.name = src.name;
  k.device = device_index;
  k.context = dev.context;
  const auto t0 = std::chrono::steady_clock::now();
  // Load into the device's primary context (the one torch's streams belong to), whatever is current.
  {
    jit::ScopedContext ctx(dev.context);
    jit::check_cu(drv.cuModuleLoadData(&k.module, cubin.image.data()), ("loading kernel " + src.name).c_str());
    jit::check_cu(drv.cuModuleGetFunction(&k.function, k.module, cubin.lowered_name.c_str()),
                  ("finding kernel " + src.name).c_str());
  }
  counters::bump(counters::kModuleLoads);
  log::debug("tileops: loaded module " + src.name + " in " + std::to_string(static_cast<int>(us_since(t0))) + " us");
  return k;
}

void launch(const LoadedKernel& k, unsigned grid_x, unsigned block_x, unsigned smem_bytes, void** args) {
  const auto& drv = jit::driver();
  const CUstream stream = c10::cuda::getCurrentCUDAStream(k.device).stream();
  // Custom ops get no device guard from the dispatcher: launch inside the kernel's context. The
  // usual case (it is already current) costs one thread-local read.
  CUcontext current = nullptr;
  drv.cuCtxGetCurrent(&current);
  const bool switch_ctx = current != k.context;
  if (switch_ctx) jit::check_cu(drv.cuCtxPushCurrent(k.context), "cuCtxPushCurrent");
  const CUresult r = drv.cuLaunchKernel(k.function, grid_x, 1, 1, block_x, 1, 1, smem_bytes, stream, args, nullptr);
  if (switch_ctx) drv.cuCtxPopCurrent(&current);
  if (r != CUDA_SUCCESS) jit::check_cu(r, ("launching " + k.name).c_str());
}

}  // namespace tileops::nvrtc

namespace tileops::nvrtc {

namespace {

// cuLaunchKernelEx of a 1-D grid with launch attributes, inside the kernel's context.
void launch_with(const LoadedKernel& k, unsigned grid_x, unsigned block_x, unsigned smem_bytes, void** args,
                 CUlaunchAttribute* attrs, unsigned num_attrs) {
  const auto& drv = jit::driver();
  CUlaunchConfig cfg{};
  cfg.gridDimX = grid_x;
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = block_x;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = smem_bytes;
  cfg.hStream = c10::cuda::getCurrentCUDAStream(k.device).stream();
  cfg.attrs = attrs;
  cfg.numAttrs = num_attrs;
  CUcontext current = nullptr;
  drv.cuCtxGetCurrent(&current);
  const bool switch_ctx = current != k.context;
  if (switch_ctx) jit::check_cu(drv.cuCtxPushCurrent(k.context), "cuCtxPushCurrent");
  const CUresult r = drv.cuLaunchKernelEx(&cfg, k.function, args, nullptr);
  if (switch_ctx) drv.cuCtxPopCurrent(&current);
  if (r != CUDA_SUCCESS) jit::check_cu(r, ("launching " + k.name).c_str());
}

}  // namespace

void launch_cluster(const LoadedKernel& k, unsigned grid_x, unsigned block_x, unsigned cluster_x, unsigned smem_bytes,
                    void** args) {
  TORCH_CHECK(jit::driver().cuLaunchKernelEx != nullptr, "launching ", k.name,
              ": thread-block clusters need cuLaunchKernelEx (CUDA driver 11.8 or newer)");
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = cluster_x;
  attr.value.clusterDim.y = 1;
  attr.value.clusterDim.z = 1;
  launch_with(k, grid_x, block_x, smem_bytes, args, &attr, 1);
}

void launch_dependent(const LoadedKernel& k, unsigned grid_x, unsigned block_x, unsigned smem_bytes, void** args) {
  if (jit::driver().cuLaunchKernelEx == nullptr) return launch(k, grid_x, block_x, smem_bytes, args);
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  launch_with(k, grid_x, block_x, smem_bytes, args, &attr, 1);
}

bool dependent_launch_supported(int cc_major, int driver_version, bool has_launch_ex) {
  return cc_major >= 9 && driver_version >= 12030 && has_launch_ex;
}

bool dependent_launch_supported(const DeviceInfo& dev) {
  static const int kDriverVersion = [] {
    int v = 0;
    return jit::driver().cuDriverGetVersion(&v) == CUDA_SUCCESS ? v : 0;
  }();
  return dependent_launch_supported(dev.cc_major, kDriverVersion, jit::driver().cuLaunchKernelEx != nullptr);
}

void allow_dynamic_smem(const LoadedKernel& k, int bytes, const DeviceInfo& dev) {
  if (bytes <= 0) return;
  TORCH_CHECK(bytes <= dev.max_smem_optin, k.name, " needs ", bytes, " bytes of shared memory; device ", dev.index,
              " allows ", dev.max_smem_optin, " (a bug in the plan)");
  jit::ScopedContext ctx(dev.context);
  jit::check_cu(jit::driver().cuFuncSetAttribute(k.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
                ("shared memory size of " + k.name).c_str());
}

bool plan_row_cluster(int64_t vecs, int vec_bytes, int cta_bytes, int max_cluster, int per_thread, RowCluster& out) {
  const int64_t bytes = vecs * vec_bytes;
  out.cluster = 2;
  while (out.cluster < max_cluster && bytes > int64_t{cta_bytes} * out.cluster) out.cluster *= 2;
  const int64_t chunk = (vecs + out.cluster - 1) / out.cluster;
  out.tpb = std::clamp(next_pow2((chunk + per_thread - 1) / per_thread), 32, 1024);
  return (chunk + out.tpb - 1) / out.tpb * std::max(1, vec_bytes / 4) <= 32;
}

void allow_large_clusters(const LoadedKernel& k, int cluster) {
  if (cluster <= 8) return;
  jit::check_cu(jit::driver().cuFuncSetAttribute(k.function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                ("allowing clusters of " + std::to_string(cluster) + " CTAs for " + k.name).c_str());
}

void require_cuda(const OpCall& call) {
  TORCH_CHECK(call.device.is_cuda(), call.op_name, ": target 'nvrtc' serves CUDA tensors only, got ", call.device,
              "; use target='reference' (or the default) for this device");
}

void throw_no_single_implementation(const char* op, const std::string& candidates) {
  TORCH_CHECK(false, op, ": the nvrtc target has ", candidates.empty() ? "no implementation that applies" :
              "no single preferred implementation among {" + candidates + "}",
              " (a bug in the implementation declarations)");
}

}  // namespace tileops::nvrtc
