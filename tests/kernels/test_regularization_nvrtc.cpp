// The regularization family without a GPU: Philox4x32-10 (src/kernels/common/philox.cuh, compiled here
// as plain C++) gives Random123's known answers; dropout_rule's threshold and scale; the dropout kernel
// compiles with NVRTC to CUBIN for sm_80 and sm_90a at every dtype and access width its plan takes.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "kernels/common/philox.cuh"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/regularization/dropout.h"
#include "targets/regularization_dropout_rule.h"

namespace {

TEST(Philox, Random123KnownAnswers) {
  // Random123's known-answer vectors (its kat_vectors file), "philox4x32 10": counter[4] key[2] -> result[4].
  struct Kat { unsigned c[4], k[2], want[4]; };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& t : kats) {
    const tileops::Philox4 r = tileops::philox4x32_10(t.c[0], t.c[1], t.c[2], t.c[3], t.k[0], t.k[1]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.w[i], t.want[i]) << i;
  }
  // philox_group(seed, g): counter (g low, g high, 0, 0), key (seed low, seed high).
  const tileops::Philox4 g = tileops::philox_group(0xa4093822ull | 0x299f31d0ull << 32, 0x85a308d3ull << 32 | 0x243f6a88ull);
  const tileops::Philox4 same = tileops::philox4x32_10(0x243f6a88, 0x85a308d3, 0, 0, 0xa4093822, 0x299f31d0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(g.w[i], same.w[i]);
}

TEST(DropoutRule, ThresholdAndScale) {
  using tileops::dropout_rule;
  EXPECT_EQ(dropout_rule(0.5, true).drop_below, 0x80000000u);
  EXPECT_EQ(dropout_rule(0.5, true).scale, 2.f);
  EXPECT_EQ(dropout_rule(0.7, true).drop_below, 0xb3333333u);
  EXPECT_EQ(dropout_rule(0.1, true).scale, 1.f / 0.9f);  // divided in float32
  EXPECT_EQ(dropout_rule(1.0 - 1e-12, true).drop_below, 0xffffffffu);  // rounds to 2^32: saturated
  for (const auto r : {dropout_rule(0.0, true), dropout_rule(0.9, false)}) {
    EXPECT_EQ(r.drop_below, 0u);
    EXPECT_EQ(r.scale, 1.f);
  }
  EXPECT_EQ(dropout_rule(1.0, true).scale, 0.f);
}

class DropoutCompiles : public ::testing::TestWithParam<std::tuple<c10::ScalarType, const char*>> {};

TEST_P(DropoutCompiles, EveryAccessWidthToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto& [dtype, arch] = GetParam();
  tileops::nvrtc::DeviceFacts facts = tileops::nvrtc::named_device_facts("h200");
  facts.arch = arch;
  const int widest = 16 / static_cast<int>(c10::elementSize(dtype));
  std::set<std::string> names;
  for (int vec = 1; vec <= widest; vec *= 2) {
    const tileops::nvrtc::DropoutFamily family{nullptr};
    const auto spec = family.plan({dtype, vec}, facts, tileops::nvrtc::tuning());
    EXPECT_EQ(spec.vec, vec);
    const auto sources = spec.sources();
    ASSERT_EQ(sources.size(), 1u);
    names.insert(sources[0].name);
    const auto cubin = tileops::jit::compile_to_cubin(sources[0]);
    ASSERT_GT(cubin.image.size(), 4u) << sources[0].name;
    EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF")) << sources[0].name;
    EXPECT_NE(cubin.lowered_name.find("dropout_fwd"), std::string::npos) << cubin.lowered_name;
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(widest == 8 ? 4 : 3));
}

INSTANTIATE_TEST_SUITE_P(All, DropoutCompiles,
                         ::testing::Combine(::testing::Values(c10::kHalf, c10::kBFloat16, c10::kFloat),
                                            ::testing::Values("sm_80", "sm_90a")),
                         [](const auto& info) {
                           return std::string(tileops::nvrtc::short_type_name(std::get<0>(info.param))) + "_" +
                                  std::get<1>(info.param);
                         });

}  // namespace
