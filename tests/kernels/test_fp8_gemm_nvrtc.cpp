// The FP8 GEMM kernel (src/kernels/gemm/fp8_gemm.cuh) compiles with NVRTC to CUBIN for sm_89 and sm_90a
// (no GPU needed) without register spills for every output and bias dtype; the plan sends what it does
// not take to ATen.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/gemm/fp8_gemm.h"
#include "nvrtc_compile_support.h"

namespace {

using tileops::test::strict;
using tileops::test::facts_for;

using tileops::nvrtc::fp8_gemm_plan;

TEST(Fp8GemmPlan, KernelOrAten) {
  const auto h = facts_for("sm_90a", 9, 0);
  const auto s = fp8_gemm_plan({c10::kBFloat16, c10::ScalarType::Undefined, true}, h);
  EXPECT_TRUE(s.kernel());
  EXPECT_EQ(s.bias, c10::kBFloat16);  // no bias: the output's type for the null pointer
  EXPECT_EQ(s.stages, tileops::nvrtc::kFp8GemmStages);
  EXPECT_EQ(fp8_gemm_plan({c10::kHalf, c10::kBFloat16, true}, h).bias, c10::kBFloat16);
  EXPECT_EQ(tileops::nvrtc::fp8_gemm_smem_bytes(4), 4 * (64 + 128) * 128);
  EXPECT_LE(tileops::nvrtc::fp8_gemm_smem_bytes(4), h.max_smem_optin);
  EXPECT_FALSE(fp8_gemm_plan({c10::kHalf, c10::kHalf, false}, h).kernel());  // K % 16, alignment
  EXPECT_FALSE(fp8_gemm_plan({c10::kHalf, c10::kHalf, true}, facts_for("sm_80", 8, 0)).kernel());  // no e4m3 MMA
  EXPECT_TRUE(fp8_gemm_plan({c10::kHalf, c10::kHalf, true}, facts_for("sm_89", 8, 9)).kernel());
  EXPECT_TRUE(fp8_gemm_plan({c10::kHalf, c10::kHalf, false}, h).sources().empty());
  const auto per_tensor = fp8_gemm_plan({c10::kHalf, c10::kHalf, true, true}, h);  // cuBLASLt's
  EXPECT_TRUE(per_tensor.declined);
  EXPECT_FALSE(per_tensor.kernel());
  EXPECT_TRUE(per_tensor.sources().empty());
}

TEST(Fp8GemmCompiles, EveryDtypeToCubinWithoutSpills) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  std::set<std::string> names;
  for (const auto& f : {facts_for("sm_89", 8, 9), facts_for("sm_90a", 9, 0)})
    for (c10::ScalarType out : {c10::kBFloat16, c10::kHalf})
      for (c10::ScalarType bias : {c10::ScalarType::Undefined, c10::kBFloat16, c10::kHalf}) {
        const auto sources = fp8_gemm_plan({out, bias, true}, f).sources();
        ASSERT_EQ(sources.size(), 1u);
        if (!names.insert(sources[0].name).second) continue;
        const auto cubin = tileops::jit::compile_to_cubin(strict(sources[0]));
        ASSERT_GT(cubin.image.size(), 4u) << sources[0].name;
        EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF")) << sources[0].name;
      }
  EXPECT_EQ(names.size(), 8u);  // 2 archs x 2 outputs x 2 bias types (none reads as the output's)
}

}  // namespace
