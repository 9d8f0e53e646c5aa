#include "jit/disk_cache.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <unordered_map>
#include <vector>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "jit/sha256.h"

using namespace tileops::jit;
namespace fs = std::filesystem;

namespace {

Cubin fake_cubin(const std::string& tag = "a") {
  return Cubin{std::string("\x7f" "ELF\0\1\2", 7) + "image-" + tag, "_Z5scaleIfLi128EEvPT_S0_" + tag};
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_all(const fs::path& p, const std::string& data) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << data;
}

class DiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tileops-cache-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);  // user entries are kept per NVRTC version
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

// A build function that counts its calls.
std::function<Cubin()> counting(int& builds) {
  return [&builds] {
    ++builds;
    return fake_cubin();
  };
}

bool same(const Cubin& a, const Cubin& b) { return a.image == b.image && a.lowered_name == b.lowered_name; }

// A user entry's file name: kept per NVRTC version.
std::string user_entry(const std::string& key) { return key + "-nvrtc" + std::to_string(nvrtc_version()) + ".cubin"; }

}  // namespace

TEST_F(DiskCacheTest, StoreLoadRoundTripCreatesFolders) {
  DiskCache cache((root_ / "a/b/kernels").string());
  EXPECT_FALSE(cache.load("k-0123").has_value());
  ASSERT_TRUE(cache.store("k-0123", fake_cubin()));
  EXPECT_TRUE(fs::is_regular_file(root_ / "a/b/kernels" / user_entry("k-0123")));
  auto loaded = cache.load("k-0123");
  ASSERT_TRUE(loaded.has_value());
  EXPECT_TRUE(same(*loaded, fake_cubin()));
  // Overwriting an entry replaces it; no temp files are left behind.
  ASSERT_TRUE(cache.store("k-0123", fake_cubin("b")));
  EXPECT_TRUE(same(*cache.load("k-0123"), fake_cubin("b")));
  for (const auto& e : fs::directory_iterator(root_ / "a/b/kernels"))
    EXPECT_NE(e.path().extension(), ".tmp") << e.path();
}

TEST_F(DiskCacheTest, DisabledAndInvalidKeys) {
  DiskCache off("");
  EXPECT_FALSE(off.enabled());
  EXPECT_FALSE(off.store("k", fake_cubin()));
  int builds = 0;
  bool built = false;
  for (int i = 0; i < 2; ++i) off.get_or_build("k", counting(builds), &built);
  EXPECT_EQ(builds, 2);
  EXPECT_TRUE(built);

  DiskCache cache(root_.string());
  EXPECT_FALSE(cache.store("../escape", fake_cubin()));
  EXPECT_FALSE(cache.store("", fake_cubin()));
  EXPECT_FALSE(cache.load("../escape").has_value());
}

TEST_F(DiskCacheTest, CorruptEntriesAreMissesAndGetRebuilt) {
  DiskCache cache(root_.string());
  const fs::path file = root_ / user_entry("k");
  ASSERT_TRUE(cache.store("k", fake_cubin()));
  const std::string good = read_all(file);

  std::vector<std::string> bad;
  for (size_t pos : {size_t{0}, size_t{9}, size_t{13}, size_t{20}, size_t{30}, good.size() / 2, good.size() - 1}) {
    std::string b = good;
    b[pos] ^= 0x5a;  // one flipped byte anywhere: magic, version, lengths, hash, name, image
    bad.push_back(b);
  }
  bad.push_back(good.substr(0, good.size() - 3));  // truncated image
  bad.push_back(good.substr(0, 10));                // truncated header
  bad.push_back(good + "x");                        // trailing garbage
  bad.push_back("");

  for (size_t i = 0; i < bad.size(); ++i) {
    write_all(file, bad[i]);
    EXPECT_FALSE(cache.load("k").has_value()) << "case " << i;
    bool built = false;
    Cubin c = cache.get_or_build("k", [] { return fake_cubin(); }, &built);
    EXPECT_TRUE(built) << "case " << i;
    EXPECT_TRUE(same(c, fake_cubin()));
    ASSERT_TRUE(cache.load("k").has_value()) << "case " << i;
    EXPECT_EQ(read_all(file), good);
  }
}

