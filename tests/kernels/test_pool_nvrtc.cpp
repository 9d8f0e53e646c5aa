// The pool kernels (src/kernels/pool/pool_fwd.cuh) compile with NVRTC to CUBIN for sm_80 and sm_90a
// in every specialisation the plans take (no GPU needed), small windows written into the code
// included, and the plan and the launch geometry are pure functions of the problem, the call's sizes
// and params and the device facts; the int index path's dividers are exact.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <tuple>

#include "jit/cuda_driver.h"
#include "kernels/common/int_divider.cuh"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/nvrtc/pool/pool.h"
#include "nvrtc_compile_support.h"

namespace {

using tileops::test::facts_for;

using tileops::nvrtc::PoolGeometry;
using tileops::nvrtc::PoolMode;
using tileops::nvrtc::PoolProblem;
using tileops::nvrtc::PoolSpec;
using tileops::nvrtc::PoolWindowParams;

// The window of a call (pool_geometry's shorthands), as the problem records it.
PoolWindowParams window_of(int rank, c10::IntArrayRef kernel, c10::IntArrayRef stride, c10::IntArrayRef pad,
                           c10::IntArrayRef dil) {
  const std::vector<int64_t> in(rank + 2, 64), out(rank + 2, 8);
  return tileops::nvrtc::pool_small_window(tileops::nvrtc::pool_geometry(in, out, rank, kernel, stride, pad, dil));
}

// The problems the registered ops pose: avg/max over 1, 2 and 3 dims, and the adaptive 2-D pools,
// each with int and long long index math.
std::vector<PoolProblem> all_problems() {
  std::vector<PoolProblem> out;
  for (auto dtype : {c10::kHalf, c10::kBFloat16, c10::kFloat})
    for (int bits : {32, 64}) {
      for (int rank = 1; rank <= 3; ++rank)
        for (auto mode : {PoolMode::Avg, PoolMode::Max}) out.push_back({dtype, rank, mode, false, bits});
      for (auto mode : {PoolMode::Avg, PoolMode::Max}) out.push_back({dtype, 2, mode, true, bits});
      // small windows in the code: a padded 3x3 (x3) stride 2, and the largest (128 taps, dilated)
      for (int rank = 1; rank <= 3; ++rank)
        for (auto mode : {PoolMode::Avg, PoolMode::Max}) {
          out.push_back({dtype, rank, mode, false, bits, window_of(rank, {3}, {2}, {1}, {})});
          if (mode == PoolMode::Max && rank == 1) out.push_back({dtype, 1, mode, false, bits, window_of(1, {128}, {1}, {0}, {2})});
        }
      // pools whose neighbouring outputs read one 16-byte vector a row (pool_wide_outputs), one of
      // them with a tap past the vector (4 wide, padding 1)
      const int wide = 16 / static_cast<int>(c10::elementSize(dtype)) / 2;
      for (auto mode : {PoolMode::Avg, PoolMode::Max}) {
        for (int rank = 1; rank <= 3; ++rank)
          out.push_back({dtype, rank, mode, false, bits, window_of(rank, {3}, {2}, {1}, {}), 0, wide});
        out.push_back({dtype, 2, mode, false, bits, window_of(2, {2}, {2}, {0}, {}), 0, wide});
        out.push_back({dtype, 1, mode, false, bits, window_of(1, {4}, {2}, {1}, {}), 0, wide});
      }
      // windows of 32+ taps in a row: 8, 16 or 32 lanes an output
      for (int rank = 1; rank <= 3; ++rank)
        for (auto mode : {PoolMode::Avg, PoolMode::Max}) out.push_back({dtype, rank, mode, false, bits, {}, 4 << rank});
      for (auto mode : {PoolMode::Avg, PoolMode::Max}) out.push_back({dtype, 2, mode, true, bits, {}, 8});
    }
  return out;
}

class PoolCompiles : public ::testing::TestWithParam<std::tuple<PoolProblem, const char*>> {};

TEST_P(PoolCompiles, ToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto& [q, arch] = GetParam();
  const PoolSpec s = tileops::nvrtc::plan_pool(q, facts_for(arch));
  const auto sources = s.sources();
  ASSERT_EQ(sources.size(), 1u);
  const auto cubin = tileops::jit::compile_to_cubin(sources[0]);
  ASSERT_GT(cubin.image.size(), 4u);
  EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
  EXPECT_NE(cubin.lowered_name.find(q.lanes ? "pool_fwd_warp" : q.wide ? "pool_fwd_wide" : "pool_fwd"),
            std::string::npos) << cubin.lowered_name;
  EXPECT_NE(sources[0].name.find(arch), std::string::npos);
}

std::string PoolCaseName(const ::testing::TestParamInfo<PoolCompiles::ParamType>& info) {
  const PoolProblem& q = std::get<0>(info.param);
  return std::string(q.adaptive ? "adaptive_" : "") + (q.mode == PoolMode::Avg ? "avg" : "max") +
         std::to_string(q.rank) + "d_" + tileops::nvrtc::short_type_name(q.dtype) + "_i" +
         std::to_string(q.index_bits) + (q.window[0] ? "_k" + std::to_string(q.window[2]) : "") + (q.lanes ? "_g" + std::to_string(q.lanes) : "") +
         (q.wide ? "_s" + std::to_string(q.window[5]) + "w" + std::to_string(q.wide) : "") + "_" +
         std::get<1>(info.param);
}

INSTANTIATE_TEST_SUITE_P(Archs, PoolCompiles,
                         ::testing::Combine(::testing::ValuesIn(all_problems()), ::testing::Values("sm_80", "sm_90a")),
                         PoolCaseName);

TEST(PoolPlan, IsThePoolKernelOfTheProblemOnTheDevice) {
  const tileops::nvrtc::DeviceFacts h200 = tileops::nvrtc::named_device_facts("h200");
  std::set<std::string> names;
  for (const PoolProblem& q : all_problems()) {
    const PoolSpec s = tileops::nvrtc::plan_pool(q, h200);
    EXPECT_EQ(s.dtype, q.dtype);
    EXPECT_EQ(s.rank, q.rank);
    EXPECT_EQ(s.mode, q.mode);
    EXPECT_EQ(s.adaptive, q.adaptive);
    EXPECT_EQ(s.index_bits, q.index_bits);
    EXPECT_EQ(s.threads, 256);
    EXPECT_EQ(s.arch, "sm_90a");
    EXPECT_EQ(s.lanes, q.lanes);
    EXPECT_EQ(s.window, q.window);  // the small window goes into the code
    EXPECT_TRUE(s == tileops::nvrtc::plan_pool(q, h200));  // pure: same problem, same spec
    names.insert(tileops::nvrtc::pool_name(s));
  }
  EXPECT_EQ(names.size(), all_problems().size());  // one kernel name per specialisation
  const PoolSpec a = tileops::nvrtc::plan_pool({c10::kHalf, 2, PoolMode::Max, true, 32}, h200);
  EXPECT_EQ(tileops::nvrtc::pool_name(a), "adaptive_max_pool2d_fwd__f16__i32__t256__sm_90a");
  EXPECT_EQ(tileops::nvrtc::pool_source(a).name_expression, "tileops::pool_fwd<tileops::f16, int, 2, 1, true>");
  const PoolSpec b = tileops::nvrtc::plan_pool({c10::kFloat, 3, PoolMode::Avg, false, 64}, h200);
  EXPECT_EQ(tileops::nvrtc::pool_source(b).name_expression, "tileops::pool_fwd<float, long long, 3, 0, false>");
  const PoolSpec stem =
      tileops::nvrtc::plan_pool({c10::kHalf, 2, PoolMode::Max, false, 32, window_of(2, {3}, {2}, {1}, {1})}, h200);
  EXPECT_EQ(tileops::nvrtc::pool_name(stem), "max_pool2d_fwd__f16__i32__t256__k3x3s2x2p1x1d1x1__sm_90a");
  EXPECT_EQ(tileops::nvrtc::pool_source(stem).name_expression,
            "tileops::pool_fwd<tileops::f16, int, 2, 1, false, tileops::PoolWindow<1,3,3,1,2,2,0,1,1,1,1,1>>");
}

TEST(PoolPlan, WideWindowsTakeLanesAnOutputTheirWindowFromTheCall) {
  const tileops::nvrtc::DeviceFacts h200 = tileops::nvrtc::named_device_facts("h200");
  // textcnn's global max_pool1d: 128 taps, which the thread kernel would also have held in its code
  const PoolSpec s = tileops::nvrtc::plan_pool(
      {c10::kHalf, 1, PoolMode::Max, false, 32, window_of(1, {128}, {1}, {0}, {}), 16}, h200);
  EXPECT_EQ(s.lanes, 16);
  EXPECT_FALSE(s.fixed_window());  // one kernel for every wide window
  EXPECT_EQ(s.outputs_a_thread(), 1);
  EXPECT_EQ(s.items_a_cta(), 256 / 16);
  EXPECT_EQ(tileops::nvrtc::pool_name(s), "max_pool1d_fwd__f16__i32__t256__g16__sm_90a");
  EXPECT_EQ(tileops::nvrtc::pool_source(s).name_expression,
            "tileops::pool_fwd_warp<tileops::f16, int, 1, 1, false, 16>");
  const PoolSpec t = tileops::nvrtc::plan_pool({c10::kHalf, 1, PoolMode::Max, false, 32}, h200);
  EXPECT_EQ(t.lanes, 0);
  EXPECT_EQ(t.items_a_cta(), 256);
  EXPECT_FALSE(s == t);
  EXPECT_NE(s.hash(), t.hash());
}

TEST(PoolLanes, ThirtyTwoTapsInARowWholeTrailingDimsJoined) {
  using tileops::nvrtc::pool_geometry;
  using tileops::nvrtc::pool_lanes;
  // 1-d: the last dim's taps, dilated or not; 8 lanes up to 64 taps, 16 up to 256, then 32
  EXPECT_EQ(pool_lanes(pool_geometry({64, 256, 128}, {64, 256, 1}, 1, {128}, {1}, {0}, {1}), false), 16);
  EXPECT_EQ(pool_lanes(pool_geometry({4, 8, 301}, {4, 8, 10}, 1, {32}, {30}, {0}, {2}), false), 8);
  EXPECT_EQ(pool_lanes(pool_geometry({4, 8, 301}, {4, 8, 10}, 1, {31}, {30}, {0}, {1}), false), 0);
  EXPECT_EQ(pool_lanes(pool_geometry({4, 8, 301}, {4, 8, 10}, 1, {65}, {30}, {0}, {1}), false), 16);
  EXPECT_EQ(pool_lanes(pool_geometry({4, 8, 301}, {4, 8, 1}, 1, {257}, {30}, {0}, {1}), false), 32);
  // 2-d: a 3x3 window is 3 taps in a row; a [3, 40] one 40
  EXPECT_EQ(pool_lanes(pool_geometry({2, 8, 40, 41}, {2, 8, 19, 19}, 2, {3}, {2}, {1}, {1}), false), 0);
  EXPECT_EQ(pool_lanes(pool_geometry({2, 8, 40, 41}, {2, 8, 38, 2}, 2, {3, 40}, {1}, {0}, {1}), false), 8);
  // a 7x7 window over a 7x7 plane covers the last dim whole: its 49 taps are one row
  EXPECT_EQ(pool_lanes(pool_geometry({8, 64, 7, 7}, {8, 64, 1, 1}, 2, {7}, {1}, {0}, {1}), false), 8);
  // ... but not with padding (windows past the plane) or dilation across rows
  EXPECT_EQ(pool_lanes(pool_geometry({8, 64, 7, 7}, {8, 64, 1, 1}, 2, {7}, {7}, {1}, {1}), false), 0);
  EXPECT_EQ(pool_lanes(pool_geometry({8, 64, 7, 7}, {8, 64, 1, 1}, 2, {4, 7}, {1}, {0}, {2, 1}), false), 0);
  // adaptive: a global pool joins the plane; a 7x7 grid over 55x57 is 9 taps in a row
  EXPECT_EQ(pool_lanes(pool_geometry({8, 2048, 7, 7}, {8, 2048, 1, 1}, 2, {}, {}, {}, {}), true), 8);
  EXPECT_EQ(pool_lanes(pool_geometry({2, 64, 55, 57}, {2, 64, 7, 7}, 2, {}, {}, {}, {}), true), 0);
  // a [7, 1] grid: each bin's rows (8 at most) of 57 whole: up to 456 taps in a row
  EXPECT_EQ(pool_lanes(pool_geometry({2, 64, 55, 57}, {2, 64, 7, 1}, 2, {}, {}, {}, {}), true), 32);
  EXPECT_EQ(pool_lanes(pool_geometry({2, 64, 8, 3}, {2, 64, 1, 3}, 2, {}, {}, {}, {}), true), 0);
  // 3-d: dims 1 and 2 whole (6 x 5), dim 0 two taps: 60
  EXPECT_EQ(tileops::nvrtc::pool_row_taps(
                pool_geometry({1, 2, 8, 6, 5}, {1, 2, 4, 1, 1}, 3, {2, 6, 5}, {2, 6, 5}, {0}, {1}), false),
            60);
}

TEST(PoolSmallWindow, HoldsWindowsOfAtMost128TapsAndValuesBelow256) {
  // dims before the op's get kernel 1, stride 1, pad 0, dilation 1
  const PoolWindowParams w = window_of(2, {3, 5}, {2, 1}, {1, 2}, {1, 2});
  const PoolWindowParams expect = {1, 3, 5, 1, 2, 1, 0, 1, 2, 1, 1, 2};
  EXPECT_EQ(w, expect);
  EXPECT_NE(window_of(1, {128}, {1}, {0}, {})[0], 0);
  EXPECT_EQ(window_of(1, {129}, {1}, {0}, {})[0], 0);          // 129 taps
  EXPECT_EQ(window_of(2, {12}, {1}, {0}, {})[0], 0);           // 144 taps
  EXPECT_EQ(window_of(1, {3}, {256}, {0}, {})[0], 0);          // a stride of 256
  EXPECT_EQ(window_of(1, {3}, {1}, {0}, {255})[11], 255);      // a dilation of 255 (the op's dim: last)
  EXPECT_EQ(window_of(1, {3}, {1}, {1}, {255})[8], 1);         // its padding
  EXPECT_EQ(window_of(1, {int64_t{1} << 33}, {1}, {0}, {})[0], 0);
}

TEST(IntDivider, ExactForDividendsBelow2To31) {
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 3000; ++d) divisors.push_back(d);
  for (int s = 12; s <= 31; ++s)
    for (int64_t e : {-1, 0, 1}) divisors.push_back(static_cast<uint32_t>((int64_t{1} << s) + e));
  divisors.back() = 0x80000000u;  // 2^31 itself (2^31 + 1 is past the range)
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) divisors.push_back(1 + rng() % 0x7fffffffu);
  for (uint32_t d : divisors) {
    const tileops::IntDivider v = tileops::make_int_divider(d);
    std::vector<uint32_t> ns = {0, 1, d - 1, d, d + 1, 0x7fffffffu, 0x7ffffffeu, 0x40000000u};
    for (uint32_t k : {2u, 3u, 1000u, 0x7fffffffu / d}) {
      const uint64_t m = uint64_t{k} * d;
      for (int64_t e : {-1, 0, 1})
        if (m + e < 0x80000000ull) ns.push_back(static_cast<uint32_t>(m + e));
    }
    for (int i = 0; i < 200; ++i) ns.push_back(rng() & 0x7fffffffu);
    for (uint32_t n : ns) {
      if (n >= 0x80000000u) continue;
      ASSERT_EQ(tileops::int_divide(n, v), n / d) << n << " / " << d;
    }
  }
}

