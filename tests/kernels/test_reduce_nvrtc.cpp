// The reduction engine (src/kernels/reduction/reduce.cuh): every op's row, column and split kernels
// compile with NVRTC to CUBIN (no GPU needed), and the geometry and plans are the ones intended.
#include <gtest/gtest.h>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/nvrtc/reduction/reduce.h"

namespace {

using tileops::nvrtc::ReduceImpl;
using tileops::nvrtc::ReduceOp;
using tileops::nvrtc::ReduceProblem;

tileops::nvrtc::DeviceFacts h200() { return tileops::nvrtc::named_device_facts("h200"); }

ReduceProblem problem(ReduceOp op, c10::ScalarType x, int64_t M, int64_t N, int64_t I, int max_vec = 8) {
  c10::ScalarType y = x;
  if (op == ReduceOp::Argmax || op == ReduceOp::Argmin || op == ReduceOp::CountNonzero) y = c10::kLong;
  if (op == ReduceOp::All || op == ReduceOp::Any) y = c10::kBool;
  return ReduceProblem{op, x, x, y, M, N, I, max_vec};
}

void expect_compiles(const ReduceProblem& q, const char* arch) {
  auto dev = tileops::nvrtc::named_device_facts(arch);
  const auto spec = tileops::nvrtc::plan_reduce(q, dev);
  const auto sources = spec.sources();
  ASSERT_EQ(sources.size(), spec.split ? 2u : 1u);
  for (const auto& src : sources) {
    const auto cubin = tileops::jit::compile_to_cubin(src);
    ASSERT_GT(cubin.image.size(), 4u) << src.name;
    EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
    EXPECT_NE(src.name.find(arch), std::string::npos);
  }
}

class ReduceCompiles : public ::testing::TestWithParam<int> {};

// Each op: a short-row, a long-row split, a column and a split-column specialisation, on sm_90a.
TEST_P(ReduceCompiles, RowsColumnsAndSplitsToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto op = static_cast<ReduceOp>(GetParam());
  const bool logical = op == ReduceOp::All || op == ReduceOp::Any || op == ReduceOp::CountNonzero;
  const auto x = logical ? c10::kBool : c10::kBFloat16;
  expect_compiles(problem(op, x, 4096, 100, 1), "sm_90a");
  expect_compiles(problem(op, c10::kFloat, 1, 1 << 24, 1, 4), "sm_90a");
  expect_compiles(problem(op, x, 2, 300, 4096), "sm_90a");
  expect_compiles(problem(op, c10::kHalf, 1, 1 << 16, 64), "sm_90a");
}

INSTANTIATE_TEST_SUITE_P(EveryOp, ReduceCompiles, ::testing::Range(0, 17));

TEST(ReduceCompilesSm80, SumAndArgmax) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  expect_compiles(problem(ReduceOp::Sum, c10::kBFloat16, 1, 1 << 24, 1), "sm_80");
  expect_compiles(problem(ReduceOp::Argmax, c10::kHalf, 8, 1000, 512), "sm_80");
  // dtype=: bf16 elements rounded to float16 first, float32 out
  expect_compiles(ReduceProblem{ReduceOp::Sum, c10::kBFloat16, c10::kHalf, c10::kHalf, 8, 4096, 1, 8}, "sm_80");
}

TEST(ReduceGeometry, MergesRunsAndGathersInterleavedDims) {
  using tileops::nvrtc::reduce_geometry;
  auto g = reduce_geometry({4, 8, 16}, 0b100);  // last dim: rows
  EXPECT_EQ((std::array<int64_t, 3>{g.M, g.N, g.I}), (std::array<int64_t, 3>{32, 16, 1}));
  g = reduce_geometry({4, 8, 16}, 0b011);  // leading dims: columns
  EXPECT_EQ((std::array<int64_t, 3>{g.M, g.N, g.I}), (std::array<int64_t, 3>{1, 32, 16}));
  g = reduce_geometry({4, 8, 16}, 0b010);  // middle dim: [M, N, I]
  EXPECT_EQ((std::array<int64_t, 3>{g.M, g.N, g.I}), (std::array<int64_t, 3>{4, 8, 16}));
  EXPECT_FALSE(g.gather);
  g = reduce_geometry({4, 8, 16}, 0b101);  // reduced dims around a kept one: gathered
  EXPECT_TRUE(g.gather);
  EXPECT_EQ((std::array<int64_t, 3>{g.M, g.N, g.I}), (std::array<int64_t, 3>{8, 64, 1}));
  g = reduce_geometry({4, 1, 16}, 0b101 | 0b010);  // every dim
  EXPECT_EQ((std::array<int64_t, 3>{g.M, g.N, g.I}), (std::array<int64_t, 3>{1, 64, 1}));
  g = reduce_geometry({4, 1, 16}, 0b010);  // a size-1 dim only: nothing reduced
  EXPECT_EQ((std::array<int64_t, 3>{g.M, g.N, g.I}), (std::array<int64_t, 3>{64, 1, 1}));
  g = reduce_geometry({}, 0);  // 0-dim x
  EXPECT_EQ((std::array<int64_t, 3>{g.M, g.N, g.I}), (std::array<int64_t, 3>{1, 1, 1}));
}

