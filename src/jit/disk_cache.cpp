#include "jit/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <unordered_map>

#include "common/log.h"
#include "jit/cuda_driver.h"
#include "jit/sha256.h"

namespace tileops::jit {
namespace {

// Entry layout (integers little-endian):
//   magic[8] | u32 format | u32 kind | u32 nvrtc | u32 name_len | u64 image_len | name | image | tag[32]
// tag: HMAC-SHA-256 (user entries) or SHA-256 (image entries) over u32 stem_len | stem | all before
// it, where stem is the file name without ".cubin". nvrtc: the version of NVRTC that built it.
constexpr char kMagic[8] = {'T', 'O', 'P', 'S', 'C', 'U', 'B', 'N'};
constexpr uint32_t kFormatVersion = 2;
constexpr uint32_t kUserEntry = 1, kImageEntry = 2;
constexpr size_t kHeaderSize = 8 + 4 + 4 + 4 + 4 + 8;
constexpr size_t kTagSize = 32;
constexpr const char* kSecretName = ".hmac-key";
constexpr size_t kSecretSize = 32;

void put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>(v >> (8 * i));
}
uint64_t get(const std::string& in, size_t pos, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<unsigned char>(in[pos + i])) << (8 * i);
  return v;
}

std::string errno_text(int err) { return std::strerror(err); }

std::string octal_mode(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

// Reads all of fd; returns 0 or an errno value.
int read_fd(int fd, std::string* out) {
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) out->append(buf, static_cast<size_t>(n));
    else if (n == 0) return 0;
    else if (errno != EINTR) return errno;
  }
}

bool write_all(int fd, const std::string& data) {
  for (size_t done = 0; done < data.size();) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// mkdir -p; folders it creates get `mode`. Returns 0 or an errno value.
int make_dirs(const std::string& dir, mode_t mode) {
  size_t pos = 0;
  do {
    pos = dir.find('/', pos + 1);
    if (::mkdir(dir.substr(0, pos).c_str(), mode) != 0 && errno != EEXIST) return errno;
  } while (pos != std::string::npos);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return errno;
  return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

uint64_t random_u64() {
  thread_local std::mt19937_64 rng(std::random_device{}() ^
                                   std::hash<std::thread::id>()(std::this_thread::get_id()));
  return rng();
}

bool random_bytes(std::string& out) {
  for (size_t done = 0; done < out.size();) {
    ssize_t n = ::getrandom(out.data() + done, out.size() - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string temp_name(const std::string& dir, const std::string& stem) {
  char suffix[48];
  std::snprintf(suffix, sizeof suffix, ".%d.%016llx.tmp", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(random_u64()));
  return dir + "/." + stem + suffix;
}

// Keys become file names: refuse anything that could escape the folder or hide among dot files.
bool valid_key(const std::string& key) {
  return !key.empty() && key[0] != '.' && key.find('/') == std::string::npos;
}

std::string home_dir() {
  const char* h = std::getenv("HOME");
  std::string home = h ? h : "";
  if (home.empty())
    if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir) home = pw->pw_dir;
  if (home.empty()) return "";
  char* real = ::realpath(home.c_str(), nullptr);
  if (!real) return "";
  std::string out(real);
  std::free(real);
  return out;
}

// "" when `dir` may be trusted, else why not: the folder and each parent up to the user's home (or
// /) are folders owned by root or us and not writable by group or others; a parent may be writable
// by others with the sticky bit (nobody else can then rename or remove what is ours in it).
std::string trust_problem(const std::string& dir) {
  char* real = ::realpath(dir.c_str(), nullptr);
  if (!real) return dir + ": " + errno_text(errno);
  std::string p(real);
  std::free(real);
  const std::string home = home_dir();
  const uid_t me = ::geteuid();
  for (bool leaf = true;; leaf = false) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) return p + ": " + errno_text(errno);
    if (!S_ISDIR(st.st_mode)) return p + " is not a folder";
    if (st.st_uid != 0 && st.st_uid != me)
      return p + " is owned by another user (uid " + std::to_string(st.st_uid) + ")";
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && (leaf || !(st.st_mode & S_ISVTX)))
      return p + " is writable by group or others (mode " + octal_mode(st.st_mode) + ")";
    if (p == "/" || p == home) return "";
    const size_t slash = p.find_last_of('/');
    p = slash == 0 ? "/" : p.substr(0, slash);
  }
}

// The folder's 32-byte secret, created on first use (a temp file linked into place, so readers
// never see a partial one and the first of racing processes wins). "" and *why on failure.
std::string load_or_create_secret(const std::string& dir, std::string* why) {
  const std::string path = dir + "/" + kSecretName;
  for (int attempt = 0; attempt < 2; ++attempt) {
    int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
      struct stat st;
      std::string secret;
      if (::fstat(fd, &st) != 0) *why = path + ": " + errno_text(errno);
      else if (!S_ISREG(st.st_mode)) *why = path + " is not a regular file";
      else if (st.st_uid != ::geteuid()) *why = path + " is owned by another user (uid " + std::to_string(st.st_uid) + ")";
      else if (st.st_mode & 077) *why = path + " is open to group or others (mode " + octal_mode(st.st_mode) + ")";
      else if (int err = read_fd(fd, &secret)) *why = path + ": " + errno_text(err);
      else if (secret.size() != kSecretSize) *why = path + " does not hold " + std::to_string(kSecretSize) + " bytes";
      ::close(fd);
      return why->empty() ? secret : "";
    }
    if (errno != ENOENT) {
      *why = path + ": " + errno_text(errno);  // ELOOP: a symlink was planted there
      return "";
    }
    std::string secret(kSecretSize, '\0');
    if (!random_bytes(secret)) {
      *why = "no random bytes from the kernel: " + errno_text(errno);
      return "";
    }
    const std::string tmp = temp_name(dir, kSecretName + 1);
    int t = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (t < 0) {
      *why = tmp + ": " + errno_text(errno);
      return "";
    }
    bool ok = write_all(t, secret) && ::fsync(t) == 0;
    ok = ::close(t) == 0 && ok;
    const bool linked = ok && (::link(tmp.c_str(), path.c_str()) == 0 || errno == EEXIST);
    ::unlink(tmp.c_str());
    if (!linked) {
      *why = path + ": cannot create (" + errno_text(errno) + ")";
      return "";
    }
  }
  *why = path + ": cannot create";
  return "";
}

