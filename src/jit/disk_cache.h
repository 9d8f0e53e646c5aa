// On-disk CUBIN cache. Atomic (temp file in the same folder, then rename), verified (a hash of the
// content is checked on read; a bad entry is a miss and is rebuilt), locked across processes
// (flock on "<key>.lock", looked up again after taking the lock). An unwritable folder warns once
// and the cache falls back to memory only.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "jit/nvrtc_compiler.h"

namespace tileops::jit {

class DiskCache {
 public:
  // dir == "" disables the disk cache (every call builds).
  explicit DiskCache(std::string dir);
  // Folder from $TILEOPS_CACHE_DIR, else $XDG_CACHE_HOME/tileops/kernels, else ~/.cache/tileops/kernels;
  // TILEOPS_DISABLE_DISK_CACHE=1 disables it.
  static DiskCache& global();

  const std::string& dir() const { return dir_; }
  bool enabled() const { return !dir_.empty(); }

  std::optional<Cubin> load(const std::string& key) const;
  // Best effort: failures warn once and return false.
  bool store(const std::string& key, const Cubin& cubin) const;
  // load(); on a miss take the cross-process lock, load() again, else build() and store().
  // *built is set to whether build() ran.
  Cubin get_or_build(const std::string& key, const std::function<Cubin()>& build, bool* built) const;

 private:
  std::string dir_;
};

}  // namespace tileops::jit
