// Internal view of the target registry (public API: include/tileops/target.h).
// Readers pin an immutable snapshot (one atomic load when nothing changed): no lock on the call path;
// a snapshot is freed when the last thread that pinned or cached it moves on.
#pragma once

#include "tileops/target.h"

#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace tileops::registry {

struct CacheKey {
  BuildKey key;
  int8_t device_type;
  int8_t device_index;
  bool operator==(const CacheKey& o) const {
    return device_type == o.device_type && device_index == o.device_index && key == o.key;
  }
};
struct CacheKeyHash {
  size_t operator()(const CacheKey& k) const {
    return k.key.hash() ^ (static_cast<size_t>(static_cast<uint8_t>(k.device_type)) << 48) ^
           (static_cast<size_t>(static_cast<uint8_t>(k.device_index)) << 56);
  }
};

// One target's kernels for one op, with their cache. Shared across snapshots.
struct OpKernels {
  std::string target;
  KernelBuilder builder;
  bool pending = false;  // KernelStatus::kPending: served only when the target is named
  mutable std::shared_mutex mu;  // readers: cache hits; writers: inserts after a build
  std::unordered_map<CacheKey, std::shared_ptr<const Kernel>, CacheKeyHash> kernels;
  std::mutex build_mu;  // one build at a time per (target, op): two threads missing build once
};

struct Target {
  std::string name;
  Detector detector;
  bool fallback = false;
  bool backstop = false;
  Detector backstop_devices;  // where it backstops; null: every device
  std::vector<std::shared_ptr<OpKernels>> ops;  // indexed by op id; null where the target has no kernel
};

struct Snapshot {
  std::vector<std::shared_ptr<const Target>> targets;
  const Target* default_target = nullptr;  // process default, or null (detect)
};

// The published snapshot, valid while the Pin lives (Pins nest on a thread).
class Pin {
 public:
  Pin();
  ~Pin();
  Pin(const Pin&) = delete;
  Pin& operator=(const Pin&) = delete;
  const Snapshot& operator*() const { return *snap_; }
  const Snapshot* operator->() const { return snap_; }

 private:
  const Snapshot* snap_;
};

// For tests: snapshots alive (published, cached by a thread or pinned), and kernels dropped by
// clear_kernel_caches() that a launch still holds.
int64_t live_snapshots();
int64_t live_dropped_kernels();
const Target* find(const Snapshot& s, std::string_view name);
std::string names_of(const Snapshot& s);

// In-tree targets (src/targets/builtin_targets.cpp).
void register_builtin_targets();

// A cache a target keeps beside its kernels (the nvrtc target's CUBINs), emptied with them by
// clear_kernel_caches().
void on_clear_kernel_caches(void (*clear)());

}  // namespace tileops::registry
