#include "jit/nvrtc_compiler.h"

#include <gtest/gtest.h>

#include "jit/cuda_driver.h"
#include "jit/jit_error.h"

using namespace tileops::jit;

// gmock is not always installed; a substring check with the whole text on failure is enough.
#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

namespace {

constexpr const char* kKernel = R"(#include "demo_util.cuh"
namespace demo {
template <typename T, int N>
__global__ void scale(T* x, T a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) x[i] = twice(x[i]) * a;
}
}  // namespace demo
)";

KernelSource make_source(const std::string& expr, const std::string& arch) {
  KernelSource s;
  s.name = "demo_scale__" + arch;
  s.source = kKernel;
  s.headers = {{"demo_util.cuh", "template <typename T> __device__ T twice(T v) { return v + v; }\n"}};
  s.name_expression = expr;
  s.options = {"-DDEMO=1"};
  s.arch = arch;
  return s;
}

class NvrtcCompiler : public ::testing::Test {
 protected:
  // Not linked to torch: point the loader at the torch wheel's copy of libnvrtc.
  void SetUp() override { add_library_search_dir(TILEOPS_NVRTC_HINT_DIR); }
};

bool is_elf(const std::string& image) { return image.size() > 4 && image.compare(0, 4, "\x7f" "ELF") == 0; }

}  // namespace

TEST_F(NvrtcCompiler, VersionIsPlausible) {
  int v = nvrtc_version();
  EXPECT_GE(v, 11000);
  EXPECT_EQ(v % 10, 0);
}

TEST_F(NvrtcCompiler, CompilesCubinForSm80AndSm90a) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    Cubin f = compile_to_cubin(make_source("demo::scale<float, 128>", arch));
    Cubin i = compile_to_cubin(make_source("demo::scale<int, 64>", arch));
    EXPECT_TRUE(is_elf(f.image)) << arch;
    EXPECT_TRUE(is_elf(i.image)) << arch;
    EXPECT_FALSE(f.lowered_name.empty());
    EXPECT_NE(f.lowered_name, i.lowered_name);
    EXPECT_CONTAINS(f.lowered_name, "scale");
  }
}

TEST_F(NvrtcCompiler, SyntaxErrorReportsEverything) {
  KernelSource s;
  s.name = "broken_kernel__f32";
  s.source = "template <int N>\n__global__ void broken(float* x) {\n  x[0] = N  // missing semicolon\n}\n";
  s.name_expression = "broken<4>";
  s.options = {"-DFOO=1"};
  s.arch = "sm_80";
  try {
    compile_to_cubin(s);
    FAIL() << "expected a JitError";
  } catch (const JitError& e) {
    std::string what = e.what();
    EXPECT_CONTAINS(what, "broken_kernel__f32");
    EXPECT_CONTAINS(what, "--gpu-architecture=sm_80 -std=c++17 -DFOO=1");
    EXPECT_CONTAINS(what, "broken_kernel__f32.cu(4): error");  // NVRTC's own diagnostic
    EXPECT_CONTAINS(what, "   3 |   x[0] = N  // missing semicolon");
  }
}

TEST_F(NvrtcCompiler, UnknownNameExpressionFails) {
  EXPECT_THROW(compile_to_cubin(make_source("demo::nope<float>", "sm_80")), JitError);
}

TEST_F(NvrtcCompiler, DiskKeyTracksEveryInput) {
  const KernelSource base = make_source("demo::scale<float, 128>", "sm_90a");
  const std::string key = disk_key(base);
  EXPECT_EQ(key, disk_key(base));
  ASSERT_EQ(key.size(), base.name.size() + 1 + 16);
  EXPECT_EQ(key.rfind(base.name + "-", 0), 0u);

  auto differs = [&](auto edit) {
    KernelSource s = base;
    edit(s);
    return disk_key(s) != key;
  };
  EXPECT_TRUE(differs([](KernelSource& s) { s.source += " "; }));
  EXPECT_TRUE(differs([](KernelSource& s) { s.options.push_back("-DX=2"); }));
  EXPECT_TRUE(differs([](KernelSource& s) { s.options[0] = "-DDEMO=2"; }));
  EXPECT_TRUE(differs([](KernelSource& s) { s.arch = "sm_80"; }));
  EXPECT_TRUE(differs([](KernelSource& s) { s.headers[0].second += " "; }));
  EXPECT_TRUE(differs([](KernelSource& s) { s.headers[0].first = "other.cuh"; }));
  EXPECT_TRUE(differs([](KernelSource& s) { s.name_expression = "demo::scale<float, 256>"; }));
  EXPECT_FALSE(differs([](KernelSource& s) { s.name = s.name; }));
  // A known digest of the headers gives the same key as hashing them (the build path passes one).
  EXPECT_FALSE(differs([](KernelSource& s) { s.headers_digest = headers_digest(s.headers); }));
  EXPECT_TRUE(differs([](KernelSource& s) { s.headers_digest = headers_digest(s.headers) + 1; }));
}

TEST_F(NvrtcCompiler, DiskKeyIsAFileName) {
  KernelSource s = make_source("demo::scale<float, 128>", "sm_80");
  s.name = "../evil/name with spaces";
  std::string key = disk_key(s);
  EXPECT_EQ(key.find('/'), std::string::npos);
  EXPECT_EQ(key.find(' '), std::string::npos);
}
