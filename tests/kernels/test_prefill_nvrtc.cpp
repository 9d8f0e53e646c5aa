// The attention forward over whole sequences (src/kernels/attention/prefill.cuh) compiles with NVRTC
// to CUBIN for sm_80 and sm_90a (no GPU needed) without register spills for both dtypes, both head
// dims and the layouts (fixed-length, packed, and packed over a paged cache read as it is, through a
// scale or from float8_e4m3fn, with the append and RoPE kernels); its shared memory fits the opt-in
// limit; the plan declines what it does not take.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/attention/prefill.h"
#include "nvrtc_compile_support.h"

namespace {

using tileops::nvrtc::prefill_plan;
using tileops::test::facts_for;
using tileops::test::strict;

TEST(PrefillPlan, KernelOrDeclined) {
  const auto h = facts_for("sm_90a", 9, 0);
  EXPECT_EQ(prefill_plan({c10::kBFloat16, 128, true, true}, h).stages, 2);
  EXPECT_EQ(prefill_plan({c10::kHalf, 64, false, true}, h).stages, 3);
  for (int dim : {64, 128}) {
    const auto s = prefill_plan({c10::kHalf, dim, true, true}, h);
    EXPECT_LE(tileops::nvrtc::prefill_smem_bytes(dim, s.stages), facts_for("sm_80", 8, 0).max_smem_optin);
  }
  EXPECT_FALSE(prefill_plan({c10::kBFloat16, 96, true, true}, h).kernel());    // D: 64 or 128
  EXPECT_FALSE(prefill_plan({c10::kBFloat16, 256, true, true}, h).kernel());
  EXPECT_FALSE(prefill_plan({c10::kBFloat16, 128, true, false}, h).kernel());  // unaligned, FP8 scales, o's dtype
  EXPECT_FALSE(prefill_plan({c10::kFloat, 128, true, true}, h).kernel());
  EXPECT_FALSE(prefill_plan({c10::kHalf, 128, true, true}, facts_for("sm_75", 7, 5)).kernel());  // no cp.async
  EXPECT_TRUE(prefill_plan({c10::kHalf, 96, true, true}, h).sources().empty());
  // a paged call: the attention and the append kernel (+ the rotation), a spec of its own per mode
  using tileops::nvrtc::kPagedDirect;
  using tileops::nvrtc::kPagedFp8;
  const auto paged = prefill_plan({c10::kBFloat16, 128, true, true, kPagedDirect}, h);
  ASSERT_EQ(paged.sources().size(), 2u);
  EXPECT_NE(paged.sources()[0].name, prefill_plan({c10::kBFloat16, 128, true, true}, h).sources()[0].name);
  EXPECT_NE(paged.sources()[1].name.find("attention_paged_append"), std::string::npos);
  const auto fp8_rope = prefill_plan({c10::kBFloat16, 128, true, true, kPagedFp8, true}, h).sources();
  ASSERT_EQ(fp8_rope.size(), 3u);
  EXPECT_NE(fp8_rope[0].name.find("__paged_fp8"), std::string::npos);
  EXPECT_NE(fp8_rope[2].name.find("attention_paged_rope"), std::string::npos);
  EXPECT_FALSE(prefill_plan({c10::kBFloat16, 128, true, false, kPagedDirect}, h).kernel());  // a cache of another dtype
}

TEST(PrefillCompiles, BothDtypesDimsAndLayoutsToCubinWithoutSpills) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  std::set<std::string> names;
  for (const auto& f : {facts_for("sm_80", 8, 0), facts_for("sm_90a", 9, 0)})
    for (c10::ScalarType dtype : {c10::kBFloat16, c10::kHalf})
      for (int dim : {64, 128})
        for (bool varlen : {false, true}) {
          const auto sources = prefill_plan({dtype, dim, varlen, true}, f).sources();
          ASSERT_EQ(sources.size(), 1u);
          names.insert(sources[0].name);
          const auto cubin = tileops::jit::compile_to_cubin(strict(sources[0]));
          EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF")) << sources[0].name;
        }
  EXPECT_EQ(names.size(), 16u);
}

// The paged modes, one test each (the shards run them side by side): attention, append and rotation.
void compile_paged(int mode) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  std::set<std::string> names;
  for (const auto& f : {facts_for("sm_80", 8, 0), facts_for("sm_90a", 9, 0)})
    for (c10::ScalarType dtype : {c10::kBFloat16, c10::kHalf})
      for (int dim : {64, 128}) {
        const auto sources = prefill_plan({dtype, dim, true, true, mode, true}, f).sources();
        ASSERT_EQ(sources.size(), 3u);
        for (const auto& s : sources) {
          names.insert(s.name);
          const auto cubin = tileops::jit::compile_to_cubin(strict(s));
          EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF")) << s.name;
        }
      }
  EXPECT_EQ(names.size(), 24u);  // 2 archs x 2 dtypes x 2 dims x (attention, append, rotation)
}
TEST(PrefillCompiles, PagedCacheAsItIsWithoutSpills) { compile_paged(tileops::nvrtc::kPagedDirect); }
TEST(PrefillCompiles, PagedCacheThroughAScaleWithoutSpills) { compile_paged(tileops::nvrtc::kPagedScaled); }
TEST(PrefillCompiles, PagedFp8CacheWithoutSpills) { compile_paged(tileops::nvrtc::kPagedFp8); }

}  // namespace
