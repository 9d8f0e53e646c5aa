#include "jit/kernel_record.h"

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "jit/cuda_driver.h"
#include "jit/disk_cache.h"
#include "jit/jit_error.h"
#include "jit/warmup.h"

using namespace tileops::jit;
namespace fs = std::filesystem;

namespace {

// Stands in for the library's embedded kernel sources.
const HeaderFiles kHeaders = {
    {"demo/common.cuh", "template <int N> __device__ float scaled(float v) { return v * N; }\n"},
    {"demo/fill.cuh", "#include \"demo/common.cuh\"\n"
                      "template <int N> __global__ void fill(float* x) { x[threadIdx.x] = scaled<N>(1.f); }\n"},
};

// The way the library's builders make a KernelSource: an include of one header, every header given.
KernelSource demo_source(int n, const std::string& arch) {
  KernelSource s;
  s.name = "demo_fill__n" + std::to_string(n) + "__" + arch;
  s.source = "#include \"demo/fill.cuh\"\n";
  s.headers = kHeaders;
  s.name_expression = "fill<" + std::to_string(n) + ">";
  s.options = {"-DDEMO=1"};
  s.arch = arch;
  return s;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class KernelRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tileops-record-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

}  // namespace

TEST_F(KernelRecordTest, LineRegeneratesTheExactSource) {
  KernelSource src = demo_source(4, "sm_90a");
  src.options = {"-DA=1 2", "-DB=x,y", "-DC=%20=\n"};  // spaces, commas, '%', '=', a newline
  src.name_expression = "tileops::f<tileops::bf16, 4096, true>";
  const std::string line = record_line(src);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.find("template"), std::string::npos) << "header contents must not be stored";
  const KernelSource back = source_from_record(parse_record_line(line), kHeaders);
  EXPECT_EQ(back.name, src.name);
  EXPECT_EQ(back.source, src.source);
  EXPECT_EQ(back.headers, src.headers);
  EXPECT_EQ(back.name_expression, src.name_expression);
  EXPECT_EQ(back.options, src.options);
  EXPECT_EQ(back.arch, src.arch);
  EXPECT_EQ(disk_key(back), disk_key(src));
}

TEST_F(KernelRecordTest, BadLinesAndOtherSourcesAreRefused) {
  const std::string good = record_line(demo_source(4, "sm_80"));
  auto error_of = [](const std::string& line) {
    try {
      source_from_record(parse_record_line(line), kHeaders);
    } catch (const JitError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("hello").find("not a kernel record"), std::string::npos);
  EXPECT_NE(error_of(good + " extra=1").find("unknown field 'extra'"), std::string::npos);
  EXPECT_NE(error_of(good + " arch=sm_90a").find("appears twice"), std::string::npos);
  EXPECT_NE(error_of(good.substr(0, good.find(" options="))).find("'options' is missing"), std::string::npos);
  std::string bad_escape = good;
  bad_escape.replace(bad_escape.find("name=") + 5, 0, "%Z");
  EXPECT_NE(error_of(bad_escape).find("bad %-escape"), std::string::npos);

  HeaderFiles changed = kHeaders;
  changed[0].second += "// edited\n";
  try {
    source_from_record(parse_record_line(good), changed);
    ADD_FAILURE() << "a record of other kernel sources was accepted";
  } catch (const JitError& e) {
    EXPECT_NE(std::string(e.what()).find("other kernel sources"), std::string::npos) << e.what();
  }
  try {
    source_from_record(parse_record_line(good), {kHeaders[1]});
    ADD_FAILURE() << "a record naming a missing header was accepted";
  } catch (const JitError& e) {
    EXPECT_NE(std::string(e.what()).find("needs header demo/common.cuh"), std::string::npos) << e.what();
  }
}

TEST_F(KernelRecordTest, RecordAppendsEachKernelOnceAndFollowsNoLink) {
  const fs::path rec = root_ / "kernels.rec";
  record_kernel_to(rec.string(), demo_source(4, "sm_80"));
  record_kernel_to(rec.string(), demo_source(4, "sm_80"));
  record_kernel_to(rec.string(), demo_source(8, "sm_80"));
  EXPECT_EQ(read_all(rec), record_line(demo_source(4, "sm_80")) + "\n" + record_line(demo_source(8, "sm_80")) + "\n");
  const fs::path link = root_ / "planted.rec";
  fs::create_symlink(root_ / "target", link);
  record_kernel_to(link.string(), demo_source(4, "sm_80"));
  EXPECT_FALSE(fs::exists(root_ / "target"));
}

// Record -> replay into an image folder with NVRTC only -> a fresh process whose environment
// names the folder read-only finds every kernel: disk hits, no compile.
TEST_F(KernelRecordTest, ReplayedImageGivesAFreshProcessEveryKernelWithoutCompiling) {
  const fs::path rec = root_ / "kernels.rec", image = root_ / "image";
  const std::vector<KernelSource> ran = {demo_source(4, "sm_90a"), demo_source(8, "sm_90a"), demo_source(4, "sm_80")};
  for (const auto& s : ran) record_kernel_to(rec.string(), s);
  std::ofstream(rec, std::ios::app) << record_line(ran[0]) << "\n";  // another process ran it too: one build
  const auto sources = sources_from_record(rec.string(), kHeaders, {});
  ASSERT_EQ(sources.size(), 3u);
  DiskCache writer(DiskCacheOptions{image.string(), {}, 0, true});
  WarmupResult first = warm(sources, writer, 2);
  EXPECT_TRUE(first.errors.empty()) << first.errors[0];
  EXPECT_EQ(first.compiled, 3u);
  WarmupResult again = warm(sources, writer, 2);
  EXPECT_EQ(again.compiled, 0u);
  EXPECT_EQ(again.present, 3u);

  EXPECT_EQ(sources_from_record(rec.string(), kHeaders, {"sm_80"}).size(), 1u);
  try {
    sources_from_record(rec.string(), kHeaders, {"sm_75"});
    ADD_FAILURE() << "an arch without recorded kernels was accepted";
  } catch (const JitError& e) {
    EXPECT_NE(std::string(e.what()).find("no kernel was recorded for sm_75 (recorded: sm_80, sm_90a)"),
              std::string::npos) << e.what();
  }

  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("TILEOPS_CACHE_DIR", (root_ / "user").c_str(), 1);
    ::setenv("TILEOPS_CACHE_DIR_READONLY", image.c_str(), 1);
    ::unsetenv("TILEOPS_DISABLE_DISK_CACHE");
    DiskCache cache(cache_options_from_environment());
    int builds = 0, hits = 0;
    for (const auto& s : ran) {
      bool built = false;
      Cubin c = cache.get_or_build(disk_key(s), [&] { return compile_to_cubin(s); }, &built);
      builds += built;
      hits += !built && c.image.size() > 4 && c.image.compare(0, 4, "\x7f" "ELF") == 0;
    }
    ::_exit(builds == 0 && hits == 3 && !fs::exists(root_ / "user" / (disk_key(ran[0]) + ".cubin")) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST_F(KernelRecordTest, RecordFileErrorsNameTheLine) {
  const fs::path rec = root_ / "kernels.rec";
  std::ofstream(rec) << record_line(demo_source(4, "sm_80")) << "\n# a comment\n\nnot a record\n";
  try {
    sources_from_record(rec.string(), kHeaders, {});
    ADD_FAILURE();
  } catch (const JitError& e) {
    EXPECT_NE(std::string(e.what()).find("kernels.rec:4: not a kernel record"), std::string::npos) << e.what();
  }
}