// flock() already excludes threads that open the lock file separately (each open() is its own
// open file description), but not on file systems that emulate it with POSIX locks (NFS), nor
// when the lock file cannot be created. A per-entry mutex covers threads of this process.
std::mutex& entry_mutex(const std::string& path) {
  static std::mutex mu;
  static auto* mutexes = new std::unordered_map<std::string, std::unique_ptr<std::mutex>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& m = (*mutexes)[path];
  if (!m) m = std::make_unique<std::mutex>();
  return *m;
}

// An exclusive lock on "<key>.lock", removed by its holder on release. A waiter may wake holding
// a file that was unlinked (or replaced) meanwhile: it then locks the file now at the path.
class KeyLock {
 public:
  explicit KeyLock(std::string path) : path_(std::move(path)) {
    for (int tries = 0; tries < 1000; ++tries) {
      int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd < 0) {
        log::debug("tileops: cannot create lock " + path_ + " (" + errno_text(errno) + "); building unlocked");
        return;
      }
      while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
      }
      struct stat held, now;
      if (::fstat(fd, &held) == 0 && ::lstat(path_.c_str(), &now) == 0 && held.st_dev == now.st_dev &&
          held.st_ino == now.st_ino) {
        fd_ = fd;
        return;
      }
      ::close(fd);
    }
  }
  ~KeyLock() {
    if (fd_ < 0) return;
    ::unlink(path_.c_str());  // before the unlock: a waiter then sees the inode is gone and retries
    ::close(fd_);
  }
  KeyLock(const KeyLock&) = delete;
  KeyLock& operator=(const KeyLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

struct DiskCache::Layer {
  std::string dir;
  uint32_t kind;       // the entries it accepts and writes
  std::string secret;  // HMAC key of user entries
  bool writable;

  // User entries are per NVRTC version (users switch between environments); an image holds what
  // its warm-up's NVRTC built, and finding it must not load NVRTC (tens of ms), so its names do not
  // depend on the runtime's version.
  std::string stem(const std::string& key, int nvrtc) const {
    return kind == kUserEntry ? key + "-nvrtc" + std::to_string(nvrtc) : key;
  }
  std::string path(const std::string& stem) const { return dir + "/" + stem + ".cubin"; }

  Digest256 tag(const std::string& stem, std::string_view body) const {
    std::string prefix;
    put(prefix, stem.size(), 4);
    prefix += stem;
    if (kind == kUserEntry) return HmacSha256(secret).update(prefix).update(body).finish();
    return Sha256().update(prefix).update(body).finish();
  }

  std::string encode(const std::string& stem, const Cubin& c, int nvrtc) const {
    std::string out(kMagic, sizeof kMagic);
    put(out, kFormatVersion, 4);
    put(out, kind, 4);
    put(out, static_cast<uint32_t>(nvrtc), 4);
    put(out, c.lowered_name.size(), 4);
    put(out, c.image.size(), 8);
    out += c.lowered_name;
    out += c.image;
    const Digest256 t = tag(stem, out);
    return out.append(reinterpret_cast<const char*>(t.data()), t.size());
  }

  // nullopt and *why when the bytes are not a complete entry of this layer's kind, authentic for
  // `stem` (and built by NVRTC `nvrtc`, unless that is 0).
  std::optional<Cubin> decode(const std::string& stem, const std::string& data, int nvrtc, const char** why) const {
    auto bad = [&](const char* reason) {
      *why = reason;
      return std::nullopt;
    };
    if (data.size() < kHeaderSize + kTagSize || data.compare(0, sizeof kMagic, kMagic, sizeof kMagic) != 0)
      return bad("bad magic or short header");
    if (get(data, 8, 4) != kFormatVersion) return bad("other format version");
    if (get(data, 12, 4) != kind) return bad(kind == kUserEntry ? "not a user entry" : "not an image entry");
    const uint64_t name_len = get(data, 20, 4), image_len = get(data, 24, 8);
    if (image_len > data.size() || kHeaderSize + name_len + image_len + kTagSize != data.size())
      return bad("size mismatch (truncated?)");
    const size_t body = data.size() - kTagSize;
    const Digest256 t = tag(stem, std::string_view(data).substr(0, body));
    if (!digests_equal(t.data(), reinterpret_cast<const unsigned char*>(data.data() + body), kTagSize))
      return bad(kind == kUserEntry ? "authentication failed" : "digest mismatch");
    if (nvrtc != 0 && get(data, 16, 4) != static_cast<uint32_t>(nvrtc)) return bad("built by another NVRTC");
    return Cubin{data.substr(kHeaderSize + name_len, image_len), data.substr(kHeaderSize, name_len)};
  }

  std::optional<Cubin> load(const std::string& stem, int nvrtc) const {
    const std::string file = path(stem);
    // O_NONBLOCK: a FIFO in place of an entry must not hang us (it is refused below).
    int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      if (errno != ENOENT) log::debug("tileops: ignoring cache entry " + file + ": " + errno_text(errno));
      return std::nullopt;
    }
    struct stat st;
    std::string data;
    const char* why = "";
    std::optional<Cubin> c;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) why = "not a regular file";
    else if (st.st_uid != ::geteuid() && (writable || st.st_uid != 0)) why = "owned by another user";
    else if (st.st_mode & (S_IWGRP | S_IWOTH)) why = "writable by group or others";
    else if (read_fd(fd, &data) != 0) why = "read error";
    else c = decode(stem, data, nvrtc, &why);
    if (c && writable) ::futimens(fd, nullptr);  // a hit is a use: the size cap evicts by mtime
    ::close(fd);
    // A bad entry is a miss; the rebuilt kernel's store() renames a good file over it.
    if (!c) log::debug("tileops: ignoring cache entry " + file + ": " + why);
    return c;
  }
};