TEST(PoolDividers, OneForEachOutputDimTheLastInWorkItems) {
  const PoolGeometry g = tileops::nvrtc::pool_geometry({2, 3, 9, 11}, {2, 3, 4, 3}, 2, {3}, {}, {1, 0}, {});
  for (int per_thread : {1, 2}) {
    const tileops::nvrtc::PoolDividers p = tileops::nvrtc::pool_dividers(g, per_thread);
    for (int j = 0; j < 3; ++j) {
      const int64_t n = j == 2 ? (g.out[2] + per_thread - 1) / per_thread : g.out[j];  // 3 outputs: 2 pairs
      const tileops::IntDivider v = tileops::make_int_divider(static_cast<uint32_t>(n));
      EXPECT_EQ(p.out[j][0], v.magic) << j;
      EXPECT_EQ(p.out[j][1], v.shift) << j;
    }
  }
  EXPECT_EQ(tileops::int_divide(11, tileops::IntDivider{tileops::nvrtc::pool_dividers(g, 1).out[1][0],
                                                        tileops::nvrtc::pool_dividers(g, 1).out[1][1]}),
            2u);  // 11 / 4
  // work items: 2 * 3 * 4 rows of 3 outputs; in pairs, 2 a row
  EXPECT_EQ(tileops::nvrtc::pool_units(2 * 3 * 4 * 3, g, 1), 72);
  EXPECT_EQ(tileops::nvrtc::pool_units(2 * 3 * 4 * 3, g, 2), 48);
  EXPECT_EQ(tileops::nvrtc::pool_units(0, g, 2), 0);
}

