#include "jit/disk_cache.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include "common/log.h"
#include "jit/hash.h"

namespace tileops::jit {
namespace {

// Entry layout (integers little-endian):
//   magic[8] | u32 format | u32 name_len | u64 image_len | u64 hash(name, image) | name | image
constexpr char kMagic[8] = {'T', 'O', 'P', 'S', 'C', 'U', 'B', 'N'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderSize = 8 + 4 + 4 + 8 + 8;

void put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>(v >> (8 * i));
}
uint64_t get(const std::string& in, size_t pos, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<unsigned char>(in[pos + i])) << (8 * i);
  return v;
}
uint64_t content_hash(const Cubin& c) { return Hasher().add(c.lowered_name).add(c.image).digest(); }

std::string encode(const Cubin& c) {
  std::string out(kMagic, sizeof kMagic);
  put(out, kFormatVersion, 4);
  put(out, c.lowered_name.size(), 4);
  put(out, c.image.size(), 8);
  put(out, content_hash(c), 8);
  return out + c.lowered_name + c.image;
}

// Parses an entry; returns nullopt and sets *why when the bytes are not a complete, intact entry.
std::optional<Cubin> decode(const std::string& data, const char** why) {
  auto bad = [&](const char* reason) {
    *why = reason;
    return std::nullopt;
  };
  if (data.size() < kHeaderSize || data.compare(0, sizeof kMagic, kMagic, sizeof kMagic) != 0)
    return bad("bad magic or short header");
  if (get(data, 8, 4) != kFormatVersion) return bad("other format version");
  const uint64_t name_len = get(data, 12, 4), image_len = get(data, 16, 8);
  if (image_len > data.size() || kHeaderSize + name_len + image_len != data.size())
    return bad("size mismatch (truncated?)");
  Cubin c{data.substr(kHeaderSize + name_len), data.substr(kHeaderSize, name_len)};
  if (content_hash(c) != get(data, 24, 8)) return bad("hash mismatch");
  return c;
}

// Reads a whole file; returns 0 or an errno value.
int read_file(const std::string& path, std::string* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[1 << 16];
  int err = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) out->append(buf, static_cast<size_t>(n));
    else if (n == 0) break;
    else if (errno != EINTR) {
      err = errno;
      break;
    }
  }
  ::close(fd);
  return err;
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

// mkdir -p with mode 0755; returns 0 or an errno value.
int make_dirs(const std::string& dir) {
  size_t pos = 0;
  do {
    pos = dir.find('/', pos + 1);
    if (::mkdir(dir.substr(0, pos).c_str(), 0755) != 0 && errno != EEXIST) return errno;
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

// Keys become file names: refuse anything that could escape the folder.
bool valid_key(const std::string& key) {
  return !key.empty() && key[0] != '.' && key.find('/') == std::string::npos;
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

struct FileLock {
  int fd = -1;
  explicit FileLock(const std::string& path) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      log::debug("tileops: cannot create lock " + path + " (" + std::strerror(errno) + "); building unlocked");
      return;
    }
    while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~FileLock() {
    if (fd >= 0) ::close(fd);  // closing the last descriptor releases the lock
  }
};

std::string default_dir() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  std::string off = env("TILEOPS_DISABLE_DISK_CACHE");
  if (off == "1" || off == "true" || off == "yes" || off == "on") return "";
  if (std::string d = env("TILEOPS_CACHE_DIR"); !d.empty()) return d;
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return d + "/tileops/kernels";
  std::string home = env("HOME");
  if (home.empty())
    if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir) home = pw->pw_dir;
  return home.empty() ? "" : home + "/.cache/tileops/kernels";
}

}  // namespace

DiskCache::DiskCache(std::string dir) : dir_(std::move(dir)) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
}

DiskCache& DiskCache::global() {
  static DiskCache cache = [] {
    DiskCache c(default_dir());
    log::debug(c.enabled() ? "tileops: kernel disk cache in " + c.dir() : "tileops: kernel disk cache disabled");
    return c;
  }();
  return cache;
}

std::optional<Cubin> DiskCache::load(const std::string& key) const {
  if (!enabled() || !valid_key(key)) return std::nullopt;
  const std::string path = dir_ + "/" + key + ".cubin";
  std::string data;
  if (int err = read_file(path, &data)) {
    if (err != ENOENT) log::debug("tileops: cannot read " + path + ": " + std::strerror(err));
    return std::nullopt;
  }
  const char* why = "";
  std::optional<Cubin> c = decode(data, &why);
  // A bad entry is a miss; the rebuilt kernel's store() renames a good file over it.
  if (!c) log::debug("tileops: ignoring cache entry " + path + ": " + why);
  return c;
}

bool DiskCache::store(const std::string& key, const Cubin& cubin) const {
  if (!enabled() || !valid_key(key)) return false;
  auto unwritable = [&](int err) {
    log::warn_once(dir_, "tileops: kernel cache folder " + dir_ + " is not writable (" + std::strerror(err) +
                             "); kernels are cached in memory only");
    return false;
  };
  if (int err = make_dirs(dir_)) return unwritable(err);
  char suffix[48];
  std::snprintf(suffix, sizeof suffix, ".%d.%016llx.tmp", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(random_u64()));
  const std::string tmp = dir_ + "/." + key + suffix;
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return unwritable(errno);
  // No fsync: a torn entry after a crash fails verification on load and is simply rebuilt.
  const bool written = write_all(fd, encode(cubin));
  int err = errno;
  const bool closed = ::close(fd) == 0;
  if (written && !closed) err = errno;
  if (written && closed && ::rename(tmp.c_str(), (dir_ + "/" + key + ".cubin").c_str()) == 0) return true;
  if (written && closed) err = errno;  // rename failed
  ::unlink(tmp.c_str());
  return unwritable(err);
}

Cubin DiskCache::get_or_build(const std::string& key, const std::function<Cubin()>& build, bool* built) const {
  if (built) *built = false;
  auto build_now = [&] {
    Cubin c = build();
    if (built) *built = true;
    return c;
  };
  if (!enabled() || !valid_key(key)) return build_now();
  if (auto c = load(key)) return *c;

  const std::string base = dir_ + "/" + key;
  std::lock_guard<std::mutex> in_process(entry_mutex(base));
  make_dirs(dir_);  // the lock file needs the folder; store() reports a failure
  FileLock cross_process(base + ".lock");
  if (auto c = load(key)) return *c;  // another thread or process built it meanwhile
  Cubin c = build_now();
  store(key, c);
  return c;
}

}  // namespace tileops::jit
