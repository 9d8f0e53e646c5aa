// tileops/target.h — the target registry: named sets of kernels (a PrivateUse1-style registry).
//
// libtileops ships three targets: "nvrtc" (its NVRTC CUDA kernels; the default for CUDA tensors),
// "cublaslt" (GEMMs through cuBLASLt: CUDA calls nvrtc has no kernel for) and "reference" (ATen
// calls; the default for CPU tensors and the last resort anywhere; the correctness oracle). An out-of-tree
// backend is a separate shared library that registers one more target when it is loaded:
//
//   #include <tileops/target.h>
//   TILEOPS_REGISTER_TARGET(my_backend, reg) {
//     reg.detector([](const c10::Device& d) { return d.type() == c10::DeviceType::PrivateUse1; });
//     reg.kernel("RMSNormFwdOp", my_rms_norm_builder());  // class or operator name
//   }
//
// Resolution per call (inside the op's graph node): explicit target= -> process default ->
// detection on the first tensor's device (non-fallback detectors first; two claimants is an
// error; then the fallback targets, i.e. the in-tree ones). Resolution keeps no state, so a failed
// construction pins nothing.
#pragma once

#include "tileops/op_call.h"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tileops {

// Build identity of one kernel: a few integers (dtype, sizes, flags...). Computed on every call, so
// keep it cheap. The runtime adds the device: kernels are cached per (target, op, key, device).
struct BuildKey {
  static constexpr int kMaxWords = 8;
  std::array<int64_t, kMaxWords> words{};
  int size = 0;

  BuildKey() = default;
  BuildKey(std::initializer_list<int64_t> ws);
  BuildKey& add(int64_t w);
  bool operator==(const BuildKey& o) const;
  size_t hash() const;
};

// A constructed kernel. launch() is the call phase: launch on the current stream, allocate only
// through the torch allocator, no compile, no lazy init, no host sync.
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void launch(const OpCall& call) const = 0;
};

// What a builder returns for a call its target leaves to others (a problem another implementation
// serves better): the runtime caches it like any kernel and serves the call through the device's
// backstops, as if the target had no kernel for the op (docs/CONTRACT.md §6).
std::shared_ptr<const Kernel> declined_kernel();

struct KernelBuilder {
  // Which kernel serves `call`. Throw (c10::Error) when the target cannot serve it at all.
  std::function<BuildKey(const OpCall& call)> identity;
  // Constructs the kernel for `key` on call.device: may compile, load modules, allocate. The runtime
  // never calls it for meta tensors or while the current CUDA stream is being captured.
  std::function<std::shared_ptr<const Kernel>(const OpCall& call, const BuildKey& key)> build;
  // Readable name of a key (e.g. "rms_norm_fwd__bf16__n4096"), used in logs and errors. Optional.
  std::function<std::string(const BuildKey& key)> describe;
};

using Detector = std::function<bool(const c10::Device& device)>;

// A pending kernel is built and compile-checked but not yet verified on its device: it serves a
// call only when its target is named (target=, a process default), never one the target detected.
enum class KernelStatus { kVerified, kPending };

// Collects one target's detector and kernels, then publishes them all at once (commit) or nothing.
class TargetRegistration {
 public:
  explicit TargetRegistration(std::string name);
  TargetRegistration& detector(Detector d);
  // A fallback target serves the devices its detector claims only when no other target claims them.
  TargetRegistration& fallback(bool is_fallback = true);
  TargetRegistration& kernel(std::string_view op_class_or_name, KernelBuilder builder,
                             KernelStatus status = KernelStatus::kVerified);
  // A backstop serves the calls whose detected target has no verified kernel for the op, so an op
  // never fails for want of one: on any device (the in-tree reference: ATen runs everywhere), or on
  // the devices `devices` claims with backstop_on (the in-tree cublaslt: CUDA). Device-bound
  // backstops are asked before the every-device ones, each in registration order; the first with a
  // verified kernel serves.
  TargetRegistration& backstop(bool is_backstop = true);
  TargetRegistration& backstop_on(Detector devices);
  // Validates (name free and well-formed, ops known, no op twice, builders complete) and publishes
  // atomically. Throws c10::Error naming the target and the problem; nothing is published then.
  void commit();

  const std::string& name() const { return name_; }

 private:
  friend struct RegistryAccess;
  std::string name_;
  Detector detector_;
  bool fallback_ = false;
  bool backstop_ = false;
  Detector backstop_devices_;  // null: every device
  struct Entry {
    std::string op;
    KernelBuilder builder;
    KernelStatus status;
  };
  std::vector<Entry> kernels_;
  std::string deferred_error_;
};

// Runs `fill` on a fresh registration and commits it. Never throws: on failure nothing of the
// target is registered, the error is logged and kept for take_registration_errors(). Meant for
// static initializers of backend libraries (an exception there would abort the process).
bool register_target(const std::string& name, const std::function<void(TargetRegistration&)>& fill) noexcept;
// Errors of failed register_target calls since the last call (the Python loader raises them).
std::vector<std::string> take_registration_errors();
// Removes a target (tests; unloading a backend). Returns false if it was not registered.
bool unregister_target(const std::string& name);

std::vector<std::string> target_names();
// Process default target (nullopt: detect). Throws for an unknown name.
void set_default_target(const std::optional<std::string>& name);
std::optional<std::string> default_target();

// Counters, for tests and diagnostics.
struct RuntimeStats {
  int64_t kernel_builds;      // kernels constructed (cache misses that built)
  int64_t kernel_hits;        // calls served from the kernel cache
  int64_t capture_refusals;   // builds refused because the stream was being captured
  int64_t nvrtc_compiles;     // NVRTC compilations (in-memory and on-disk CUBIN cache misses)
  int64_t disk_cache_hits;    // CUBINs read from the on-disk cache
  int64_t module_loads;       // CUDA modules loaded (per device)
};
RuntimeStats runtime_stats();
void reset_runtime_stats();
// Drops every constructed kernel and in-memory CUBIN (tests use it to observe cold paths).
void clear_kernel_caches();

}  // namespace tileops

#define TILEOPS_CONCAT_INNER(a, b) a##b
#define TILEOPS_CONCAT(a, b) TILEOPS_CONCAT_INNER(a, b)
// TILEOPS_REGISTER_TARGET(name, reg) { reg.detector(...); reg.kernel(...); }
#define TILEOPS_REGISTER_TARGET(target_name, reg)                                                      \
  static void TILEOPS_CONCAT(tileops_fill_, target_name)(::tileops::TargetRegistration & reg);          \
  static const bool TILEOPS_CONCAT(tileops_registered_, target_name) =                                  \
      ::tileops::register_target(#target_name, &TILEOPS_CONCAT(tileops_fill_, target_name));           \
  static void TILEOPS_CONCAT(tileops_fill_, target_name)(::tileops::TargetRegistration & reg)