TEST(PoolPlan, MaxPoolsWithAFixedWindowTakeTwoOutputsAThreadOnLongRows) {
  const tileops::nvrtc::DeviceFacts h200 = tileops::nvrtc::named_device_facts("h200");
  const PoolWindowParams w = window_of(2, {3}, {2}, {1}, {1});
  EXPECT_EQ(tileops::nvrtc::plan_pool({c10::kHalf, 2, PoolMode::Max, false, 32, w}, h200).outputs_a_thread(), 2);
  EXPECT_EQ(tileops::nvrtc::plan_pool({c10::kHalf, 2, PoolMode::Avg, false, 32, w}, h200).outputs_a_thread(), 1);
  EXPECT_EQ(tileops::nvrtc::plan_pool({c10::kHalf, 2, PoolMode::Max, false, 32}, h200).outputs_a_thread(), 1);
  EXPECT_EQ(tileops::nvrtc::plan_pool({c10::kHalf, 2, PoolMode::Max, true, 32}, h200).outputs_a_thread(), 1);
  // rows of fewer than 64 outputs (alexnet's 27): one, a kernel of its own that compiles
  const PoolSpec s = tileops::nvrtc::plan_pool({c10::kHalf, 2, PoolMode::Max, false, 32, w, 0, 0, true}, h200);
  EXPECT_EQ(s.outputs_a_thread(), 1);
  EXPECT_FALSE(s == tileops::nvrtc::plan_pool({c10::kHalf, 2, PoolMode::Max, false, 32, w}, h200));
  const auto src = tileops::nvrtc::pool_source(s);
  EXPECT_NE(src.name.find("__p1"), std::string::npos) << src.name;
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  EXPECT_EQ(tileops::jit::compile_to_cubin(src).image.substr(0, 4), std::string("\x7f" "ELF"));
  // avg pools and wide rows are not paired either way
  EXPECT_FALSE(tileops::nvrtc::plan_pool({c10::kHalf, 2, PoolMode::Avg, false, 32, w, 0, 0, true}, h200).single);
  const PoolSpec wide = tileops::nvrtc::plan_pool({c10::kHalf, 2, PoolMode::Max, false, 32, w, 0, 4, true}, h200);
  EXPECT_FALSE(wide.single);
  EXPECT_EQ(wide.outputs_a_thread(), 4);
  // TILEOPS_TUNE=pool_max_outputs=N decides alone
  tileops::nvrtc::Tuning one, two;
  one.pool_max_outputs = 1;
  two.pool_max_outputs = 2;
  EXPECT_EQ(tileops::nvrtc::plan_pool({c10::kHalf, 2, PoolMode::Max, false, 32, w}, h200, one).outputs_a_thread(), 1);
  EXPECT_EQ(tileops::nvrtc::plan_pool({c10::kHalf, 2, PoolMode::Max, false, 32, w, 0, 0, true}, h200, two)
                .outputs_a_thread(),
            2);
  // the rule: alexnet-ceil's rows of 27 are short, sincnet's 1365 and a row of 64 are not
  const PoolGeometry alexnet = tileops::nvrtc::pool_geometry({32, 64, 55, 55}, {32, 64, 27, 27}, 2, {3}, {2}, {0}, {1});
  EXPECT_TRUE(tileops::nvrtc::pool_short_rows(alexnet));
  EXPECT_FALSE(tileops::nvrtc::pool_short_rows(
      tileops::nvrtc::pool_geometry({32, 80, 4096}, {32, 80, 1365}, 1, {3}, {3}, {0}, {1})));
  EXPECT_FALSE(tileops::nvrtc::pool_short_rows(tileops::nvrtc::pool_geometry({2, 128}, {2, 64}, 1, {2}, {}, {0}, {1})));
}