DiskCacheOptions cache_options_from_environment() {
  DiskCacheOptions o;
  const std::string off = env("TILEOPS_DISABLE_DISK_CACHE");
  if (off == "1" || off == "true" || off == "yes" || off == "on") return o;
  if (std::string d = env("TILEOPS_CACHE_DIR"); !d.empty()) o.dir = d;
  else if (std::string x = env("XDG_CACHE_HOME"); !x.empty()) o.dir = x + "/tileops/kernels";
  else if (std::string home = home_dir(); !home.empty()) o.dir = home + "/.cache/tileops/kernels";
  const std::string ro = env("TILEOPS_CACHE_DIR_READONLY");
  for (size_t start = 0; start <= ro.size();) {
    size_t end = ro.find(':', start);
    if (end == std::string::npos) end = ro.size();
    if (end > start) o.readonly_dirs.push_back(ro.substr(start, end - start));
    start = end + 1;
  }
  if (const std::string cap = env("TILEOPS_CACHE_MAX_BYTES"); !cap.empty()) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(cap.c_str(), &end, 10);
    if (errno == 0 && end && *end == '\0' && cap[0] != '-') o.max_bytes = v;
    else log::warn("tileops: TILEOPS_CACHE_MAX_BYTES=" + cap + " is not a number of bytes; the cache has no cap");
  }
  return o;
}