TEST_F(DiskCacheTest, GetOrBuildBuildsOnceThenHits) {
  DiskCache cache(root_.string());
  int builds = 0;
  bool built = false;
  Cubin first = cache.get_or_build("k", counting(builds), &built);
  EXPECT_TRUE(built);
  Cubin second = cache.get_or_build("k", counting(builds), &built);
  EXPECT_FALSE(built);
  EXPECT_EQ(builds, 1);
  EXPECT_TRUE(same(first, second));
  // A second cache object (another process, in effect) hits too; `built` may be null.
  EXPECT_TRUE(same(DiskCache(root_.string()).get_or_build("k", counting(builds), nullptr),
                   first));
  EXPECT_EQ(builds, 1);
}

TEST_F(DiskCacheTest, BuildErrorsPropagateAndReleaseTheLock) {
  DiskCache cache(root_.string());
  EXPECT_THROW(cache.get_or_build("k", []() -> Cubin { throw std::runtime_error("boom"); }, nullptr),
               std::runtime_error);
  bool built = false;
  cache.get_or_build("k", [] { return fake_cubin(); }, &built);  // would deadlock if still locked
  EXPECT_TRUE(built);
}

TEST_F(DiskCacheTest, UnwritableFolderFallsBackToBuilding) {
  // A folder below a regular file cannot be created, even by root (tests run as root, so
  // permission bits would not stop the writes).
  write_all(root_ / "file", "x");
  DiskCache cache((root_ / "file/kernels").string());
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.store("k", fake_cubin()));
  EXPECT_FALSE(cache.store("k2", fake_cubin()));
  int builds = 0;
  bool built = false;
  for (int i = 0; i < 2; ++i) {
    Cubin c = cache.get_or_build("k", counting(builds), &built);
    EXPECT_TRUE(built);
    EXPECT_TRUE(same(c, fake_cubin()));
  }
  EXPECT_EQ(builds, 2);
  const std::string err = ::testing::internal::GetCapturedStderr();
  size_t warnings = 0;
  for (size_t p = err.find("is not writable"); p != std::string::npos; p = err.find("is not writable", p + 1))
    ++warnings;
  if (std::getenv("TILEOPS_LOG_LEVEL") == nullptr) {  // default level: warnings are shown, once
    EXPECT_EQ(warnings, 1u) << err;
    EXPECT_NE(err.find("kernels are cached in memory only"), std::string::npos) << err;
  } else {
    EXPECT_LE(warnings, 1u) << err;
  }
}