// The resnet stem's 3x3 / stride 2 / padding 1 and VGG's 2x2 / stride 2 read 4 16-bit outputs' taps
// (2 float32 ones') from one 16-byte vector a row, the padding's elements before it and, for windows
// longer than padding + stride, fewer than a vector's elements after it; avg and max alike.
TEST(PoolWideOutputs, WhereTheWindowsOfAVectorsOutputsLieAroundIt) {
  const tileops::nvrtc::DeviceFacts h200 = tileops::nvrtc::named_device_facts("h200");
  auto wide = [](c10::ScalarType t, int64_t in, int k, int s, int p, int d = 1, bool aligned = true,
                 int64_t outputs = int64_t{1} << 20) {
    const std::vector<int64_t> in_sizes{8, in, in}, out_sizes{8, 4, 4};
    const auto g = tileops::nvrtc::pool_geometry(in_sizes, out_sizes, 2, {k}, {s}, {p}, {d});
    return tileops::nvrtc::pool_wide_outputs(g, t, tileops::nvrtc::pool_small_window(g), aligned, outputs);
  };
  EXPECT_EQ(wide(c10::kHalf, 112, 3, 2, 1), 4);      // resnet stem
  EXPECT_EQ(wide(c10::kBFloat16, 112, 3, 2, 1), 4);
  EXPECT_EQ(wide(c10::kFloat, 112, 3, 2, 1), 2);
  EXPECT_EQ(wide(c10::kHalf, 64, 2, 2, 0), 4);       // VGG block
  EXPECT_EQ(wide(c10::kHalf, 64, 2, 1, 1), 8);       // stride 1, padded: 8 windows from 1 + 8 elements
  EXPECT_EQ(wide(c10::kHalf, 64, 2, 1, 0), 8);       // unpadded: the 8th window's last tap after the vector
  EXPECT_EQ(wide(c10::kHalf, 64, 3, 2, 0), 4);       // alexnet's 3x3 / 2 unpadded: a tap after the vector
  EXPECT_EQ(wide(c10::kHalf, 64, 5, 2, 2), 4);       // 5x5 / 2 / 2: one tap after the vector
  EXPECT_EQ(wide(c10::kHalf, 64, 5, 4, 2), 2);       // 5 / 4 / 2: 2 windows in 2 + 8 elements
  EXPECT_EQ(wide(c10::kFloat, 64, 7, 2, 0), 0);      // 5 taps after a 4-element vector
  EXPECT_EQ(wide(c10::kHalf, 64, 8, 8, 0), 0);       // one output a vector: nothing shared
  EXPECT_EQ(wide(c10::kHalf, 64, 6, 2, 8), 0);       // taps 8 before the vector: padding < 8
  EXPECT_EQ(wide(c10::kHalf, 114, 3, 2, 1), 0);      // rows that are not whole vectors
  EXPECT_EQ(wide(c10::kHalf, 112, 3, 2, 1, 2), 0);   // dilated
  EXPECT_EQ(wide(c10::kHalf, 112, 3, 2, 1, 1, false), 0);  // x not 16-byte aligned
  // windows that share no tap (VGG's 2x2 / 2) take it from 2^17 work items on; shared taps always
  EXPECT_EQ(wide(c10::kHalf, 64, 2, 2, 0, 1, true, int64_t{4} << 17), 4);
  EXPECT_EQ(wide(c10::kHalf, 64, 2, 2, 0, 1, true, (int64_t{4} << 17) - 1), 0);
  EXPECT_EQ(wide(c10::kFloat, 64, 2, 2, 0, 1, true, int64_t{2} << 17), 2);
  EXPECT_EQ(wide(c10::kHalf, 64, 3, 2, 1, 1, true, 4), 4);
  EXPECT_EQ(wide(c10::kHalf, 512, 300, 2, 1), 0);    // not a window the code holds
  const PoolWindowParams w = window_of(2, {3}, {2}, {1}, {1});
  const PoolSpec s = tileops::nvrtc::plan_pool({c10::kHalf, 2, PoolMode::Max, false, 32, w, 0, 4}, h200);
  EXPECT_EQ(s.wide, 4);
  EXPECT_EQ(s.outputs_a_thread(), 4);
  EXPECT_EQ(tileops::nvrtc::pool_name(s), "max_pool2d_fwd__f16__i32__t256__w4__k3x3s2x2p1x1d1x1__sm_90a");
  EXPECT_EQ(tileops::nvrtc::pool_source(s).name_expression,
            "tileops::pool_fwd_wide<tileops::f16, int, 2, 1, tileops::PoolWindow<1,3,3,1,2,2,0,1,1,1,1,1>>");
  EXPECT_EQ(tileops::nvrtc::pool_units(8 * 56 * 56, tileops::nvrtc::pool_geometry({8, 112, 112}, {8, 56, 56}, 2, {3},
                                                                                   {2}, {1}, {}),
                                       4),
            8 * 56 * 14);
  const PoolSpec avg = tileops::nvrtc::plan_pool({c10::kHalf, 2, PoolMode::Avg, false, 32, w, 0, 4}, h200);
  EXPECT_EQ(avg.outputs_a_thread(), 4);
  EXPECT_EQ(tileops::nvrtc::pool_name(avg), "avg_pool2d_fwd__f16__i32__t256__w4__k3x3s2x2p1x1d1x1__sm_90a");
  EXPECT_EQ(tileops::nvrtc::pool_source(avg).name_expression,
            "tileops::pool_fwd_wide<tileops::f16, int, 2, 0, tileops::PoolWindow<1,3,3,1,2,2,0,1,1,1,1,1>>");
  // a problem without a window in the code never takes it
  EXPECT_EQ(tileops::nvrtc::plan_pool({c10::kHalf, 2, PoolMode::Max, false, 32, {}, 0, 4}, h200).wide, 0);
}

