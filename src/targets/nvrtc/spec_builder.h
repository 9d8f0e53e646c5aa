// The one shape of an nvrtc kernel: a family declares
//   Problem  what a call asks for (dtype, sizes, alignment, flags): cheap to read from a call;
//   Spec     the kernel that serves it: a value whose == / hash() are the cache identity, that
//            renders its sources (name, header, template expression, arch) and its description;
//   plan     plan(problem, device facts, tuning) -> Spec, a pure function;
//   launch   a Kernel made from the spec and its loaded modules.
// spec_builder() derives the target's KernelBuilder from that: identity() reads the problem, plans it
// once per (device, problem) and returns the spec's id (BuildKey{id}: the plugin ABI is unchanged);
// build() and describe() read only the spec.
//
//   struct Family {
//     using Problem = ...; using Spec = ...;        // Problem: ==, hash() (TILEOPS_IDENTITY)
//     Problem problem(const OpCall&) const;
//     Spec plan(const Problem&, const DeviceFacts&, const Tuning&) const;
//     std::shared_ptr<const Kernel> make(const Spec&, std::vector<LoadedKernel>, const DeviceInfo&) const;
//   };
//   Spec: TILEOPS_IDENTITY (==, hash()), std::vector<jit::KernelSource> sources() const,
//         std::string describe() const.
#pragma once

#include <c10/util/Exception.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/nvrtc/offline_plan.h"
#include "targets/nvrtc/tuning.h"
#include "tileops/target.h"

namespace tileops::nvrtc {

// A kernel that runs a function of the call: the ATen formula a family's make() returns for the shapes
// its kernel does not take (their spec has no sources).
class FunctionKernel final : public Kernel {
 public:
  explicit FunctionKernel(void (*run)(const OpCall&)) : run_(run) {}
  void launch(const OpCall& call) const override { run_(call); }

 private:
  void (*run_)(const OpCall&);
};
inline std::shared_ptr<const Kernel> function_kernel(void (*run)(const OpCall&)) {
  return std::make_shared<FunctionKernel>(run);
}

// Specs interned per builder: a spec's id is its index, planned once per (device, problem).
template <class Family>
class SpecTable {
 public:
  using Problem = typename Family::Problem;
  using Spec = typename Family::Spec;

  uint32_t id_for(const Family& f, const Problem& q, const DeviceFacts& dev, int device_index) {
    const Key k{device_index, q};
    {
      std::shared_lock<std::shared_mutex> lock(mu_);
      auto it = planned_.find(k);
      if (it != planned_.end()) return it->second;
    }
    const Spec s = f.plan(q, dev, tuning());
    std::unique_lock<std::shared_mutex> lock(mu_);
    auto known = ids_.find(s);
    uint32_t id;
    if (known != ids_.end()) {
      id = known->second;
    } else {
      id = static_cast<uint32_t>(specs_.size());
      specs_.push_back(s);
      ids_.emplace(s, id);
    }
    planned_.emplace(k, id);
    return id;
  }
  const Spec& spec(uint32_t id) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    TORCH_CHECK(id < specs_.size(), "tileops: no kernel spec ", id, " (a key from another builder)");
    return specs_[id];  // a deque: references stay valid as specs are added
  }

 private:
  struct Key {
    int device;
    Problem q;
    bool operator==(const Key& o) const { return device == o.device && q == o.q; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return k.q.hash() ^ static_cast<size_t>(k.device) << 56; }
  };
  struct SpecHash {
    size_t operator()(const Spec& s) const { return s.hash(); }
  };
  mutable std::shared_mutex mu_;
  std::unordered_map<Key, uint32_t, KeyHash> planned_;
  std::deque<Spec> specs_;
  std::unordered_map<Spec, uint32_t, SpecHash> ids_;
};

// The sources a problem compiles to on a device: what a build of it loads (same names, sources and
// arch, so the same disk-cache keys). Needs no GPU: an offline warm-up calls it with named facts.
template <class Family>
std::vector<jit::KernelSource> kernel_sources(const Family& family, const typename Family::Problem& q,
                                              const DeviceFacts& dev) {
  return family.plan(q, dev, tuning()).sources();
}

template <class Family>
KernelBuilder spec_builder(Family family) {
  auto table = std::make_shared<SpecTable<Family>>();
  KernelBuilder b;
  b.identity = [family, table](const OpCall& call) {
    if (OfflinePlan* plan = offline_plan()) {  // a warm-up for a named device: collect, build nothing
      for (auto& src : kernel_sources(family, family.problem(call), plan->facts)) plan->sources.push_back(std::move(src));
      return BuildKey{};
    }
    require_cuda(call);
    const DeviceInfo& dev = device_info(call.device.index());
    return BuildKey{table->id_for(family, family.problem(call), dev, dev.index)};
  };
  b.build = [family, table](const OpCall& call, const BuildKey& key) -> std::shared_ptr<const Kernel> {
    const auto& spec = table->spec(static_cast<uint32_t>(key.words[0]));
    const DeviceInfo& dev = device_info(call.device.index());
    std::vector<LoadedKernel> kernels;
    for (const auto& src : spec.sources()) kernels.push_back(load(src, dev.index));
    return family.make(spec, std::move(kernels), dev);
  };
  b.describe = [table](const BuildKey& key) { return table->spec(static_cast<uint32_t>(key.words[0])).describe(); };
  return b;
}

}  // namespace tileops::nvrtc
