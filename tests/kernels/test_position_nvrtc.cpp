// The position kernels (RoPE neox / GPT-J with a float32 or a q-dtype cache, int32 positions and
// per-token offsets; sinusoidal table) compile with NVRTC to CUBIN for sm_80 and sm_90a (no GPU
// needed), and the planners pick the access widths the layout allows.
#include <gtest/gtest.h>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/nvrtc/position/rope.h"
#include "targets/nvrtc/position/sinusoidal.h"

namespace {

using tileops::nvrtc::plan_rope;

void expect_cubin(const tileops::jit::KernelSource& src, const char* arch, const char* stem) {
  const auto cubin = tileops::jit::compile_to_cubin(src);
  ASSERT_GT(cubin.image.size(), 4u);
  EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
  EXPECT_NE(cubin.lowered_name.find(stem), std::string::npos) << cubin.lowered_name;
  EXPECT_NE(src.name.find(arch), std::string::npos);
}

struct RopeCase {
  c10::ScalarType dtype;
  int64_t head_dim, rot_dim;
  bool neox;
  int max_vec;
  c10::ScalarType cache_dtype = c10::kFloat;
};

class RopeCompiles : public ::testing::TestWithParam<std::tuple<RopeCase, const char*>> {};

TEST_P(RopeCompiles, ToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto& [c, arch] = GetParam();
  expect_cubin(
      tileops::nvrtc::rope_source(plan_rope(c.dtype, c.head_dim, c.rot_dim, c.neox, c.max_vec, c.cache_dtype), arch),
      arch, "rope_fwd");
}

// Readable names; gtest's default prints the struct's bytes, padding included (not reproducible).
std::string RopeCaseName(const ::testing::TestParamInfo<RopeCompiles::ParamType>& info) {
  const RopeCase& c = std::get<0>(info.param);
  return std::string(tileops::nvrtc::short_type_name(c.dtype)) + "_d" + std::to_string(c.head_dim) + "_r" +
         std::to_string(c.rot_dim) + (c.neox ? "_neox" : "_gptj") + "_max" + std::to_string(c.max_vec) + "_c" +
         tileops::nvrtc::short_type_name(c.cache_dtype) + "_" + std::get<1>(info.param);
}

INSTANTIATE_TEST_SUITE_P(
    Archs, RopeCompiles,
    ::testing::Combine(::testing::Values(RopeCase{c10::kBFloat16, 128, 128, true, 16},   // llama: 16-byte accesses
                                         RopeCase{c10::kHalf, 128, 128, false, 16},      // GPT-J pairs, vec 8
                                         RopeCase{c10::kFloat, 256, 64, false, 16},      // partial rotary
                                         RopeCase{c10::kHalf, 80, 32, true, 16},         // rot < head_dim, vec 8
                                         RopeCase{c10::kBFloat16, 65, 2, false, 16},     // odd head_dim: scalar
                                         RopeCase{c10::kHalf, 128, 24, false, 16},       // GPT-J 4 pairs an access
                                         RopeCase{c10::kHalf, 128, 2, false, 16},        // GPT-J one pair, vec 2
                                         RopeCase{c10::kFloat, 128, 128, true, 1},       // misaligned pointers
                                         RopeCase{c10::kHalf, 512, 512, true, 16},       // lanes loop
                                         // The cache in q's dtype (dtype_combos): one 16-byte cos load
                                         RopeCase{c10::kBFloat16, 128, 128, true, 16, c10::kBFloat16},
                                         RopeCase{c10::kBFloat16, 128, 64, false, 16, c10::kBFloat16},
                                         RopeCase{c10::kHalf, 128, 128, false, 16, c10::kHalf},
                                         RopeCase{c10::kBFloat16, 65, 2, true, 16, c10::kBFloat16}),
                       ::testing::Values("sm_80", "sm_90a")),
    RopeCaseName);

TEST(RopePlan, WidestAccessTheLayoutAndPointersAllow) {
  EXPECT_EQ(plan_rope(c10::kBFloat16, 128, 128, true, 8).vec, 8);
  EXPECT_EQ(plan_rope(c10::kFloat, 128, 128, true, 4).vec, 4);
  EXPECT_EQ(plan_rope(c10::kHalf, 128, 128, true, 2).vec, 2);    // pointers only 4-byte aligned
  EXPECT_EQ(plan_rope(c10::kHalf, 128, 24, true, 8).vec, 4);     // rot/2 = 12
  EXPECT_EQ(plan_rope(c10::kHalf, 65, 64, false, 8).vec, 1);     // odd head_dim: rows misaligned
  EXPECT_EQ(plan_rope(c10::kHalf, 128, 2, true, 8).vec, 1);      // one pair
}

TEST(RopePlan, GptjUnitsAreOneContiguousAccessOfHalfAsManyPairs) {
  // GPT-J pairs are adjacent, so one 16-byte access holds vec / 2 pairs: a rotary dim that caps a
  // neox access at 4 elements (rot/2 = 12) still allows 8 here, and a single pair one access of 2.
  EXPECT_EQ(plan_rope(c10::kHalf, 128, 24, false, 8).vec, 8);
  EXPECT_EQ(tileops::nvrtc::rope_pairs(plan_rope(c10::kHalf, 128, 24, false, 8)), 4);
  EXPECT_EQ(plan_rope(c10::kHalf, 128, 2, false, 8).vec, 2);
  EXPECT_EQ(tileops::nvrtc::rope_pairs(plan_rope(c10::kHalf, 128, 2, false, 8)), 1);
  EXPECT_EQ(tileops::nvrtc::rope_pairs(plan_rope(c10::kHalf, 65, 64, false, 8)), 1);  // vec 1: two accesses
  // 128-dim bf16 heads: 16 lanes of 8 contiguous elements (neox: 8 lanes, two accesses each).
  EXPECT_EQ(tileops::nvrtc::rope_launch_shape(plan_rope(c10::kBFloat16, 128, 128, false, 8), 64).lanes, 16);
  EXPECT_EQ(tileops::nvrtc::rope_launch_shape(plan_rope(c10::kBFloat16, 128, 128, true, 8), 64).lanes, 8);
}

TEST(RopePlan, LaunchShapeCoversHeadsThenTokens) {
  const auto p = plan_rope(c10::kBFloat16, 128, 128, true, 8);  // 8 units a head
  const auto many = tileops::nvrtc::rope_launch_shape(p, 64);
  EXPECT_EQ(many.lanes, 8);
  EXPECT_EQ(many.slots, 32);
  EXPECT_EQ(many.tpb, 1);
  const auto few = tileops::nvrtc::rope_launch_shape(p, 2);  // 2 heads: 16 tokens a block
  EXPECT_EQ(few.slots, 2);
  EXPECT_EQ(few.tpb, 16);
  EXPECT_EQ(tileops::nvrtc::rope_launch_shape(plan_rope(c10::kFloat, 4096, 4096, true, 1), 1).lanes, 128);
}

TEST(RopePlan, NameCarriesTheIdentity) {
  const auto a = tileops::nvrtc::rope_name(plan_rope(c10::kBFloat16, 128, 128, true, 8), "sm_90a");
  const auto b = tileops::nvrtc::rope_name(plan_rope(c10::kBFloat16, 128, 128, false, 8), "sm_90a");
  EXPECT_EQ(a, "rope_neox_cached_fwd__bf16__cf32__d128_r128_v8__sm_90a");
  EXPECT_NE(a, b);
  // The cache's dtype is part of the identity: a bf16 cache is another specialisation.
  const auto p = plan_rope(c10::kBFloat16, 128, 128, true, 8, c10::kBFloat16);
  EXPECT_EQ(p.vec, 8);
  EXPECT_EQ(tileops::nvrtc::rope_name(p, "sm_90a"), "rope_neox_cached_fwd__bf16__cbf16__d128_r128_v8__sm_90a");
  EXPECT_NE(tileops::nvrtc::rope_source(p, "sm_90a").name_expression.find(
                "tileops::rope_fwd<tileops::bf16, tileops::bf16, 128, 128, 8, true>"),
            std::string::npos);
}

// int32 positions and per-token offsets (rope_indexed_fwd): each index type, with and without offsets.
class RopeIndexedCompiles
    : public ::testing::TestWithParam<std::tuple<c10::ScalarType, bool, bool, const char*>> {};

TEST_P(RopeIndexedCompiles, ToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto& [index, offsets, neox, arch] = GetParam();
  auto p = plan_rope(c10::kBFloat16, 128, 128, neox, 8);
  p.index_dtype = index;
  p.offsets = offsets;
  ASSERT_TRUE(p.indexed());
  expect_cubin(tileops::nvrtc::rope_source(p, arch), arch, "rope_indexed_fwd");
}

INSTANTIATE_TEST_SUITE_P(Archs, RopeIndexedCompiles,
                         ::testing::Values(std::make_tuple(c10::kInt, false, true, "sm_90a"),
                                           std::make_tuple(c10::kInt, true, false, "sm_90a"),
                                           std::make_tuple(c10::kLong, true, true, "sm_90a"),
                                           std::make_tuple(c10::kInt, true, true, "sm_80")),
                         [](const auto& info) {
                           return std::string(c10::toString(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "_offsets" : "") +
                                  (std::get<2>(info.param) ? "_neox_" : "_gptj_") + std::get<3>(info.param);
                         });

TEST(RopePlan, IndexTypeAndOffsetsNameTheIndexedKernel) {
  auto p = plan_rope(c10::kBFloat16, 128, 128, true, 8);
  EXPECT_FALSE(p.indexed());  // int64 positions alone: rope_fwd, name unchanged
  EXPECT_EQ(tileops::nvrtc::rope_source(p, "sm_90a").name_expression.rfind("tileops::rope_fwd<", 0), 0u);
  p.index_dtype = c10::kInt;
  EXPECT_EQ(tileops::nvrtc::rope_name(p, "sm_90a"), "rope_neox_cached_fwd__bf16__cf32__d128_r128_v8__pi32__sm_90a");
  EXPECT_EQ(tileops::nvrtc::rope_source(p, "sm_90a").name_expression,
            "tileops::rope_indexed_fwd<tileops::bf16, float, int, 128, 128, 8, true, false>");
  auto o = plan_rope(c10::kBFloat16, 128, 128, true, 8);
  o.offsets = true;
  EXPECT_EQ(tileops::nvrtc::rope_name(o, "sm_90a"), "rope_neox_cached_fwd__bf16__cf32__d128_r128_v8__pi64_off__sm_90a");
  EXPECT_FALSE(o == p);
  EXPECT_FALSE(o == plan_rope(c10::kBFloat16, 128, 128, true, 8));
}

class SinusoidalCompiles : public ::testing::TestWithParam<std::tuple<c10::ScalarType, const char*>> {};

TEST_P(SinusoidalCompiles, ToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto& [dtype, arch] = GetParam();
  const int vec = tileops::nvrtc::sinusoidal_vec(dtype, 768, 16);
  expect_cubin(tileops::nvrtc::sinusoidal_source(dtype, vec, arch), arch, "sinusoidal_fwd");
  expect_cubin(tileops::nvrtc::sinusoidal_source(dtype, 2, arch), arch, "sinusoidal_fwd");  // dim = 2 (mod 4)
}

INSTANTIATE_TEST_SUITE_P(Archs, SinusoidalCompiles,
                         ::testing::Combine(::testing::Values(c10::kHalf, c10::kBFloat16, c10::kFloat),
                                            ::testing::Values("sm_80", "sm_90a")));

TEST(SinusoidalPlan, VecIsEvenAndDividesDim) {
  EXPECT_EQ(tileops::nvrtc::sinusoidal_vec(c10::kHalf, 768, 8), 8);
  EXPECT_EQ(tileops::nvrtc::sinusoidal_vec(c10::kFloat, 768, 4), 4);
  EXPECT_EQ(tileops::nvrtc::sinusoidal_vec(c10::kHalf, 6, 8), 2);
  EXPECT_EQ(tileops::nvrtc::sinusoidal_vec(c10::kHalf, 12, 8), 4);
}

}  // namespace