// Small calls launch CTAs of fewer threads (at least 4 CTAs an SM, down to 64 threads); the kernel's
// loops do not depend on the CTA's size.
TEST(PoolCtaThreads, FourCtasAnSmDownTo64Threads) {
  using tileops::nvrtc::pool_cta_threads;
  EXPECT_EQ(pool_cta_threads(int64_t{8} * 64 * 56 * 14, 132, 256), 256);  // resnet stem's work items
  EXPECT_EQ(pool_cta_threads(int64_t{4} * 132 * 256, 132, 256), 256);
  EXPECT_EQ(pool_cta_threads(int64_t{4} * 132 * 256 - 1, 132, 256), 128);
  EXPECT_EQ(pool_cta_threads(100352, 132, 256), 128);  // 784 CTAs
  EXPECT_EQ(pool_cta_threads(50176, 132, 256), 64);
  EXPECT_EQ(pool_cta_threads(1, 132, 256), 64);
  EXPECT_EQ(pool_cta_threads(1, 0, 256), 256);  // no device facts: the most
  EXPECT_EQ(tileops::nvrtc::pool_grid(50176, 64), 784u);
}

TEST(PoolIndexBits, IntOnlyWhereNoIndexOrProductCanReach2To30) {
  using tileops::nvrtc::pool_geometry;
  using tileops::nvrtc::pool_index_bits;
  // resnet stem max_pool2d: small everything
  const PoolGeometry stem = pool_geometry({32, 64, 112, 112}, {32, 64, 56, 56}, 2, {3}, {2}, {1}, {1});
  EXPECT_EQ(pool_index_bits(32LL * 64 * 112 * 112, 32LL * 64 * 56 * 56, stem), 32);
  // a tensor of 2^30 elements or more: long long
  EXPECT_EQ(pool_index_bits(int64_t{1} << 30, 1, stem), 64);
  EXPECT_EQ(pool_index_bits(1, int64_t{1} << 30, stem), 64);
  // an adaptive bin bound (o + 1) * in past 2^30 though both tensors are small
  const PoolGeometry wide = pool_geometry({1, 1, 1, 40000}, {1, 1, 1, 30000}, 2, {}, {}, {}, {});
  EXPECT_EQ(pool_index_bits(40000, 30000, wide), 64);
  // a huge kernel over padding (valid for torch: padding <= kernel / 2) or a huge stride
  const PoolGeometry kernel = pool_geometry({1, 1, 5}, {1, 1, 1}, 1, {int64_t{1} << 31}, {1}, {int64_t{1} << 30}, {1});
  EXPECT_EQ(pool_index_bits(5, 1, kernel), 64);
  const PoolGeometry stride = pool_geometry({1, 1, 5}, {1, 1, 1}, 1, {2}, {int64_t{1} << 40}, {0}, {1});
  EXPECT_EQ(pool_index_bits(5, 1, stride), 64);
}

