// The elementwise engine without a GPU: the dim collapsing that picks a kernel's path (contiguous,
// broadcast single element, strided rank), the compute type rule, and every manifest entry's
// generated kernel compiling with NVRTC to CUBIN on both paths (32- and 64-bit indexing).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/elementwise/elementwise.h"

namespace {

using tileops::nvrtc::EwLayout;
using tileops::nvrtc::EwSpec;
using tileops::nvrtc::ew_layout;
namespace ew = tileops::elementwise;

EwLayout layout(std::vector<std::vector<int64_t>> sizes, std::vector<std::vector<int64_t>> strides,
                std::vector<int64_t> out) {
  std::vector<c10::IntArrayRef> s(sizes.begin(), sizes.end()), t(strides.begin(), strides.end());
  return ew_layout(s, t, out);
}

TEST(ElementwiseLayout, ContiguousInputsCollapseToOneDim) {
  const auto l = layout({{8, 16, 32}, {8, 16, 32}}, {{512, 32, 1}, {512, 32, 1}}, {8, 16, 32});
  EXPECT_TRUE(l.contiguous);
  EXPECT_EQ(std::vector<int64_t>(l.sizes.begin(), l.sizes.end()), (std::vector<int64_t>{4096}));
  EXPECT_EQ(l.numel, 4096);
  EXPECT_FALSE(l.one[0] || l.one[1]);
}

TEST(ElementwiseLayout, OuterBroadcastIsStridedRankTwo) {
  // [4096, 1] + [1, 4096]
  const auto l = layout({{4096, 1}, {1, 4096}}, {{1, 1}, {4096, 1}}, {4096, 4096});
  EXPECT_FALSE(l.contiguous);
  EXPECT_EQ(std::vector<int64_t>(l.sizes.begin(), l.sizes.end()), (std::vector<int64_t>{4096, 4096}));
  EXPECT_EQ(std::vector<int64_t>(l.strides[0].begin(), l.strides[0].end()), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(std::vector<int64_t>(l.strides[1].begin(), l.strides[1].end()), (std::vector<int64_t>{0, 1}));
}

TEST(ElementwiseLayout, SingleElementInputStaysOnTheContiguousPath) {
  // x + tensor(2.0): a 0-dim input broadcasts as one element
  const auto l = layout({{64, 128}, {}}, {{128, 1}, {}}, {64, 128});
  EXPECT_TRUE(l.contiguous);
  EXPECT_TRUE(l.one[1]);
  EXPECT_FALSE(l.one[0]);
  EXPECT_EQ(std::vector<int64_t>(l.sizes.begin(), l.sizes.end()), (std::vector<int64_t>{8192}));
}

TEST(ElementwiseLayout, TransposedInputIsStridedAndSizeOneDimsDrop) {
  const auto l = layout({{64, 1, 32}, {64, 1, 32}}, {{1, 1, 64}, {32, 32, 1}}, {64, 1, 32});
  EXPECT_FALSE(l.contiguous);
  EXPECT_EQ(std::vector<int64_t>(l.sizes.begin(), l.sizes.end()), (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(std::vector<int64_t>(l.strides[0].begin(), l.strides[0].end()), (std::vector<int64_t>{1, 64}));
  EXPECT_EQ(std::vector<int64_t>(l.strides[1].begin(), l.strides[1].end()), (std::vector<int64_t>{32, 1}));
}

TEST(ElementwiseLayout, RowBroadcastMergesInnerDimsOnly) {
  // [2, 3, 4] + [3, 4] (a bias over rows): the input dims merge, the broadcast one stays
  const auto l = layout({{2, 3, 4}, {3, 4}}, {{12, 4, 1}, {4, 1}}, {2, 3, 4});
  EXPECT_EQ(std::vector<int64_t>(l.sizes.begin(), l.sizes.end()), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(std::vector<int64_t>(l.strides[1].begin(), l.strides[1].end()), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(l.max_offset, 23);
}

TEST(ElementwiseCompute, PromotionRule) {
  const auto& add = ew::kOps[0];
  const c10::ScalarType i32 = c10::kInt, f16 = c10::kHalf, b = c10::kBool;
  EXPECT_EQ(tileops::nvrtc::ew_compute_dtype(add, {&f16, 1}, c10::kHalf), c10::kFloat);   // opmath
  EXPECT_EQ(tileops::nvrtc::ew_compute_dtype(add, {&i32, 1}, c10::kFloat), c10::kFloat);  // sqrt(int)
  EXPECT_EQ(tileops::nvrtc::ew_compute_dtype(add, {&i32, 1}, c10::kBool), c10::kInt);     // int comparison
  EXPECT_EQ(tileops::nvrtc::ew_compute_dtype(add, {&b, 1}, c10::kBool), c10::kBool);
}

// Every entry compiles on both paths: float16 through float (int32 for the bitwise entries), a
// broadcast single element on the contiguous path, rank 3 with 64-bit indexing on the strided one.
class ElementwiseCompiles : public ::testing::TestWithParam<int> {};

EwSpec spec_for(int op, c10::ScalarType dt, int rank, bool index64) {
  const auto& e = ew::kOps[op];
  EwSpec s;
  s.op = op;
  for (int k = 0; k < e.n_in; ++k) s.in[k] = e.in_fixed[k] ? c10::kBool : dt;
  s.out = dt;
  s.compute = dt == c10::kHalf ? c10::kFloat : dt;
  s.rank = rank;
  s.vec = rank == 0 ? 8 : 1;
  s.one[e.n_in - 1] = rank == 0 && e.n_in > 1;  // a broadcast single element on the contiguous path
  s.index64 = index64;
  s.arch = "sm_90a";
  return s;
}

TEST_P(ElementwiseCompiles, BothPathsToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const int op = GetParam();
  // bitwise entries take integers only; every other entry takes float16
  const c10::ScalarType dt = std::string(ew::kOps[op].cls).rfind("Bitwise", 0) == 0 ? c10::kInt : c10::kHalf;
  for (const auto& [rank, index64] : {std::pair{0, false}, std::pair{3, true}}) {
    const auto srcs = spec_for(op, dt, rank, index64).sources();
    ASSERT_EQ(srcs.size(), 1u);
    const auto cubin = tileops::jit::compile_to_cubin(srcs[0]);
    EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF")) << srcs[0].name;
    EXPECT_NE(srcs[0].name.find(ew::kOps[op].stem), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryEntry, ElementwiseCompiles, ::testing::Range(0, ew::kNumOps),
                         [](const ::testing::TestParamInfo<int>& i) { return std::string(ew::kOps[i.param].cls); });

TEST(ElementwiseSpec, IdentityIsExpressionDtypesAndPathNotSizes) {
  const EwSpec a = spec_for(0, c10::kHalf, 0, false), b = spec_for(0, c10::kHalf, 2, false);
  EXPECT_FALSE(a == b);
  EXPECT_NE(a.name(), b.name());
  EXPECT_NE(a.name().find("__v8"), std::string::npos);
  EXPECT_NE(b.name().find("__r2"), std::string::npos);
  EXPECT_NE(a.sources()[0].source.find(ew::kOps[0].expr), std::string::npos);
}

}  // namespace
