// The scan engine (src/kernels/reduction/scan.cuh): every plan shape of each op (short rows, long rows,
// split rows, columns, split columns) compiles with NVRTC to CUBIN for the dtype pairs the manifest
// allows (no GPU needed), and the geometry and plans are the ones intended.
#include <gtest/gtest.h>

#include <array>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/nvrtc/reduction/scan.h"

namespace {

using tileops::nvrtc::ScanImpl;
using tileops::nvrtc::ScanOp;
using tileops::nvrtc::ScanProblem;

tileops::nvrtc::DeviceFacts h200() { return tileops::nvrtc::named_device_facts("h200"); }

ScanProblem problem(ScanOp op, c10::ScalarType x, c10::ScalarType y, int64_t M, int64_t N, int64_t I,
                    int max_vec = 16) {
  return ScanProblem{op, x, y, M, N, I, max_vec};
}

void expect_compiles(const ScanProblem& q, const char* arch, bool split) {
  const auto spec = tileops::nvrtc::plan_scan(q, tileops::nvrtc::named_device_facts(arch));
  ASSERT_EQ(spec.split, split) << spec.describe();
  const auto sources = spec.sources();
  ASSERT_EQ(sources.size(), !spec.split || spec.impl == ScanImpl::kRows ? 1u : 3u);  // split columns: 3 passes
  for (const auto& src : sources) {
    const auto cubin = tileops::jit::compile_to_cubin(src);
    ASSERT_GT(cubin.image.size(), 4u) << src.name;
    EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
    EXPECT_NE(src.name.find(arch), std::string::npos);
  }
}

struct Pair {
  c10::ScalarType x, y;
};
// x -> y pairs: same dtype, dtype= widening and narrowing, integer and bool x promoted to int64.
constexpr std::array<Pair, 7> kPairs{{{c10::kBFloat16, c10::kBFloat16},
                                      {c10::kHalf, c10::kFloat},
                                      {c10::kFloat, c10::kFloat},
                                      {c10::kDouble, c10::kDouble},
                                      {c10::kBool, c10::kLong},
                                      {c10::kInt, c10::kChar},
                                      {c10::kByte, c10::kHalf}}};

class ScanCompiles : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ScanCompiles, RowsColumnsAndSplitsToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto op = static_cast<ScanOp>(std::get<0>(GetParam()));
  const Pair p = kPairs[std::get<1>(GetParam())];
  expect_compiles(problem(op, p.x, p.y, 65536, 7, 1), "sm_90a", false);       // a few threads a row
  expect_compiles(problem(op, p.x, p.y, 4096, 100000, 1), "sm_90a", false);   // a CTA a row, many chunks
  expect_compiles(problem(op, p.x, p.y, 2, 1 << 22, 1), "sm_90a", true);      // few long rows: slices
  expect_compiles(problem(op, p.x, p.y, 1024, 300, 4096), "sm_90a", false);   // columns
  expect_compiles(problem(op, p.x, p.y, 1, 1 << 16, 64), "sm_90a", true);     // few columns: slices
}

INSTANTIATE_TEST_SUITE_P(EveryOpAndPair, ScanCompiles,
                         ::testing::Combine(::testing::Range(0, 2), ::testing::Range(0, int(kPairs.size()))));

class LogCumSumExpCompiles : public ::testing::TestWithParam<int> {};

// logcumsumexp keeps x's dtype (floating only).
TEST_P(LogCumSumExpCompiles, RowsColumnsAndSplitsToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  constexpr std::array<c10::ScalarType, 4> kFloats{c10::kHalf, c10::kBFloat16, c10::kFloat, c10::kDouble};
  const auto t = kFloats[GetParam()];
  expect_compiles(problem(ScanOp::LogSumExp, t, t, 65536, 7, 1), "sm_90a", false);
  expect_compiles(problem(ScanOp::LogSumExp, t, t, 2, 1 << 22, 1), "sm_90a", true);
  expect_compiles(problem(ScanOp::LogSumExp, t, t, 1024, 300, 4096), "sm_90a", false);
  expect_compiles(problem(ScanOp::LogSumExp, t, t, 1, 1 << 16, 64), "sm_90a", true);
}

INSTANTIATE_TEST_SUITE_P(EveryFloat, LogCumSumExpCompiles, ::testing::Range(0, 4));

TEST(ScanCompilesSm80, CumsumRowsAndColumns) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  expect_compiles(problem(ScanOp::Sum, c10::kBFloat16, c10::kBFloat16, 1, 1 << 24, 1), "sm_80", true);
  expect_compiles(problem(ScanOp::Prod, c10::kHalf, c10::kHalf, 8, 1000, 512), "sm_80", true);
}

TEST(ScanGeometry, OuterScannedInner) {
  using tileops::nvrtc::scan_geometry;
  auto g = scan_geometry({4, 8, 16}, -1);
  EXPECT_EQ((std::array<int64_t, 3>{g.M, g.N, g.I}), (std::array<int64_t, 3>{32, 16, 1}));
  g = scan_geometry({4, 8, 16}, 0);
  EXPECT_EQ((std::array<int64_t, 3>{g.M, g.N, g.I}), (std::array<int64_t, 3>{1, 4, 128}));
  g = scan_geometry({4, 8, 16}, -2);
  EXPECT_EQ((std::array<int64_t, 3>{g.M, g.N, g.I}), (std::array<int64_t, 3>{4, 8, 16}));
  g = scan_geometry({}, 0);  // 0-dim x
  EXPECT_EQ((std::array<int64_t, 3>{g.M, g.N, g.I}), (std::array<int64_t, 3>{1, 1, 1}));
  g = scan_geometry({}, -1);
  EXPECT_EQ((std::array<int64_t, 3>{g.M, g.N, g.I}), (std::array<int64_t, 3>{1, 1, 1}));
}