TEST(PoolGeometry, PutsTheSpatialDimsLastAndReadsTorchsShorthands) {
  // avg_pool2d([2, 3, 9, 11], kernel_size=[3] (both dims), stride=None, padding=[1, 0])
  const PoolGeometry g = tileops::nvrtc::pool_geometry({2, 3, 9, 11}, {2, 3, 4, 3}, 2, {3}, {}, {1, 0}, {});
  const int64_t in[3] = {1, 9, 11}, out[3] = {1, 4, 3}, k[3] = {1, 3, 3}, s[3] = {1, 3, 3}, p[3] = {0, 1, 0},
                d[3] = {1, 1, 1};
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(g.in[j], in[j]) << j;
    EXPECT_EQ(g.out[j], out[j]) << j;
    EXPECT_EQ(g.kernel[j], k[j]) << j;
    EXPECT_EQ(g.stride[j], s[j]) << j;
    EXPECT_EQ(g.pad[j], p[j]) << j;
    EXPECT_EQ(g.dil[j], d[j]) << j;
  }
  // max_pool1d on an unbatched [C, L] input, dilation 2, stride 1
  const PoolGeometry m = tileops::nvrtc::pool_geometry({5, 17}, {5, 13}, 1, {3}, {1}, {0}, {2});
  EXPECT_EQ(m.in[2], 17);
  EXPECT_EQ(m.out[2], 13);
  EXPECT_EQ(m.kernel[2], 3);
  EXPECT_EQ(m.stride[2], 1);
  EXPECT_EQ(m.dil[2], 2);
  EXPECT_EQ(m.in[0] * m.in[1] * m.out[0] * m.out[1], 1);
  // 3-D: every dim its own
  const PoolGeometry v = tileops::nvrtc::pool_geometry({1, 2, 5, 6, 7}, {1, 2, 2, 3, 4}, 3, {1, 2, 3}, {2, 2, 2},
                                                       {0, 1, 1}, {1, 1, 1});
  EXPECT_EQ(v.kernel[0], 1);
  EXPECT_EQ(v.kernel[2], 3);
  EXPECT_EQ(v.pad[1], 1);
  EXPECT_EQ(v.in[0], 5);
  EXPECT_EQ(v.out[2], 4);
  // adaptive: sizes only
  const PoolGeometry a = tileops::nvrtc::pool_geometry({8, 64, 55, 57}, {8, 64, 7, 7}, 2, {}, {}, {}, {});
  EXPECT_EQ(a.in[1], 55);
  EXPECT_EQ(a.out[2], 7);
}

