// The device-read MoE grouped GEMM and gate-up (src/kernels/moe/moe_grouped_gemm.cuh) compile with
// NVRTC to CUBIN for sm_80 and sm_90a (no GPU needed) without register spills for both dtypes and both
// gates, and the shared memory fits the opt-in limit; the plan declines what it does not take.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/moe/moe_grouped_gemm.h"
#include "nvrtc_compile_support.h"

namespace {

using tileops::test::strict;
using tileops::test::facts_for;

using tileops::nvrtc::moe_gemm_plan;
using tileops::nvrtc::moe_gemm_shape_ok;

TEST(MoeGemmPlan, KernelOrDeclined) {
  const auto h = facts_for("sm_90a", 9, 0);
  EXPECT_TRUE(moe_gemm_shape_ok(7168, 256, true));
  EXPECT_TRUE(moe_gemm_shape_ok(8, 1024, true));
  EXPECT_FALSE(moe_gemm_shape_ok(7164, 256, true));  // K % 8: rows of 16-byte copies
  EXPECT_FALSE(moe_gemm_shape_ok(7168, 1025, true));  // the scan's four experts a thread
  EXPECT_FALSE(moe_gemm_shape_ok(7168, 256, false));
  EXPECT_EQ(moe_gemm_plan({c10::kBFloat16, true}, h).stages, tileops::nvrtc::kMoeGemmStages);
  EXPECT_LE(tileops::nvrtc::moe_gemm_smem_bytes(tileops::nvrtc::kMoeGemmStages), h.max_smem_optin);
  EXPECT_FALSE(moe_gemm_plan({c10::kHalf, false}, h).kernel());
  EXPECT_TRUE(moe_gemm_plan({c10::kHalf, false}, h).sources().empty());
  EXPECT_FALSE(moe_gemm_plan({c10::kHalf, true}, facts_for("sm_75", 7, 5)).kernel());  // no cp.async / bf16 MMA
  // prefill-sized calls outside a capture go to cuBLASLt; the spec a capture gets is decode's
  const int64_t bound = tileops::nvrtc::kMoeGemmMaxRowsPerExpert;
  EXPECT_TRUE(moe_gemm_plan({c10::kBFloat16, true, tileops::kActSilu, bound}, h).kernel());
  EXPECT_FALSE(moe_gemm_plan({c10::kBFloat16, true, tileops::kActSilu, 2 * bound}, h).kernel());
  EXPECT_EQ(moe_gemm_plan({c10::kBFloat16, true, tileops::kActSilu, 2 * bound, true}, h),
            moe_gemm_plan({c10::kBFloat16, true, tileops::kActSilu}, h));
  tileops::nvrtc::Tuning wide;  // the sweep's key lets the one launch take every size
  wide.moe_max_rows_per_expert = 1 << 20;
  EXPECT_TRUE(moe_gemm_plan({c10::kBFloat16, true, tileops::kActSilu, 1024}, h, wide).kernel());
}

TEST(MoeGemmCompiles, BothDtypesAndGatesToCubinWithoutSpills) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  std::set<std::string> names;
  for (const auto& f : {facts_for("sm_80", 8, 0), facts_for("sm_90a", 9, 0)})
    for (c10::ScalarType dtype : {c10::kBFloat16, c10::kHalf})
      for (int act : {tileops::nvrtc::kMoeNoAct, int(tileops::kActSilu), int(tileops::kActGelu)}) {
        const auto sources = moe_gemm_plan({dtype, true, act}, f).sources();
        ASSERT_EQ(sources.size(), 1u);
        names.insert(sources[0].name);
        const auto cubin = tileops::jit::compile_to_cubin(strict(sources[0]));
        EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF")) << sources[0].name;
      }
  EXPECT_EQ(names.size(), 12u);
}

TEST(MoeGemmPlan, GateUpTilesHalfTheOutputColumns) {
  const auto h = facts_for("sm_90a", 9, 0);
  EXPECT_EQ(moe_gemm_plan({c10::kBFloat16, true}, h).out_cols(), 128);
  const auto silu = moe_gemm_plan({c10::kBFloat16, true, tileops::kActSilu}, h);
  EXPECT_EQ(silu.out_cols(), 64);  // 128 rows of b: a gate and an up row an output column
  EXPECT_NE(silu.sources()[0].name, moe_gemm_plan({c10::kBFloat16, true, tileops::kActGelu}, h).sources()[0].name);
}

}  // namespace
