#include "boundary/runtime.h"
#include "boundary/abi_guard.h"

#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <chrono>
#include <mutex>
#include <shared_mutex>

#include "common/counters.h"
#include "common/log.h"
#include "jit/cuda_driver.h"
#include "targets/nvrtc/offline_plan.h"
#include "targets/registry.h"
#include "tileops/ops.h"

namespace tileops::runtime {
namespace {

using registry::Snapshot;
using registry::Target;

[[noreturn]] void fail_target(const OpCall& call, const std::string& msg) {
  TORCH_CHECK(false, call.op_name, ": ", msg);
}

const Target* detect(const Snapshot& snap, const OpCall& call) {
  const Target* found = nullptr;
  // Non-fallback (out-of-tree) detectors first, then the fallbacks (in-tree targets).
  for (bool fallback : {false, true}) {
    for (const auto& t : snap.targets) {
      if (t->fallback != fallback || !t->detector) continue;
      bool claims = false;
      try {
        claims = t->detector(call.device);
      } catch (const std::exception& e) {
        fail_target(call, "the detector of target '" + t->name + "' threw for device " + call.device.str() + ": " +
                              e.what());
      }
      if (!claims) continue;
      if (found != nullptr)
        fail_target(call, "targets '" + found->name + "' and '" + t->name + "' both claim device " +
                              call.device.str() + "; pass target= or set a process default to choose");
      found = t.get();
    }
    if (found) return found;
  }
  fail_target(call, "no target serves device " + call.device.str() + " (registered: " + registry::names_of(snap) + ")");
}

// The backstop for the call: those bound to devices (backstop_on) that claim its device first, then
// those for every device; within each, registration order. The first with a verified kernel, or null.
const Target* backstop_for(const Snapshot& snap, const OpCall& call) {
  for (const bool device_bound : {true, false}) {
    for (const auto& t : snap.targets) {
      const auto& ok = t->ops[call.op_id];
      if (!t->backstop || !ok || ok->pending || bool(t->backstop_devices) != device_bound) continue;
      if (device_bound) {
        bool claims = false;
        try {
          claims = t->backstop_devices(call.device);
        } catch (const std::exception& e) {
          fail_target(call, "the backstop devices of target '" + t->name + "' threw for device " +
                                call.device.str() + ": " + e.what());
        }
        if (!claims) continue;
      }
      return t.get();
    }
  }
  return nullptr;
}

// A named target (target=, process default) serves whatever it has, pending kernels included; a
// detected one only its verified kernels, the backstop (the reference, ATen) the rest (§6).
const Target* resolve(const Snapshot& snap, const OpCall& call, const std::optional<c10::string_view>& name) {
  if (name.has_value()) {
    const Target* t = registry::find(snap, *name);
    if (t == nullptr)
      fail_target(call, "unknown target '" + std::string(*name) + "' (registered: " + registry::names_of(snap) + ")");
    return t;
  }
  if (snap.default_target) return snap.default_target;
  const Target* t = detect(snap, call);
  const auto& ok = t->ops[call.op_id];
  if (ok && !ok->pending) return t;
  if (const Target* b = backstop_for(snap, call)) return b;
  if (ok) fail_target(call, "target '" + t->name + "' has only a pending kernel for this op (not yet verified on " +
                                "this device); pass target='" + t->name + "' to run it");
  return t;  // no kernel anywhere: the caller names the targets that have one
}

// Stream capture forbids what a build does (compile, module load, allocation): refuse before it.
void refuse_build_during_capture(const OpCall& call, const registry::OpKernels& ok, const BuildKey& key) {
  if (!stream_is_capturing(call.device)) return;
  counters::bump(counters::kCaptureRefusals);
  const std::string what = ok.builder.describe ? ok.builder.describe(key) : std::string("kernel");
  fail_target(call, "kernel " + what + " (target '" + ok.target + "', " + call.device.str() +
                        ") is not built yet and the current stream is being captured into a CUDA graph; building "
                        "may compile and allocate, which capture forbids. Warm up first: call the op once with the "
                        "same shapes, dtypes and target before capturing");
}

}  // namespace

bool stream_is_capturing(c10::Device device) {
  if (!device.is_cuda()) return false;
  const CUstream stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  jit::ScopedContext ctx(jit::primary_context(device.index()));
  jit::check_cu(jit::driver().cuStreamIsCapturing(stream, &status), "cuStreamIsCapturing");
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

namespace {

std::shared_ptr<const Kernel> build(const OpCall& call, registry::OpKernels& ok, const registry::CacheKey& ck) {
  if (call.device.is_meta())
    fail_target(call, "refusing to construct a kernel for meta tensors: meta/fake calls answer from the Meta kernel "
                      "and cannot warm up a kernel");
  refuse_build_during_capture(call, ok, ck.key);
  std::lock_guard<std::mutex> build_lock(ok.build_mu);
  {
    std::shared_lock<std::shared_mutex> lock(ok.mu);  // another thread may have built it meanwhile
    auto it = ok.kernels.find(ck);
    if (it != ok.kernels.end()) return it->second;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<const Kernel> kernel = ok.builder.build(call, ck.key);
  TORCH_CHECK(kernel != nullptr, call.op_name, ": target '", ok.target, "' built no kernel");
  counters::bump(counters::kKernelBuilds);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  if (ok.builder.describe)
    log::debug("tileops: built " + ok.builder.describe(ck.key) + " for " + call.device.str() + " (target '" +
               ok.target + "') in " + std::to_string(us.count()) + " us");
  std::unique_lock<std::shared_mutex> lock(ok.mu);
  return ok.kernels.emplace(ck, std::move(kernel)).first->second;
}

// The cached kernel of `target` for the call, built on a miss.
std::shared_ptr<const Kernel> find_or_build(const Snapshot& snap, const OpCall& call, const Target& target) {
  registry::OpKernels* ok = target.ops[call.op_id].get();
  if (ok == nullptr) {
    std::string serving;
    for (const auto& t : snap.targets)
      if (t->ops[call.op_id]) serving += (serving.empty() ? "'" : ", '") + t->name + "'";
    fail_target(call, "target '" + target.name + "' has no kernel for this op (targets that do: " +
                          (serving.empty() ? "none" : serving) + ")");
  }
  const registry::CacheKey ck{ok->builder.identity(call), static_cast<int8_t>(call.device.type()),
                              static_cast<int8_t>(call.device.index())};
  {
    std::shared_lock<std::shared_mutex> lock(ok->mu);
    auto it = ok->kernels.find(ck);
    if (it != ok->kernels.end()) {
      counters::bump(counters::kKernelHits);
      return it->second;
    }
  }
  return build(call, *ok, ck);
}

}  // namespace

void invoke(const OpCall& call, const std::optional<c10::string_view>& target_name) {
  abi::require_matching_torch();
  const registry::Pin pin;
  const Snapshot& snap = *pin;
  if (nvrtc::offline_plan() != nullptr) {  // planning for a named device: the nvrtc target collects sources
    const Target* nvrtc_target = registry::find(snap, "nvrtc");
    const registry::OpKernels* ok = nvrtc_target ? nvrtc_target->ops[call.op_id].get() : nullptr;
    if (ok == nullptr) fail_target(call, "the nvrtc target has no kernel for this op: nothing to warm up");
    ok->builder.identity(call);
    return;
  }
  const Target* target = resolve(snap, call, target_name);
  try {
    // A reference, not a raw pointer: clear_kernel_caches() may drop the entry while this launch runs.
    static const Kernel* const declined = declined_kernel().get();
    std::shared_ptr<const Kernel> kernel = find_or_build(snap, call, *target);
    if (kernel.get() == declined) {  // the target leaves this call to the device's backstops
      const Target* b = backstop_for(snap, call);
      if (b == nullptr || b == target)
        fail_target(call, "target '" + target->name + "' declined this call and no other backstop of device " +
                              call.device.str() + " has a verified kernel for the op");
      target = b;
      kernel = find_or_build(snap, call, *target);
      if (kernel.get() == declined) fail_target(call, "backstop '" + target->name + "' declined this call too");
    }
    kernel->launch(call);
  } catch (const c10::Error& e) {
    const std::string msg = e.what_without_backtrace();
    if (msg.rfind(call.op_name, 0) == 0) throw;
    TORCH_CHECK(false, call.op_name, " (target '", target->name, "'): ", msg);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, call.op_name, " (target '", target->name, "'): ", e.what());
  }
}

std::string serving_json() {
  const registry::Pin pin;
  const Snapshot& snap = *pin;
  const auto table = op_table();
  std::string out = "[";
  for (size_t id = 0; id < table.size(); ++id) {
    out += id ? ",{" : "{";
    for (const c10::Device device : {c10::Device(c10::kCPU), c10::Device(c10::kCUDA, 0)}) {
      const OpCall call{static_cast<int>(id), table[id].name, device, {}, {}, {}};
      std::string who = "null";
      try {
        const Target* t = resolve(snap, call, std::nullopt);
        if (t->ops[id]) who = "\"" + t->name + "\"";
      } catch (const c10::Error&) {  // no target, or only a pending kernel: nothing serves by default
      }
      out += std::string(device.is_cuda() ? "\"cuda\":" : "\"cpu\":") + who + ",";
    }
    out += "\"pending\":[";
    bool first = true;
    for (const auto& t : snap.targets) {
      if (t->ops[id] && t->ops[id]->pending) {
        out += (first ? "\"" : ",\"") + t->name + "\"";
        first = false;
      }
    }
    out += "]}";
  }
  return out + "]";
}

at::Tensor empty(c10::SymIntArrayRef sizes, const at::TensorOptions& options) {
  const c10::Device device = options.device();
  if (device.is_cuda() && device.has_index()) {
    if (const auto concrete = c10::asIntArrayRefSlowOpt(sizes)) {
      // What at::empty's CUDA kernel does, less its dispatch: CUDA initialised (a factory op may be
      // a process's first CUDA call), the caching allocator serving the current device, the CUDA key.
      at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
      const c10::cuda::CUDAGuard guard(device);
      return at::detail::empty_generic(*concrete, c10::cuda::CUDACachingAllocator::get(),
                                       c10::DispatchKeySet(c10::DispatchKey::CUDA),
                                       c10::typeMetaToScalarType(options.dtype()), c10::MemoryFormat::Contiguous);
    }
  }
  return at::empty_symint(sizes, options);
}

bool wants_grad(std::initializer_list<const at::Tensor*> inputs) {
  if (!c10::GradMode::is_enabled()) return false;
  for (const at::Tensor* t : inputs)
    if (t != nullptr && t->defined() && t->requires_grad()) return true;
  return false;
}

void refuse_grad(const char* op, std::initializer_list<const at::Tensor*> inputs, const char* hint) {
  if (!wants_grad(inputs)) return;
  TORCH_CHECK(false, op,
              ": an input requires grad, but this op has no autograd formula (forward and backward are separate "
              "tileops ops). Call it under torch.no_grad() / torch.inference_mode(), or detach the inputs",
              hint ? hint : "");
}

void refuse_out_grad(const char* op, std::initializer_list<const at::Tensor*> args) {
  if (!wants_grad(args)) return;
  TORCH_CHECK(false, op,
              ": functions with out=... arguments don't support automatic differentiation, but one of the "
              "arguments requires grad. Call it under torch.no_grad() / torch.inference_mode(), or pass tensors "
              "(out included) that do not require grad");
}

void bump_version(const at::Tensor& t) {
  if (t.defined() && !t.is_inference()) t.unsafeGetTensorImpl()->bump_version();
}

}  // namespace tileops::runtime