DiskCache::DiskCache(DiskCacheOptions options) : options_(std::move(options)) {
  auto trim = [](std::string& d) {
    while (d.size() > 1 && d.back() == '/') d.pop_back();
  };
  trim(options_.dir);
  for (auto& d : options_.readonly_dirs) trim(d);
}

DiskCache::~DiskCache() = default;

DiskCache& DiskCache::global() {
  // Never destroyed: kernels may still be built from other static destructors.
  static DiskCache* cache = [] {
    auto* c = new DiskCache(cache_options_from_environment());
    log::debug(c->dir().empty() ? "tileops: no writable kernel disk cache" : "tileops: kernel disk cache in " + c->dir());
    return c;
  }();
  return *cache;
}

void DiskCache::prepare_readonly() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (readonly_prepared_) return;
  readonly_prepared_ = true;
  for (const std::string& d : options_.readonly_dirs) {
    if (std::string why = trust_problem(d); !why.empty()) {
      log::warn_once(d, "tileops: read-only kernel cache folder " + d + " is not used: " + why);
      continue;
    }
    readonly_.push_back(std::make_unique<Layer>(Layer{d, kImageEntry, "", false}));
  }
}

// Only after a miss in the images: a hit there touches nothing else (no folder made, no key read).
void DiskCache::prepare_writable() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (writable_prepared_) return;
  writable_prepared_ = true;
  const std::string& d = options_.dir;
  if (d.empty()) return;
  auto refuse = [&](const std::string& why) {
    log::warn_once(d, "tileops: kernel cache folder " + d + " " + why + "; kernels are cached in memory only");
  };
  if (int err = make_dirs(d, options_.image ? 0755 : 0700)) return refuse("is not writable (" + errno_text(err) + ")");
  if (std::string why = trust_problem(d); !why.empty()) return refuse("is not safe: " + why);
  auto layer = std::make_unique<Layer>(Layer{d, options_.image ? kImageEntry : kUserEntry, "", true});
  if (!options_.image) {
    std::string why;
    layer->secret = load_or_create_secret(d, &why);
    if (layer->secret.empty()) return refuse("has no usable key: " + why);
  }
  writable_ = std::move(layer);
}

int DiskCache::nvrtc() const {
  std::call_once(nvrtc_once_, [this] {
    if (options_.nvrtc_version != 0) {
      nvrtc_ = options_.nvrtc_version;
      return;
    }
    try {
      nvrtc_ = nvrtc_version();
    } catch (const std::exception& e) {
      log::debug(std::string("tileops: kernel disk cache: ") + e.what());
      nvrtc_ = -1;
    }
  });
  return nvrtc_;
}

DiskCache::Layer* DiskCache::writable() const {
  prepare_writable();
  return writable_.get();
}