TEST(ScanPlan, SegmentsForShortRowsCtasForLongOnesSlicesForFewRowsOrColumns) {
  const auto dev = h200();
  using tileops::nvrtc::plan_scan;
  using tileops::nvrtc::scan_splits;
  const auto bf = c10::kBFloat16;
  const auto tiny = plan_scan(problem(ScanOp::Sum, bf, bf, 1 << 20, 7, 1), dev);
  EXPECT_EQ(tiny.impl, ScanImpl::kRows);
  EXPECT_EQ(tiny.vec, 1);  // 7 elements a row: no wider access divides it
  EXPECT_EQ(tiny.tpr, 8);
  EXPECT_EQ(tiny.rows, 32);
  const auto hidden = plan_scan(problem(ScanOp::Sum, bf, bf, 2048, 4096, 1), dev);
  EXPECT_EQ(hidden.vec, 8);
  EXPECT_EQ(hidden.tpr, 512);  // the row in one chunk
  EXPECT_EQ(hidden.rows, 1);
  EXPECT_FALSE(hidden.split);
  const auto wide_y = plan_scan(problem(ScanOp::Sum, bf, c10::kLong, 2048, 4096, 1), dev);
  EXPECT_EQ(wide_y.vec, 8);  // int64 y is stored in 16-byte pieces
  EXPECT_EQ(plan_scan(problem(ScanOp::Sum, bf, c10::kLong, 2048, 4096, 1, 2), dev).vec, 2);  // misaligned
  const auto long_seq = problem(ScanOp::Sum, bf, bf, 64, 32768, 1);
  EXPECT_TRUE(plan_scan(long_seq, dev).split);
  EXPECT_EQ(plan_scan(long_seq, dev).tpr, 256);
  EXPECT_EQ(scan_splits(long_seq, dev), 4);  // a slice keeps 4 chunks of 256 x 8
  const auto one_row = problem(ScanOp::Sum, bf, bf, 1, int64_t{1} << 26, 1);
  EXPECT_EQ(scan_splits(one_row, dev), 1024);
  const auto cols = problem(ScanOp::Sum, bf, bf, 1, 8192, 8192);
  const auto c = plan_scan(cols, dev);
  EXPECT_EQ(c.impl, ScanImpl::kCols);
  EXPECT_EQ(c.vec, 8);
  EXPECT_TRUE(c.split);
  EXPECT_EQ(scan_splits(cols, dev), 128);  // at least 64 rows a slice
  EXPECT_FALSE(plan_scan(problem(ScanOp::Sum, bf, bf, 512, 4096, 4096), dev).split);  // enough columns
  EXPECT_EQ(plan_scan(problem(ScanOp::Sum, bf, bf, 1, 8192, 8190), dev).vec, 2);
}

// Split rows take the chained kernel: tiles of up to 4 chunks held in registers, fewer where the
// accumulators are wide (at most 32 words a thread), and the look-back's state sized for them.
TEST(ScanPlan, ChainedRowTilesAndState) {
  const auto dev = h200();
  using tileops::nvrtc::plan_scan;
  const auto bf = plan_scan(problem(ScanOp::Sum, c10::kBFloat16, c10::kBFloat16, 1, int64_t{1} << 26, 1), dev);
  ASSERT_TRUE(bf.split);
  EXPECT_EQ(tileops::nvrtc::scan_chain_chunks(bf), 4);
  EXPECT_EQ(tileops::nvrtc::scan_chain_tiles(bf, int64_t{1} << 26), (int64_t{1} << 26) / (256 * 4 * 8));
  EXPECT_EQ(tileops::nvrtc::scan_chain_tiles(bf, 8), 1);
  const auto wide = plan_scan(problem(ScanOp::Sum, c10::kBool, c10::kLong, 2, 1 << 22, 1), dev);
  ASSERT_TRUE(wide.split);
  EXPECT_EQ(wide.vec, 16);
  EXPECT_EQ(tileops::nvrtc::scan_chain_chunks(wide), 1);  // 16 int64 accumulators a chunk already
  const int64_t tiles = tileops::nvrtc::scan_chain_tiles(wide, 1 << 22);
  EXPECT_EQ(tiles, (1 << 22) / (256 * 16));
  // flags (4 bytes, padded to 16), aggregates and inclusive prefixes (8 bytes each), the counter
  EXPECT_EQ(tileops::nvrtc::scan_chain_state_bytes(wide, 2, 1 << 22), (2 * tiles * 4 + 15) / 16 * 16 + 2 * 2 * tiles * 8 + 8);
}

TEST(ScanPlan, NameCarriesTheIdentity) {
  const auto s = tileops::nvrtc::plan_scan(problem(ScanOp::Prod, c10::kHalf, c10::kFloat, 4, 1 << 20, 1), h200());
  EXPECT_EQ(s.name(), "scan_rows_chained__cumprod__f16_f32__v8_t256_c4__sm_90a");
  const auto t = tileops::nvrtc::plan_scan(problem(ScanOp::Sum, c10::kBool, c10::kLong, 8, 16, 64), h200());
  EXPECT_EQ(t.name(), "scan_cols__cumsum__b8_i64__v16__sm_90a");
  const auto u = tileops::nvrtc::plan_scan(problem(ScanOp::LogSumExp, c10::kDouble, c10::kDouble, 8, 6, 1), h200());
  EXPECT_EQ(u.name(), "scan_rows__logcumsumexp__f64_f64__v2_t4_r64__sm_90a");
}

}  // namespace
