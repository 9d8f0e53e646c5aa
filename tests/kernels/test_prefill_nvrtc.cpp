// The attention forward over whole sequences (src/kernels/attention/prefill.cuh) compiles with NVRTC
// to CUBIN for sm_80 and sm_90a (no GPU needed) without register spills for both dtypes, both head
// dims and both layouts (fixed-length and packed requests); its shared memory fits the opt-in limit; the plan declines what it does not take.
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

}  // namespace