TEST(PoolGrid, OneThreadAnOutputCappedAtTheGridLimit) {
  EXPECT_EQ(tileops::nvrtc::pool_grid(1, 256), 1u);
  EXPECT_EQ(tileops::nvrtc::pool_grid(256, 256), 1u);
  EXPECT_EQ(tileops::nvrtc::pool_grid(257, 256), 2u);
  EXPECT_EQ(tileops::nvrtc::pool_grid(int64_t{1} << 45, 256), 0x7fffffffu);  // the kernel strides the rest
}

TEST(PoolIndicesCompiles, EveryDtypeIndexTypeBinRuleAndWindowKindToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  using tileops::nvrtc::PoolWindowParams;
  // the resnet stem's 3x3 / 2 / 1 in each rank (dims before the op's: 1, 1, 0, 1)
  const PoolWindowParams stem[3] = {{1, 1, 3, 1, 1, 2, 0, 0, 1, 1, 1, 1},
                                    {1, 3, 3, 1, 2, 2, 0, 1, 1, 1, 1, 1},
                                    {3, 3, 3, 2, 2, 2, 1, 1, 1, 1, 1, 1}};
  std::set<std::string> names;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    for (const c10::ScalarType dtype : {c10::kHalf, c10::kBFloat16, c10::kFloat}) {
      for (const int bits : {32, 64}) {
        const int rank = 1 + static_cast<int>(names.size() / 3) % 3;  // every rank across the loop
        for (const tileops::nvrtc::PoolIndicesSpec& s :
             {tileops::nvrtc::PoolIndicesSpec{dtype, 2, true, bits, arch},                // adaptive bins
              tileops::nvrtc::PoolIndicesSpec{dtype, rank, false, bits, arch},            // window of the call
              tileops::nvrtc::PoolIndicesSpec{dtype, rank, false, bits, arch, stem[rank - 1]}}) {  // in the code
          const auto sources = s.sources();
          ASSERT_EQ(sources.size(), 1u);
          EXPECT_TRUE(names.insert(sources[0].name).second) << sources[0].name;
          const auto cubin = tileops::jit::compile_to_cubin(sources[0]);
          EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF")) << sources[0].name;
          EXPECT_NE(cubin.lowered_name.find("pool_max_indices_fwd"), std::string::npos) << cubin.lowered_name;
          EXPECT_EQ(sources[0].name.find("__k3") != std::string::npos, s.fixed_window()) << sources[0].name;
        }
      }
    }
  }
  EXPECT_EQ(names.size(), 36u);
}

TEST(PoolIndicesSpec, AdaptiveBinsRefuseAFixedWindow) {
  const tileops::nvrtc::PoolIndicesSpec s{c10::kHalf, 2, true, 32, "sm_90a", {1, 2, 2, 1, 2, 2, 0, 0, 0, 1, 1, 1}};
  EXPECT_THROW(s.sources(), c10::Error);
}

}  // namespace