TEST_F(DiskCacheTest, ThreadsBuildOnce) {
  DiskCache cache(root_.string());
  std::atomic<int> builds{0}, built_count{0};
  std::vector<Cubin> results(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      bool built = false;
      results[t] = cache.get_or_build("shared-key", [&] {
        ++builds;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return fake_cubin();
      }, &built);
      built_count += built;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(builds.load(), 1);
  EXPECT_EQ(built_count.load(), 1);
  for (const auto& r : results) EXPECT_TRUE(same(r, fake_cubin()));
}

TEST_F(DiskCacheTest, ProcessesBuildOnce) {
  const std::string dir = (root_ / "kernels").string();
  const std::string log = (root_ / "builds.txt").string();
  auto run = [&] {
    return DiskCache(dir).get_or_build("fork-key", [&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      std::string line = "built by " + std::to_string(::getpid()) + "\n";
      EXPECT_EQ(::write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
      ::close(fd);
      return fake_cubin();
    }, nullptr);
  };
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    bool ok = false;
    try {
      ok = same(run(), fake_cubin());
    } catch (...) {
    }
    ::_exit(ok ? 0 : 1);
  }
  Cubin mine = run();
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(same(mine, fake_cubin()));
  std::string lines = read_all(log);
  EXPECT_EQ(std::count(lines.begin(), lines.end(), '\n'), 1) << lines;
}

TEST(DiskCacheGlobal, ReadsEnvironmentOnce) {
  ::setenv("TILEOPS_CACHE_DIR", "/tmp/tileops-global-test", 1);
  ::unsetenv("TILEOPS_DISABLE_DISK_CACHE");
  DiskCache& g = DiskCache::global();
  EXPECT_EQ(g.dir(), "/tmp/tileops-global-test");
  ::setenv("TILEOPS_CACHE_DIR", "/tmp/elsewhere", 1);
  EXPECT_EQ(&DiskCache::global(), &g);
  EXPECT_EQ(DiskCache::global().dir(), "/tmp/tileops-global-test");
}

// ---- security: modes, trust, links, authentication, locks, size cap, layers ----------------------
namespace {

mode_t mode_of(const fs::path& p) {
  struct stat st;
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

size_t count_in(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t p = text.find(part); p != std::string::npos; p = text.find(part, p + 1)) ++n;
  return n;
}

// A real kernel, so that forged entries carry real CUBINs.
KernelSource demo_kernel(int n) {
  KernelSource s;
  s.name = "demo_fill_" + std::to_string(n) + "__sm_80";
  s.source = "template <int N> __global__ void fill(float* x) { if (threadIdx.x < N) x[threadIdx.x] = N; }\n";
  s.name_expression = "fill<" + std::to_string(n) + ">";
  s.arch = "sm_80";
  return s;
}

Cubin real_cubin(int n) {
  add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  static std::unordered_map<int, Cubin> built;
  auto it = built.find(n);
  if (it == built.end()) it = built.emplace(n, compile_to_cubin(demo_kernel(n))).first;
  return it->second;
}

// What someone who can write the folder, but cannot read its key, can make: an entry in the
// library's layout whose tag is a plain SHA-256 (or an HMAC under a key of their own).
std::string forged_entry(const std::string& stem, const Cubin& c, uint32_t kind, const std::string* hmac_key) {
  auto put = [](std::string& out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out += static_cast<char>(v >> (8 * i));
  };
  std::string body("TOPSCUBN", 8);
  put(body, 2, 4);
  put(body, kind, 4);
  put(body, nvrtc_version(), 4);
  put(body, c.lowered_name.size(), 4);
  put(body, c.image.size(), 8);
  body += c.lowered_name + c.image;
  std::string msg;
  put(msg, stem.size(), 4);
  msg += stem + body;
  const Digest256 tag = hmac_key ? hmac_sha256(*hmac_key, msg) : sha256(msg);
  return body + std::string(reinterpret_cast<const char*>(tag.data()), tag.size());
}

bool chown_to_nobody(const fs::path& p) {
  const passwd* pw = ::getpwnam("nobody");
  return pw && ::lchown(p.c_str(), pw->pw_uid, pw->pw_gid) == 0;
}

}  // namespace

TEST_F(DiskCacheTest, FoldersAre0700EntriesAndKey0600AndNoLocksRemain) {
  ::umask(022);
  const fs::path dir = root_ / "a/b/kernels";
  DiskCache cache(dir.string());
  bool built = false;
  cache.get_or_build("k", [] { return fake_cubin(); }, &built);
  EXPECT_TRUE(built);
  EXPECT_EQ(mode_of(root_ / "a"), 0700u);
  EXPECT_EQ(mode_of(root_ / "a/b"), 0700u);
  EXPECT_EQ(mode_of(dir), 0700u);
  EXPECT_EQ(mode_of(dir / user_entry("k")), 0600u);
  EXPECT_EQ(mode_of(dir / ".hmac-key"), 0600u);
  EXPECT_EQ(fs::file_size(dir / ".hmac-key"), 32u);
  // The lock is removed after use, also when the build throws.
  EXPECT_THROW(cache.get_or_build("k2", []() -> Cubin { throw std::runtime_error("boom"); }, nullptr),
               std::runtime_error);
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{".hmac-key", user_entry("k")}));
}

