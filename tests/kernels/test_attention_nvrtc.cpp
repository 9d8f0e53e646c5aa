// The decode attention kernels (src/kernels/attention/decode.cuh, decode_mma.cuh) compile with NVRTC to CUBIN for
// sm_80 and sm_90a (no GPU needed) without register spills in every shape the plan takes for the
// manifests' head dims and groups, contiguous and paged; and the plan and the split count are pure
// functions of the problem and the device.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/attention/decode.h"
#include "targets/nvrtc/device_facts.h"
#include "nvrtc_compile_support.h"

namespace {

using tileops::test::strict;
using tileops::test::facts_for;

using tileops::nvrtc::DecodeFamily;
using tileops::nvrtc::DecodeOp;
using tileops::nvrtc::DecodeProblem;
using tileops::nvrtc::DecodeSpec;

DecodeSpec plan(const DecodeProblem& q, const char* arch = "sm_90a") {
  return DecodeFamily<DecodeOp::kGqa>{}.plan(q, facts_for(arch), tileops::nvrtc::tuning());
}

TEST(DecodePlan, TensorCoresForHalfHeadsOf64To256) {
  for (c10::ScalarType dtype : {c10::kHalf, c10::kBFloat16})
    for (int64_t dim : {64, 128, 256})
      for (int64_t group : {1, 4, 8, 16, 32}) {
        const DecodeSpec s = plan({dtype, dim, 8, group, group == 8});
        EXPECT_TRUE(s.mma()) << dim;
        EXPECT_EQ(s.dim, dim);
        EXPECT_EQ(s.g, 16);  // one m16 tile of query rows
        EXPECT_EQ(s.stages, 3);
        EXPECT_EQ(s.paged, group == 8);
        EXPECT_LE(tileops::nvrtc::decode_mma_smem_bytes(s.dim, s.stages), facts_for("sm_90a").max_smem_optin);
      }
  // An A100 opts into 163 KB a block: D = 256 keeps two stages (139 KB), not three (200 KB).
  tileops::nvrtc::DeviceFacts a100 = tileops::nvrtc::named_device_facts("a100");
  const DecodeSpec s = DecodeFamily<DecodeOp::kGqa>{}.plan({c10::kHalf, 256, 8, 8, false}, a100, tileops::nvrtc::tuning());
  EXPECT_TRUE(s.mma());
  EXPECT_EQ(s.stages, 2);
  EXPECT_EQ(tileops::nvrtc::decode_mma_smem_bytes(256, 2), 139264);
  EXPECT_EQ(tileops::nvrtc::decode_mma_smem_bytes(128, 3), 102400);  // two CTAs an SM on Hopper
  // CUDA cores for the rest: float32, narrower accesses, other head dims, GPUs before sm_80.
  EXPECT_FALSE(plan({c10::kFloat, 128, 4, 8, false}).mma());
  EXPECT_FALSE(plan({c10::kHalf, 128, 4, 8, false}).mma());
  EXPECT_FALSE(plan({c10::kHalf, 96, 8, 8, false}).mma());
  EXPECT_FALSE(plan({c10::kHalf, 512, 8, 8, false}).mma());
  tileops::nvrtc::DeviceFacts turing = facts_for("sm_75");
  turing.cc_major = 7, turing.cc_minor = 5;
  EXPECT_FALSE(DecodeFamily<DecodeOp::kGqa>{}.plan({c10::kHalf, 128, 8, 8, false}, turing, tileops::nvrtc::tuning()).mma());
}

TEST(DecodePlan, CudaCoreLanesCoverTheHeadAndRowsFitTheRegisters) {
  struct Case { c10::ScalarType dtype; int64_t dim; int vec; int64_t group; int lanes, nv, g; };
  for (const Case c : {Case{c10::kFloat, 128, 4, 4, 32, 1, 4}, Case{c10::kFloat, 128, 4, 8, 32, 1, 8},
                       Case{c10::kFloat, 128, 4, 16, 32, 1, 8}, Case{c10::kFloat, 64, 4, 1, 16, 1, 1},
                       Case{c10::kFloat, 256, 4, 8, 32, 2, 8}, Case{c10::kHalf, 512, 8, 16, 32, 2, 4},
                       Case{c10::kHalf, 96, 8, 3, 16, 1, 4}, Case{c10::kHalf, 80, 2, 5, 32, 2, 8},
                       Case{c10::kHalf, 1, 1, 1, 1, 1, 1}}) {
    const DecodeSpec s = plan({c.dtype, c.dim, c.vec, c.group, false});
    EXPECT_FALSE(s.mma());
    EXPECT_EQ(s.lanes, c.lanes) << c.dim;
    EXPECT_EQ(s.nv, c.nv) << c.dim;
    EXPECT_EQ(s.g, c.g) << c.dim << " " << c.group;
    EXPECT_GE(static_cast<int64_t>(s.lanes) * s.nv * s.vec, c.dim);  // every dim has a lane
    EXPECT_LE(s.g * s.nv * s.vec, 64);
    EXPECT_EQ(s, plan({c.dtype, c.dim, c.vec, c.group, false}));
  }
}

TEST(DecodePlan, SplitsFillOneWaveWithoutSplitsShorterThan128Tokens) {
  // 264 slots: 132 SMs x 2 CTAs (decode_mma_fwd at D = 128)
  EXPECT_EQ(tileops::nvrtc::decode_splits(4, 262144, 264), 66);   // bs1 GQA 32/4: 4 CTAs
  EXPECT_EQ(tileops::nvrtc::decode_splits(4, 1024, 264), 8);      // ... over 1024 tokens: 128 each
  EXPECT_EQ(tileops::nvrtc::decode_splits(128, 4096, 264), 2);    // 16 requests x 8 KV heads: not 3 (1.5 waves)
  EXPECT_EQ(tileops::nvrtc::decode_splits(256, 4096, 264), 1);    // 32 requests x 8 KV heads: one wave already
  EXPECT_EQ(tileops::nvrtc::decode_splits(4, 200, 264), 1);       // too short to split
  EXPECT_EQ(tileops::nvrtc::decode_splits(1, int64_t{1} << 30, 264), 128);  // at most 128
  EXPECT_EQ(tileops::nvrtc::decode_splits(1000, 1 << 20, 264), 1);  // more than a wave already
  EXPECT_EQ(tileops::nvrtc::decode_splits(4, 0, 264), 1);         // an empty cache
}

class DecodeCompiles : public ::testing::TestWithParam<std::tuple<c10::ScalarType, const char*>> {};

TEST_P(DecodeCompiles, EveryManifestShapeToCubinWithoutSpills) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto& [dtype, arch] = GetParam();
  std::set<std::string> names;
  // Head dims 64, 128, 256 (tensor cores), 96 and an odd 80 with 4-byte accesses (CUDA cores);
  // groups of the workloads (MHA 1, GQA 4, 8, 16) and a 3; contiguous and paged.
  for (const auto& [dim, vec] : {std::pair<int64_t, int>{64, 8}, {128, 8}, {256, 8}, {96, 8}, {80, 2}})
    for (int64_t group : {1, 3, 4, 8, 16})
      for (bool paged : {false, true}) {
        const auto sources = plan({dtype, dim, vec, group, paged}, arch).sources();
        ASSERT_EQ(sources.size(), 2u);
        for (const auto& src : sources) {
          if (!names.insert(src.name).second) continue;
          const auto cubin = tileops::jit::compile_to_cubin(strict(src));
          ASSERT_GT(cubin.image.size(), 4u) << src.name;
          EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF")) << src.name;
          EXPECT_NE(src.name.find(arch), std::string::npos);
        }
      }
  // 6 decode_mma_fwd (3 dims, paged or not: the group is a call's), 12 decode_fwd (2 dims x rows
  // 1/4/8 x paged or not), one decode_merge
  EXPECT_EQ(names.size(), 19u);
}

INSTANTIATE_TEST_SUITE_P(All, DecodeCompiles,
                         ::testing::Combine(::testing::Values(c10::kHalf, c10::kBFloat16),
                                            ::testing::Values("sm_80", "sm_90a")),
                         [](const auto& info) {
                           return std::string(tileops::nvrtc::short_type_name(std::get<0>(info.param))) + "_" +
                                  std::get<1>(info.param);
                         });

}  // namespace