std::optional<Cubin> DiskCache::load(const std::string& key) const {
  if (!enabled() || !valid_key(key)) return std::nullopt;
  prepare_readonly();
  for (const auto& layer : readonly_)
    if (auto c = layer->load(key, 0)) return c;
  const Layer* w = writable();
  if (!w) return std::nullopt;
  if (w->kind == kImageEntry) return w->load(key, 0);
  const int v = nvrtc();
  return v > 0 ? w->load(w->stem(key, v), v) : std::nullopt;
}

bool DiskCache::store(const std::string& key, const Cubin& cubin) const {
  if (!valid_key(key)) return false;
  Layer* layer = writable();
  if (!layer) return false;
  auto unwritable = [&](int err) {
    log::warn_once(layer->dir, "tileops: kernel cache folder " + layer->dir + " is not writable (" + errno_text(err) +
                                   "); kernels are cached in memory only");
    return false;
  };
  const int v = nvrtc();
  if (v <= 0) return false;  // no NVRTC: nothing was built here to store
  const std::string stem = layer->stem(key, v);
  const std::string tmp = temp_name(layer->dir, stem);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return unwritable(errno);
  // Image entries are read by every user of the image; the umask must not narrow that.
  if (options_.image) ::fchmod(fd, 0644);
  // No fsync: a torn entry after a crash fails verification on load and is simply rebuilt.
  const bool written = write_all(fd, layer->encode(stem, cubin, v));
  int err = errno;
  const bool closed = ::close(fd) == 0;
  if (written && !closed) err = errno;
  if (written && closed && ::rename(tmp.c_str(), layer->path(stem).c_str()) == 0) {
    evict_over_cap(*layer, stem);
    return true;
  }
  if (written && closed) err = errno;  // rename failed
  ::unlink(tmp.c_str());
  return unwritable(err);
}

void DiskCache::evict_over_cap(const Layer& layer, const std::string& kept_stem) const {
  if (options_.max_bytes == 0) return;
  struct Entry {
    struct timespec mtime;
    std::string name;
    uint64_t size;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  DIR* d = ::opendir(layer.dir.c_str());
  if (!d) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    struct stat st;
    if (name[0] == '.' || name.size() < 6 || name.compare(name.size() - 6, 6, ".cubin") != 0) continue;
    if (::fstatat(::dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    total += static_cast<uint64_t>(st.st_size);
    entries.push_back({st.st_mtim, name, static_cast<uint64_t>(st.st_size)});
  }
  ::closedir(d);
  if (total <= options_.max_bytes) return;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.mtime.tv_sec != b.mtime.tv_sec) return a.mtime.tv_sec < b.mtime.tv_sec;
    if (a.mtime.tv_nsec != b.mtime.tv_nsec) return a.mtime.tv_nsec < b.mtime.tv_nsec;
    return a.name < b.name;
  });
  const std::string kept = kept_stem + ".cubin";
  for (const Entry& e : entries) {
    if (total <= options_.max_bytes) break;
    if (e.name == kept) continue;  // the entry just stored stays even when it alone exceeds the cap
    if (::unlink((layer.dir + "/" + e.name).c_str()) == 0 || errno == ENOENT) total -= e.size;
    log::debug("tileops: kernel cache over " + std::to_string(options_.max_bytes) + " bytes: evicted " + e.name);
  }
}

Cubin DiskCache::get_or_build(const std::string& key, const std::function<Cubin()>& build, bool* built) const {
  if (built) *built = false;
  auto build_now = [&] {
    Cubin c = build();
    if (built) *built = true;
    return c;
  };
  if (!valid_key(key)) return build_now();
  if (auto c = load(key)) return *c;
  const Layer* layer = writable();
  if (!layer) return build_now();

  const std::string base = layer->dir + "/" + key;
  std::lock_guard<std::mutex> in_process(entry_mutex(base));
  KeyLock cross_process(base + ".lock");
  if (auto c = load(key)) return *c;  // another thread or process built it meanwhile
  Cubin c = build_now();
  store(key, c);
  return c;
}

}  // namespace tileops::jit
