// The MLA decode kernel (src/kernels/attention/decode_mla.cuh) compiles with NVRTC to CUBIN for sm_80 and
// sm_90a (no GPU needed) without register spills for DeepSeek's dims and the others its plan takes; the
// plan leaves the rest to ATen and keeps its shared memory within the device's.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/attention/mla_decode.h"
#include "targets/nvrtc/device_facts.h"
#include "nvrtc_compile_support.h"

namespace {

using tileops::test::strict;
using tileops::test::facts_for;

using tileops::nvrtc::mla_decode_plan;
using tileops::nvrtc::MlaDecodeSpec;

TEST(MlaDecodePlan, TensorCoresForWholeTilesElseAten) {
  for (c10::ScalarType dtype : {c10::kHalf, c10::kBFloat16}) {
    const MlaDecodeSpec s = mla_decode_plan({dtype, 128, 64, true}, facts_for("sm_90a"));  // TileOPs' workloads
    EXPECT_TRUE(s.kernel());
    EXPECT_EQ(s.stages, 3);
    EXPECT_EQ(s.sources().size(), 2u);
  }
  EXPECT_EQ(tileops::nvrtc::mla_decode_smem_bytes(128, 64, 3), (16 + 4 * 3 * 16) * 192 * 2);
  EXPECT_EQ(tileops::nvrtc::mla_decode_smem_bytes(64, 0, 2), (16 + 4 * 2 * 16) * 64 * 2);  // > the states' 16.5 KB
  EXPECT_TRUE(mla_decode_plan({c10::kHalf, 64, 0, true}, facts_for("sm_90a")).kernel());
  EXPECT_TRUE(mla_decode_plan({c10::kHalf, 256, 64, true}, facts_for("sm_90a")).kernel());
  // ATen: float32, DeepSeek's real 512-dim latent (its accumulators would not fit), dims the swizzle
  // cannot tile, unaligned tensors, GPUs before sm_80.
  EXPECT_FALSE(mla_decode_plan({c10::kFloat, 128, 64, true}, facts_for("sm_90a")).kernel());
  EXPECT_FALSE(mla_decode_plan({c10::kHalf, 512, 64, true}, facts_for("sm_90a")).kernel());
  EXPECT_FALSE(mla_decode_plan({c10::kHalf, 128, 32, true}, facts_for("sm_90a")).kernel());
  EXPECT_FALSE(mla_decode_plan({c10::kHalf, 120, 8, true}, facts_for("sm_90a")).kernel());
  EXPECT_FALSE(mla_decode_plan({c10::kHalf, 128, 64, false}, facts_for("sm_90a")).kernel());
  tileops::nvrtc::DeviceFacts turing = facts_for("sm_75");
  turing.cc_major = 7, turing.cc_minor = 5;
  EXPECT_FALSE(mla_decode_plan({c10::kHalf, 128, 64, true}, turing).kernel());
  EXPECT_TRUE(mla_decode_plan({c10::kHalf, 0, 64, true}, facts_for("sm_90a")).sources().empty());
  // An A100 opts into 163 KB a block: D + PE = 320 keeps two stages.
  const auto a100 = mla_decode_plan({c10::kHalf, 256, 64, true}, tileops::nvrtc::named_device_facts("a100"));
  EXPECT_TRUE(a100.kernel());
  EXPECT_LE(tileops::nvrtc::mla_decode_smem_bytes(256, 64, a100.stages),
            tileops::nvrtc::named_device_facts("a100").max_smem_optin);
}

TEST(MlaDecodeCompiles, DeepSeekAndOtherDimsToCubinWithoutSpills) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  std::set<std::string> names;
  for (const char* arch : {"sm_80", "sm_90a"})
    for (c10::ScalarType dtype : {c10::kHalf, c10::kBFloat16})
      for (const auto& [d, pe] : {std::pair<int64_t, int64_t>{128, 64}, {64, 0}, {256, 64}}) {
        for (const auto& src : mla_decode_plan({dtype, d, pe, true}, facts_for(arch)).sources()) {
          if (!names.insert(src.name).second) continue;
          const auto cubin = tileops::jit::compile_to_cubin(strict(src));
          ASSERT_GT(cubin.image.size(), 4u) << src.name;
          EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF")) << src.name;
        }
      }
  EXPECT_EQ(names.size(), 16u);  // 12 mla_decode_fwd, 4 decode_merge
}

}  // namespace