TEST_F(DiskCacheTest, FolderWritableByOthersIsRefusedWithOneWarning) {
  for (const char* layout : {"leaf", "parent"}) {
    const fs::path parent = root_ / layout, dir = parent / "kernels";
    fs::create_directories(dir);
    ::chmod((std::string(layout) == "leaf" ? dir : parent).c_str(), 0777);
    DiskCache cache(dir.string());
    ::testing::internal::CaptureStderr();
    int builds = 0;
    for (int i = 0; i < 3; ++i) cache.get_or_build("k", counting(builds), nullptr);
    EXPECT_FALSE(cache.store("k", fake_cubin()));
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(builds, 3) << layout;        // memory only: every call builds
    EXPECT_TRUE(fs::is_empty(dir)) << layout;  // no entry, no lock, no key written there
    if (std::getenv("TILEOPS_LOG_LEVEL") == nullptr) {
      EXPECT_EQ(count_in(err, "writable by group or others"), 1u) << err;
      EXPECT_NE(err.find("cached in memory only"), std::string::npos) << err;
    }
  }
  // A sticky parent (like /tmp) is fine: others cannot rename or remove what is ours in it.
  const fs::path sticky = root_ / "sticky";
  fs::create_directories(sticky);
  ::chmod(sticky.c_str(), 01777);
  EXPECT_TRUE(DiskCache((sticky / "kernels").string()).store("k", fake_cubin()));
}

TEST_F(DiskCacheTest, FolderOwnedByAnotherUserIsRefused) {
  const fs::path dir = root_ / "kernels";
  fs::create_directories(dir);
  ::chmod(dir.c_str(), 0700);
  if (!chown_to_nobody(dir)) GTEST_SKIP() << "cannot chown to nobody here";
  ::testing::internal::CaptureStderr();
  DiskCache cache(dir.string());
  int builds = 0;
  for (int i = 0; i < 2; ++i) cache.get_or_build("k", counting(builds), nullptr);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(builds, 2);
  EXPECT_TRUE(fs::is_empty(dir));
  if (std::getenv("TILEOPS_LOG_LEVEL") == nullptr) {
    EXPECT_EQ(count_in(err, "owned by another user"), 1u) << err;
  }

  // In a folder of ours, an entry (or the key) owned by someone else is not trusted either.
  const fs::path mine = root_ / "mine";
  DiskCache ok(mine.string());
  ASSERT_TRUE(ok.store("k", fake_cubin()));
  ASSERT_TRUE(ok.load("k").has_value());
  ASSERT_TRUE(chown_to_nobody(mine / user_entry("k")));
  EXPECT_FALSE(ok.load("k").has_value());
  ASSERT_TRUE(chown_to_nobody(mine / ".hmac-key"));
  DiskCache again(mine.string());
  EXPECT_FALSE(again.can_store());
}

TEST_F(DiskCacheTest, SymlinkedEntryIsNotFollowed) {
  DiskCache cache((root_ / "kernels").string());
  ASSERT_TRUE(cache.store("k", fake_cubin()));
  // A valid entry, moved out of the folder and linked back in: not followed, rebuilt.
  fs::rename(root_ / "kernels" / user_entry("k"), root_ / "elsewhere.cubin");
  fs::create_symlink(root_ / "elsewhere.cubin", root_ / "kernels" / user_entry("k"));
  EXPECT_FALSE(cache.load("k").has_value());
  bool built = false;
  cache.get_or_build("k", [] { return fake_cubin(); }, &built);
  EXPECT_TRUE(built);
  EXPECT_FALSE(fs::is_symlink(root_ / "kernels" / user_entry("k")));  // the rename replaced the link itself
  EXPECT_TRUE(cache.load("k").has_value());
}

TEST_F(DiskCacheTest, SymlinkedLockDoesNotCreateItsTarget) {
  const fs::path dir = root_ / "kernels";
  DiskCache cache(dir.string());
  ASSERT_TRUE(cache.can_store());
  fs::create_symlink(root_ / "planted-target", dir / "k.lock");
  bool built = false;
  Cubin c = cache.get_or_build("k", [] { return fake_cubin(); }, &built);
  EXPECT_TRUE(built);
  EXPECT_TRUE(same(c, fake_cubin()));
  EXPECT_FALSE(fs::exists(fs::symlink_status(root_ / "planted-target"))) << "O_CREAT followed the planted link";
  // A symlinked key file is refused too (never followed, never created through).
  const fs::path other = root_ / "other";
  fs::create_directories(other);
  ::chmod(other.c_str(), 0700);
  fs::create_symlink(root_ / "key-target", other / ".hmac-key");
  EXPECT_FALSE(DiskCache(other.string()).can_store());
  EXPECT_FALSE(fs::exists(fs::symlink_status(root_ / "key-target")));
}

