// Process-wide event counters (relaxed atomics: they are for tests and diagnostics, not ordering).
#pragma once
#include <atomic>
#include <cstdint>

namespace tileops::counters {

enum Id : int { kKernelBuilds, kKernelHits, kCaptureRefusals, kNvrtcCompiles, kDiskCacheHits, kModuleLoads, kCount };

inline std::atomic<int64_t> g_values[kCount];

inline void bump(Id id) { g_values[id].fetch_add(1, std::memory_order_relaxed); }
inline int64_t get(Id id) { return g_values[id].load(std::memory_order_relaxed); }
inline void reset() {
  for (auto& v : g_values) v.store(0, std::memory_order_relaxed);
}

}  // namespace tileops::counters