TEST(ReducePlan, WarpsForShortRowsCtasForLongOnesSplitsForFewOutputs) {
  const auto dev = h200();
  const auto short_rows = tileops::nvrtc::plan_reduce(problem(ReduceOp::Sum, c10::kBFloat16, 65536, 64, 1), dev);
  EXPECT_EQ(short_rows.impl, ReduceImpl::kRows);
  EXPECT_EQ(short_rows.vec, 8);
  EXPECT_EQ(short_rows.tpr, 2);  // 8 vectors: 2 threads of 4
  EXPECT_EQ(short_rows.rows, 128);
  EXPECT_FALSE(short_rows.split);
  const auto mid = tileops::nvrtc::plan_reduce(problem(ReduceOp::Sum, c10::kBFloat16, 8192, 4096, 1), dev);
  EXPECT_EQ(tileops::nvrtc::plan_reduce(problem(ReduceOp::Sum, c10::kFloat, 8192, 1 << 16, 1, 4), dev).tpr, 1024);
  EXPECT_EQ(mid.tpr, 128);
  EXPECT_EQ(mid.rows, 1);
  EXPECT_FALSE(mid.split);
  const auto all = problem(ReduceOp::Sum, c10::kBFloat16, 1, 1 << 25, 1);
  EXPECT_TRUE(tileops::nvrtc::plan_reduce(all, dev).split);
  EXPECT_EQ(tileops::nvrtc::plan_reduce(all, dev).tpr, 256);  // few rows: smaller CTAs, more of them
  EXPECT_EQ(tileops::nvrtc::reduce_splits(all, dev), 528);    // 4 CTAs an SM
  const auto cols = problem(ReduceOp::Sum, c10::kBFloat16, 1, 8192, 8192);
  const auto c = tileops::nvrtc::plan_reduce(cols, dev);
  EXPECT_EQ(c.impl, ReduceImpl::kCols);
  EXPECT_EQ(c.vec, 8);
  EXPECT_TRUE(c.split);
  EXPECT_EQ(tileops::nvrtc::reduce_splits(cols, dev), 16);  // 64 rows a warp a split, not 17 (528 CTAs)
  EXPECT_EQ(tileops::nvrtc::plan_reduce(problem(ReduceOp::Sum, c10::kBFloat16, 1, 8192, 8190), dev).vec, 2);
}

TEST(ReducePlan, ColumnLanesKeepAtMost32BytesOfState) {
  const auto dev = h200();
  const auto vec = [&](ReduceOp op, c10::ScalarType t) {
    return tileops::nvrtc::plan_reduce(problem(op, t, 64, 1024, 512), dev).vec;
  };
  EXPECT_EQ(vec(ReduceOp::Sum, c10::kBFloat16), 8);        // 4-byte sums: the 16-byte load decides
  EXPECT_EQ(vec(ReduceOp::LogSumExp, c10::kBFloat16), 4);  // max and sum
  EXPECT_EQ(tileops::nvrtc::plan_reduce(problem(ReduceOp::Any, c10::kBool, 64, 1024, 512, 16), dev).vec,
            8);  // a 32-bit flag a column: 8, not the 16 a 16-byte load holds
  EXPECT_EQ(tileops::nvrtc::plan_reduce(problem(ReduceOp::CountNonzero, c10::kBool, 64, 1024, 512, 16), dev).vec,
            4);  // a 64-bit count
  EXPECT_EQ(vec(ReduceOp::Var, c10::kBFloat16), 2);        // n, mean, m2
  EXPECT_EQ(vec(ReduceOp::Argmax, c10::kBFloat16), 2);     // value and 64-bit index
  EXPECT_EQ(vec(ReduceOp::Argmax, c10::kFloat), 2);
}

TEST(ReducePlan, ColumnLanesNarrowWhereThatAvoidsASplit) {
  const auto dev = h200();
  // bool any over a middle dim: 8 columns a lane leave 256 CTAs (split in two), 4 leave 512
  const auto middle = tileops::nvrtc::plan_reduce(problem(ReduceOp::Any, c10::kBool, 128, 1024, 512, 16), dev);
  EXPECT_EQ(middle.vec, 4);
  EXPECT_FALSE(middle.split);
  // over columns no width fills the GPU (16 or 32 CTAs): the widest, split
  const auto cols = tileops::nvrtc::plan_reduce(problem(ReduceOp::Any, c10::kBool, 1, 16384, 4096, 16), dev);
  EXPECT_EQ(cols.vec, 8);
  EXPECT_TRUE(cols.split);
  // bf16 sums over 64x1024x512: 4 columns a lane would give 256 CTAs, still a split: keep 8
  const auto sum = tileops::nvrtc::plan_reduce(problem(ReduceOp::Sum, c10::kBFloat16, 64, 1024, 512), dev);
  EXPECT_EQ(sum.vec, 8);
  EXPECT_TRUE(sum.split);
}

TEST(ReducePlan, NameCarriesTheIdentity) {
  const auto s = tileops::nvrtc::plan_reduce(problem(ReduceOp::Argmax, c10::kBFloat16, 4, 128256, 1), h200());
  EXPECT_EQ(s.name().rfind("reduce_rows__argmax__bf16_i64__v8_t256_r1__split__sm_90a", 0), 0u) << s.name();
}

}  // namespace