TEST_F(DiskCacheTest, ForgedEntriesAreRejectedAndRebuilt) {
  const fs::path dir = root_ / "kernels";
  DiskCache cache(dir.string());
  const Cubin good = real_cubin(64), evil = real_cubin(128);
  ASSERT_NE(good.image, evil.image);
  ASSERT_TRUE(cache.store("k", good));
  const std::string genuine = read_all(dir / user_entry("k"));

  const std::string other_key(32, '\x11');
  const std::string stem = user_entry("k").substr(0, user_entry("k").size() - 6);
  std::vector<std::pair<const char*, std::string>> forgeries = {
      {"plain SHA-256, user kind", forged_entry(stem, evil, 1, nullptr)},
      {"plain SHA-256, image kind", forged_entry(stem, evil, 2, nullptr)},
      {"HMAC under another key", forged_entry(stem, evil, 1, &other_key)},
  };
  // A genuine entry of another key (of the same length), renamed: the key is authenticated too.
  ASSERT_TRUE(cache.store("j", evil));
  forgeries.push_back({"another key's entry", read_all(dir / user_entry("j"))});
  // A genuine entry of another cache (another secret).
  DiskCache elsewhere((root_ / "elsewhere").string());
  ASSERT_TRUE(elsewhere.store("k", evil));
  forgeries.push_back({"another cache's entry", read_all(root_ / "elsewhere" / user_entry("k"))});

  for (const auto& [what, bytes] : forgeries) {
    write_all(dir / user_entry("k"), bytes);
    EXPECT_FALSE(cache.load("k").has_value()) << what;
    bool built = false;
    Cubin c = cache.get_or_build("k", [&] { return good; }, &built);
    EXPECT_TRUE(built) << what;
    EXPECT_EQ(c.image, good.image) << what;
    EXPECT_EQ(cache.load("k")->image, good.image) << what;
  }
  // The check is not the only thing that changed: the genuine bytes still load.
  write_all(dir / user_entry("k"), genuine);
  EXPECT_EQ(cache.load("k")->image, good.image);
}

TEST_F(DiskCacheTest, SizeCapEvictsLeastRecentlyUsed) {
  const fs::path dir = root_ / "kernels";
  const Cubin c = fake_cubin(std::string(1000, 'x'));
  DiskCache probe(dir.string());
  ASSERT_TRUE(probe.store("probe", c));
  const uint64_t entry = fs::file_size(dir / user_entry("probe"));
  fs::remove(dir / user_entry("probe"));

  DiskCache cache(DiskCacheOptions{dir.string(), {}, 3 * entry, false});
  for (const char* k : {"a", "b", "c"}) ASSERT_TRUE(cache.store(k, c));
  // Oldest first: a, b, c. Then a hit on "a" makes "b" the least recently used.
  for (auto [k, age] : {std::pair{"a", 300}, {"b", 200}, {"c", 100}}) {
    const auto t = fs::file_time_type::clock::now() - std::chrono::seconds(age);
    fs::last_write_time(dir / user_entry(k), t);
  }
  ASSERT_TRUE(cache.load("a").has_value());
  ASSERT_TRUE(cache.store("d", c));
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{".hmac-key", user_entry("a"), user_entry("c"), user_entry("d")}));
  // Without a cap nothing is evicted.
  DiskCache uncapped(dir.string());
  ASSERT_TRUE(uncapped.store("e", c));
  EXPECT_EQ(names_in(dir).size(), 5u);
}

