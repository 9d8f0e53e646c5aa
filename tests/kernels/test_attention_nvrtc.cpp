// The decode attention kernels (src/kernels/attention/decode.cuh) compile with NVRTC to CUBIN for
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

namespace {

using tileops::nvrtc::DecodeFamily;
using tileops::nvrtc::DecodeOp;
using tileops::nvrtc::DecodeProblem;
using tileops::nvrtc::DecodeSpec;

tileops::nvrtc::DeviceFacts facts_for(const char* arch) {
  tileops::nvrtc::DeviceFacts f = tileops::nvrtc::named_device_facts("h200");
  f.arch = arch;
  return f;
}

DecodeSpec plan(const DecodeProblem& q, const char* arch = "sm_90a") {
  return DecodeFamily<DecodeOp::kGqa>{}.plan(q, facts_for(arch), tileops::nvrtc::tuning());
}

TEST(DecodePlan, LanesCoverTheHeadAndRowsFitTheRegisters) {
  struct Case { int64_t dim; int vec; int64_t group; int lanes, nv, g; };
  for (const Case c : {Case{128, 8, 4, 16, 1, 4}, Case{128, 8, 8, 16, 1, 8}, Case{128, 8, 16, 16, 1, 8},
                       Case{64, 8, 1, 8, 1, 1}, Case{256, 8, 8, 32, 1, 8}, Case{512, 8, 16, 32, 2, 4},
                       Case{96, 8, 3, 16, 1, 4}, Case{80, 2, 5, 32, 2, 8}, Case{1, 1, 1, 1, 1, 1}}) {
    const DecodeSpec s = plan({c10::kHalf, c.dim, c.vec, c.group, false});
    EXPECT_EQ(s.lanes, c.lanes) << c.dim;
    EXPECT_EQ(s.nv, c.nv) << c.dim;
    EXPECT_EQ(s.g, c.g) << c.dim << " " << c.group;
    EXPECT_GE(static_cast<int64_t>(s.lanes) * s.nv * s.vec, c.dim);  // every dim has a lane
    EXPECT_LE(s.g * s.nv * s.vec, 64);
    EXPECT_EQ(s, plan({c10::kHalf, c.dim, c.vec, c.group, false}));
  }
}

TEST(DecodePlan, SplitsFillTheGpuWithoutSplitsShorterThan256Tokens) {
  EXPECT_EQ(tileops::nvrtc::decode_splits(4, 262144, 132), 66);   // bs1 GQA 32/4: 4 CTAs, 2 a SM
  EXPECT_EQ(tileops::nvrtc::decode_splits(256, 4096, 132), 2);    // 32 requests x 8 KV heads
  EXPECT_EQ(tileops::nvrtc::decode_splits(4, 300, 132), 1);       // too short to split
  EXPECT_EQ(tileops::nvrtc::decode_splits(1, int64_t{1} << 30, 132), 128);  // at most 128
  EXPECT_EQ(tileops::nvrtc::decode_splits(1000, 1 << 20, 132), 1);  // enough CTAs already
  EXPECT_EQ(tileops::nvrtc::decode_splits(4, 0, 132), 1);         // an empty cache
}

// Spills are warnings of ptxas; made errors, a shape whose registers do not fit fails here.
tileops::jit::KernelSource strict(tileops::jit::KernelSource src) {
  src.options.push_back("--ptxas-options=--warn-on-spills");
  src.options.push_back("--ptxas-options=--warning-as-error");
  return src;
}

class DecodeCompiles : public ::testing::TestWithParam<std::tuple<c10::ScalarType, const char*>> {};

TEST_P(DecodeCompiles, EveryManifestShapeToCubinWithoutSpills) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto& [dtype, arch] = GetParam();
  std::set<std::string> names;
  // Head dims 64, 128, 256 (and an odd 80 with 4-byte accesses); groups of the workloads (MHA 1,
  // GQA 4, 8, 16) and a 3; contiguous and paged.
  for (const auto& [dim, vec] : {std::pair<int64_t, int>{64, 8}, {128, 8}, {256, 8}, {80, 2}})
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
  EXPECT_GE(names.size(), 20u);
}

INSTANTIATE_TEST_SUITE_P(All, DecodeCompiles,
                         ::testing::Combine(::testing::Values(c10::kHalf, c10::kBFloat16),
                                            ::testing::Values("sm_80", "sm_90a")),
                         [](const auto& info) {
                           return std::string(tileops::nvrtc::short_type_name(std::get<0>(info.param))) + "_" +
                                  std::get<1>(info.param);
                         });

}  // namespace
