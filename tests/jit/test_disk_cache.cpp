#include "jit/disk_cache.h"

#include <fcntl.h>
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
#include <vector>

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

}  // namespace

TEST_F(DiskCacheTest, StoreLoadRoundTripCreatesFolders) {
  DiskCache cache((root_ / "a/b/kernels").string());
  EXPECT_FALSE(cache.load("k-0123").has_value());
  ASSERT_TRUE(cache.store("k-0123", fake_cubin()));
  EXPECT_TRUE(fs::is_regular_file(root_ / "a/b/kernels/k-0123.cubin"));
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
  const fs::path file = root_ / "k.cubin";
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