TEST_F(DiskCacheTest, ReadOnlyImageLayerIsLookedUpFirstAndNeverWritten) {
  const fs::path image = root_ / "image", user = root_ / "user";
  DiskCache writer(DiskCacheOptions{image.string(), {}, 0, true});
  ASSERT_TRUE(writer.store("k", fake_cubin("img")));
  EXPECT_EQ(mode_of(image), 0755u);
  EXPECT_EQ(mode_of(image / "k.cubin"), 0644u);
  EXPECT_FALSE(fs::exists(image / ".hmac-key"));

  DiskCache layered(DiskCacheOptions{user.string(), {image.string()}, 0, false});
  int builds = 0;
  bool built = true;
  Cubin c = layered.get_or_build("k", counting(builds), &built);
  EXPECT_FALSE(built);
  EXPECT_EQ(builds, 0);
  EXPECT_TRUE(same(c, fake_cubin("img")));
  EXPECT_FALSE(fs::exists(user / user_entry("k")));
  // A miss in the image is built into the user folder, not the image.
  layered.get_or_build("k2", counting(builds), &built);
  EXPECT_TRUE(built);
  EXPECT_TRUE(fs::exists(user / user_entry("k2")));
  EXPECT_FALSE(fs::exists(image / "k2.cubin"));

  // Kinds do not cross: an image entry is no user entry (it has no HMAC), a user entry is no
  // image entry.
  fs::copy_file(image / "k.cubin", user / user_entry("k3"));
  fs::copy_file(user / user_entry("k2"), image / "k4.cubin");
  DiskCache user_only(user.string()), image_only(DiskCacheOptions{"", {image.string()}, 0, false});
  EXPECT_FALSE(user_only.load("k3").has_value());
  EXPECT_FALSE(image_only.load("k4").has_value());
  EXPECT_TRUE(image_only.load("k").has_value());
}

// A hit in an image must not load NVRTC (a dlopen of tens of milliseconds on the first call).
TEST_F(DiskCacheTest, ImageHitDoesNotLoadNvrtc) {
  auto nvrtc_mapped = [] { return read_all("/proc/self/maps").find("libnvrtc") != std::string::npos; };
  if (nvrtc_mapped()) GTEST_SKIP() << "NVRTC is already loaded in this process (ctest runs each test alone)";
  const fs::path image = root_ / "image", user = root_ / "user";
  DiskCacheOptions writer_options{image.string(), {}, 0, true};
  writer_options.nvrtc_version = 12080;  // as if built elsewhere by NVRTC 12.8
  ASSERT_TRUE(DiskCache(writer_options).store("k", fake_cubin("img")));
  DiskCache layered(DiskCacheOptions{user.string(), {image.string()}, 0, false});
  int builds = 0;
  EXPECT_TRUE(same(layered.get_or_build("k", counting(builds), nullptr), fake_cubin("img")));
  EXPECT_EQ(builds, 0);
  EXPECT_FALSE(nvrtc_mapped());
  EXPECT_FALSE(fs::exists(user));  // nor is the user folder made or its key read
  layered.get_or_build("k2", counting(builds), nullptr);  // a miss goes to the user folder: NVRTC's version
  EXPECT_EQ(builds, 1);
  EXPECT_TRUE(nvrtc_mapped());
  EXPECT_TRUE(fs::exists(user / user_entry("k2")));
}

TEST_F(DiskCacheTest, UserEntriesAreKeptPerNvrtcVersion) {
  const fs::path dir = root_ / "kernels";
  DiskCacheOptions old_nvrtc{dir.string(), {}, 0, false};
  old_nvrtc.nvrtc_version = 12080;
  ASSERT_TRUE(DiskCache(old_nvrtc).store("k", fake_cubin("old")));
  DiskCache current(dir.string());
  int builds = 0;
  EXPECT_TRUE(same(current.get_or_build("k", counting(builds), nullptr), fake_cubin()));
  EXPECT_EQ(builds, 1);  // another NVRTC's entry is not this one's
  EXPECT_TRUE(same(*DiskCache(old_nvrtc).load("k"), fake_cubin("old")));  // and both stay
  // Renamed to this version's name, the old entry fails: the name is authenticated.
  fs::rename(dir / "k-nvrtc12080.cubin", dir / user_entry("k"));
  EXPECT_FALSE(current.load("k").has_value());
}

