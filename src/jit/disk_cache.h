// On-disk CUBIN cache. Every process that loads the library runs GPU code from it, so it is a
// security boundary, not only a speed-up:
//  - Layers: read-only image folders (a deployment image's warmed kernels) are looked up first, then
//    the writable user folder; builds are stored only in the writable one.
//  - Trust (the rule ssh applies to ~/.ssh): a folder and each parent (up to the user's home, else
//    up to /) must be owned by root or the current user and not writable by group or others; a
//    parent may be writable by others only with the sticky bit (/tmp). A writable folder that fails
//    is refused with one warning and kernels stay in memory; a failing read-only folder is ignored
//    with one warning.
//  - Authentication: a user entry carries an HMAC-SHA-256 over (format, kind, key, header, name,
//    image) keyed by a 32-byte secret kept 0600 in the folder (".hmac-key"), so someone who can
//    write the folder but not read the secret cannot forge an entry. Image entries, written by the
//    warm-up on another machine, carry a plain SHA-256 (integrity only) and are accepted only from
//    read-only layers, where authenticity rests on the trust rule above: only root or the user could
//    have written them. A writable folder never accepts an image entry.
//  - NVRTC: user entries are kept per NVRTC version (in their file names); an image entry records
//    the version that built it but is used whatever the runtime's, so that a hit in an image never
//    loads NVRTC (a dlopen of tens of milliseconds).
//  - Files: folders are created 0700 and user entries 0600 (image folders 0755 and entries 0644, to
//    be read by every user of the image); entries, temp files and locks are opened with O_NOFOLLOW
//    and created with O_EXCL (temp files) before an atomic rename. A bad entry is a miss and is
//    rebuilt. Builds are locked across processes per key ("<key>.lock", removed after use) and
//    looked up again under the lock. With a byte cap, the least recently used entries (a hit
//    refreshes an entry's mtime) are evicted after a store.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"

namespace tileops::jit {

struct DiskCacheOptions {
  std::string dir;                         // the writable folder; "" for none (every miss builds)
  std::vector<std::string> readonly_dirs;  // image folders, looked up first, in order
  uint64_t max_bytes = 0;                  // cap on the writable folder's entries; 0: none
  bool image = false;                      // write image entries (the warm-up filling an image folder)
  int nvrtc_version = 0;                   // of the NVRTC that builds; 0: asked of NVRTC when needed
};

// TILEOPS_CACHE_DIR (else $XDG_CACHE_HOME/tileops/kernels, else ~/.cache/tileops/kernels),
// TILEOPS_CACHE_DIR_READONLY (folders separated by ':'), TILEOPS_CACHE_MAX_BYTES;
// TILEOPS_DISABLE_DISK_CACHE=1 turns every layer off.
DiskCacheOptions cache_options_from_environment();

class DiskCache {
 public:
  explicit DiskCache(DiskCacheOptions options);
  explicit DiskCache(std::string dir) : DiskCache(DiskCacheOptions{std::move(dir), {}, 0, false}) {}
  ~DiskCache();
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;
  // Built once from the environment.
  static DiskCache& global();

  const std::string& dir() const { return options_.dir; }
  const DiskCacheOptions& options() const { return options_; }
  bool enabled() const { return !options_.dir.empty() || !options_.readonly_dirs.empty(); }

  // Whether the writable folder is in use (it exists or was made, passed the checks, has its key).
  bool can_store() const { return writable() != nullptr; }

  // Read-only layers first, then the writable one.
  std::optional<Cubin> load(const std::string& key) const;
  // Into the writable folder. Best effort: failures warn once and return false.
  bool store(const std::string& key, const Cubin& cubin) const;
  // load(); on a miss take the cross-process lock, load() again, else build() and store().
  // *built is set to whether build() ran.
  Cubin get_or_build(const std::string& key, const std::function<Cubin()>& build, bool* built) const;

 private:
  struct Layer;
  void prepare_readonly() const;  // checks the folders on first use
  void prepare_writable() const;  // makes and checks the folder, reads or makes its key, on first use
  Layer* writable() const;        // null when there is none or it was refused
  int nvrtc() const;  // the version entries are built by; -1 without NVRTC
  void evict_over_cap(const Layer& layer, const std::string& kept_stem) const;

  DiskCacheOptions options_;
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<Layer>> readonly_;  // trusted read-only layers, once checked
  mutable std::unique_ptr<Layer> writable_;
  mutable bool readonly_prepared_ = false, writable_prepared_ = false;
  mutable std::once_flag nvrtc_once_;
  mutable int nvrtc_ = 0;
};

}  // namespace tileops::jit