TEST_F(DiskCacheTest, UntrustedReadOnlyFolderIsIgnored) {
  const fs::path image = root_ / "image";
  DiskCache writer(DiskCacheOptions{image.string(), {}, 0, true});
  ASSERT_TRUE(writer.store("k", fake_cubin()));
  ::chmod(image.c_str(), 0777);
  ::testing::internal::CaptureStderr();
  DiskCache reader(DiskCacheOptions{"", {image.string(), (root_ / "missing").string()}, 0, false});
  EXPECT_FALSE(reader.load("k").has_value());
  EXPECT_FALSE(reader.load("k").has_value());
  const std::string err = ::testing::internal::GetCapturedStderr();
  if (std::getenv("TILEOPS_LOG_LEVEL") == nullptr) {
    EXPECT_EQ(count_in(err, "writable by group or others"), 1u) << err;
    EXPECT_EQ(count_in(err, "is not used"), 2u) << err;
  }
  ::chmod(image.c_str(), 0755);
  if (!chown_to_nobody(image)) return;
  EXPECT_FALSE(DiskCache(DiskCacheOptions{"", {image.string()}, 0, false}).load("k").has_value());
}

TEST(DiskCacheOptionsTest, FromEnvironment) {
  ::setenv("TILEOPS_CACHE_DIR", "/tmp/x", 1);
  ::setenv("TILEOPS_CACHE_DIR_READONLY", "/opt/a::/opt/b/", 1);
  ::setenv("TILEOPS_CACHE_MAX_BYTES", "1048576", 1);
  ::unsetenv("TILEOPS_DISABLE_DISK_CACHE");
  DiskCacheOptions o = cache_options_from_environment();
  EXPECT_EQ(o.dir, "/tmp/x");
  EXPECT_EQ(o.readonly_dirs, (std::vector<std::string>{"/opt/a", "/opt/b/"}));
  EXPECT_EQ(o.max_bytes, 1048576u);
  ::setenv("TILEOPS_CACHE_MAX_BYTES", "1G", 1);
  EXPECT_EQ(cache_options_from_environment().max_bytes, 0u);
  ::setenv("TILEOPS_DISABLE_DISK_CACHE", "1", 1);
  o = cache_options_from_environment();
  EXPECT_TRUE(o.dir.empty());
  EXPECT_TRUE(o.readonly_dirs.empty());
  for (const char* v : {"TILEOPS_CACHE_DIR", "TILEOPS_CACHE_DIR_READONLY", "TILEOPS_CACHE_MAX_BYTES",
                        "TILEOPS_DISABLE_DISK_CACHE"})
    ::unsetenv(v);
}

// Eight processes miss the same entry at once: one NVRTC build, and every process gets the whole,
// verified CUBIN (no torn file is ever read: entries appear by rename only).
TEST_F(DiskCacheTest, EightProcessesRacingOnAColdEntryBuildOnce) {
  const std::string dir = (root_ / "kernels").string();
  const std::string log = (root_ / "builds.txt").string();
  const Cubin expected = real_cubin(32);  // NVRTC loaded before the fork
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < 8; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(go[1]);
      char b;
      (void)!::read(go[0], &b, 1);  // all start together when the parent closes the pipe
      int rc = 1;
      try {
        DiskCache cache(dir);
        Cubin c = cache.get_or_build(disk_key(demo_kernel(32)), [&] {
          Cubin built = compile_to_cubin(demo_kernel(32));
          int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
          (void)!::write(fd, "b\n", 2);
          ::close(fd);
          return built;
        }, nullptr);
        rc = c.image == expected.image && c.lowered_name == expected.lowered_name ? 0 : 3;
      } catch (...) {
      }
      ::_exit(rc);
    }
    children.push_back(pid);
  }
  ::close(go[0]);
  ::close(go[1]);
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  EXPECT_EQ(read_all(log), "b\n");
  std::vector<std::string> names = names_in(dir);
  EXPECT_EQ(names.size(), 2u);  // the key and the entry: no lock, no temp file left
  auto c = DiskCache(dir).load(disk_key(demo_kernel(32)));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->image, expected.image);
}
