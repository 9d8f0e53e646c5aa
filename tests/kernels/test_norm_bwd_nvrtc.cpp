// The RMSNorm/LayerNorm backward kernels compile with NVRTC to CUBIN for sm_80 and sm_90a (no GPU
// needed) without register spills under the launch bounds the planner sets, and the planner picks
// the specialisations and grids the design asks for (src/kernels/norm/norm_bwd_common.cuh).
#include <gtest/gtest.h>

#include <cfloat>
#include <cstdlib>
#include <set>
#include <string>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/norm/norm_bwd.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "nvrtc_compile_support.h"

namespace {

using tileops::test::strict;

using tileops::nvrtc::DeviceFacts;
using NormBwdPlan = tileops::nvrtc::NormBwdSpec;

// The spec of a problem on a device whose shared memory leaves `smem_budget` for stages (the H200's
// by default), compiled for `arch`.
NormBwdPlan plan_norm_bwd(c10::ScalarType dtype, int64_t n, bool layer, bool weight, bool dw, bool db, int max_vec,
                          int smem_budget = tileops::nvrtc::kNormBwdSmemBudget, const char* arch = "sm_90a") {
  DeviceFacts dev = tileops::nvrtc::named_device_facts("h200");
  dev.max_smem_optin = smem_budget + tileops::nvrtc::kNormBwdStaticSmem;
  dev.arch = arch;
  return tileops::nvrtc::plan_norm_bwd(tileops::nvrtc::NormBwdProblem{layer, dtype, n, max_vec, weight, dw, db}, dev);
}
tileops::jit::KernelSource norm_bwd_source(NormBwdPlan p, const char* arch) {
  p.arch = arch;
  return p.sources()[0];
}
std::string norm_bwd_name(NormBwdPlan p, const char* arch) {
  p.arch = arch;
  return p.name();
}
// An SM of `smem` bytes of shared memory (threads, blocks, reserved as on the H200).
DeviceFacts sm_of(int threads, int blocks, int smem, int reserved, int sm_count = 132) {
  DeviceFacts d = tileops::nvrtc::named_device_facts("h200");
  d.threads_per_sm = threads;
  d.blocks_per_sm = blocks;
  d.smem_per_sm = smem;
  d.reserved_smem = reserved;
  d.sm_count = sm_count;
  return d;
}

struct BwdCase {
  c10::ScalarType dtype;
  int64_t n;
  bool layer, weight, dw, db;
  int max_vec;     // alignment of the pointers, in elements
  const char* what;
};

std::string case_name(const BwdCase& c) {
  return std::string(c.layer ? "ln_" : "rms_") + tileops::nvrtc::short_type_name(c.dtype) + "_n" +
         std::to_string(c.n) + "_v" + std::to_string(c.max_vec) + (c.weight ? "_w" : "_nw") + (c.dw ? "_dw" : "") +
         (c.db ? "_db" : "");
}

const BwdCase kCases[] = {
    {c10::kBFloat16, 4096, false, true, true, false, 8, "llama rows, staged, register partials"},
    {c10::kBFloat16, 4096, true, true, true, true, 8, "layer norm, both partial rows"},
    {c10::kBFloat16, 4096, false, true, false, false, 8, "_without_dweight: no partials"},
    {c10::kHalf, 1000, false, false, true, false, 8, "tail vectors, 8 rows per CTA"},
    {c10::kFloat, 64, true, true, true, false, 4, "tiny rows: 64 row groups per CTA"},
    {c10::kBFloat16, 16384, true, true, true, true, 8, "160 KB of stages"},
    {c10::kFloat, 8192, false, true, true, false, 4, "fp32 staged"},
    {c10::kBFloat16, 65536, false, true, true, false, 8, "streaming, workspace partials"},
    {c10::kFloat, 262144, true, false, true, true, 4, "streaming layer norm"},
    {c10::kHalf, 4095, true, true, true, true, 1, "odd row: 2-byte accesses from global memory"},
    {c10::kBFloat16, 2048, false, true, true, false, 2, "4-byte cp.async"},
    {c10::kHalf, 1024, true, false, false, true, 4, "dbias only, 8-byte cp.async"},
};

class NormBwdCompiles : public ::testing::TestWithParam<std::tuple<BwdCase, const char*>> {};

TEST_P(NormBwdCompiles, ToCubinWithoutSpills) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto& [c, arch] = GetParam();
  const NormBwdPlan p = plan_norm_bwd(c.dtype, c.n, c.layer, c.weight, c.dw, c.db, c.max_vec);
  const auto src = norm_bwd_source(p, arch);
  SCOPED_TRACE(c.what + std::string(": ") + src.name);
  const auto cubin = tileops::jit::compile_to_cubin(strict(src));
  EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
  EXPECT_NE(cubin.lowered_name.find(c.layer ? "layer_norm_bwd" : "rms_norm_bwd"), std::string::npos);
  EXPECT_NE(src.name.find(arch), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Archs, NormBwdCompiles,
                         ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Values("sm_80", "sm_90a")),
                         [](const auto& info) {
                           return case_name(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
                         });

// Every plan tests/kernels/test_norm_bwd_gpu.py reaches (row lengths x dtypes x weight x branches x
// alignments), for both archs, without spills. Minutes of NVRTC: only with TILEOPS_NVRTC_EXHAUSTIVE=1;
// TILEOPS_NVRTC_EXHAUSTIVE_MATCH=<text> compiles only the kernels whose name contains it.
TEST(NormBwdCompilesExhaustive, EveryPlanTheGpuTestsUse) {
  if (!std::getenv("TILEOPS_NVRTC_EXHAUSTIVE")) GTEST_SKIP() << "set TILEOPS_NVRTC_EXHAUSTIVE=1";
  const char* match = std::getenv("TILEOPS_NVRTC_EXHAUSTIVE_MATCH");
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  std::set<std::string> done;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    for (auto dtype : {c10::kHalf, c10::kBFloat16, c10::kFloat}) {
      const int full = 16 / static_cast<int>(c10::elementSize(dtype));
      for (int64_t n : {64, 1000, 4096, 8192, 65536, 262144, 256, 512, 4095, 231, 3072, 1234, 1536}) {
        for (int max_vec = full; max_vec >= 1; max_vec /= 2) {
          for (bool layer : {false, true}) {
            for (bool weight : {true, false}) {
              for (int grads = 0; grads < (layer ? 4 : 2); ++grads) {
                const auto p = plan_norm_bwd(dtype, n, layer, weight, grads & 1, grads & 2, max_vec);
                const auto src = norm_bwd_source(p, arch);
                if (!done.insert(src.name).second) continue;
                if (match && src.name.find(match) == std::string::npos) continue;
                SCOPED_TRACE(src.name);
                EXPECT_NO_THROW(tileops::jit::compile_to_cubin(strict(src)));
              }
            }
          }
        }
      }
    }
  }
}

class NormBwdReduceCompiles : public ::testing::TestWithParam<const char*> {};

TEST_P(NormBwdReduceCompiles, ToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const char* arch = GetParam();
  for (auto [dtype, dw, db] : {std::tuple{c10::kBFloat16, true, false}, std::tuple{c10::kHalf, true, true},
                               std::tuple{c10::kFloat, false, true}}) {
    const auto src = tileops::nvrtc::norm_bwd_reduce_source(dtype, dw, db, arch);
    const auto cubin = tileops::jit::compile_to_cubin(strict(src));
    EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
    EXPECT_NE(cubin.lowered_name.find("norm_bwd_reduce"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, NormBwdReduceCompiles, ::testing::Values("sm_80", "sm_90a"));

// A float32 weight beside a 16-bit row: its shared copy takes 4 bytes an element (the stage budget
// counts it), the kernels take it as their trailing template argument, dweight/dbias are summed into
// float32, and every such plan compiles without spills.
TEST(NormBwdFloatWeight, StagedAndStreamingPlansCompile) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const DeviceFacts dev = tileops::nvrtc::named_device_facts("h200");
  for (bool layer : {false, true}) {
    for (int64_t n : {int64_t{4096}, int64_t{1000}, int64_t{16384}, int64_t{65536}}) {
      for (int max_vec : {8, 1}) {
        tileops::nvrtc::NormBwdProblem q{layer, c10::kBFloat16, n, max_vec, true, true, layer};
        q.float_weight = true;
        const NormBwdPlan p = tileops::nvrtc::plan_norm_bwd(q, dev);
        q.float_weight = false;
        const NormBwdPlan same = tileops::nvrtc::plan_norm_bwd(q, dev);
        EXPECT_TRUE(p.float_weight);
        EXPECT_NE(p.name(), same.name());
        if (p.smem && same.smem) EXPECT_EQ(p.smem_bytes - same.smem_bytes, n * 2) << p.name();  // float32 weight copy
        EXPECT_NE(p.template_expression().find(", float>"), std::string::npos) << p.template_expression();
        const auto srcs = p.sources();
        ASSERT_EQ(srcs.size(), 2u);
        EXPECT_NE(srcs[1].name_expression.find("norm_bwd_reduce<float,"), std::string::npos) << srcs[1].name_expression;
        for (const char* arch : {"sm_80", "sm_90a"}) {
          SCOPED_TRACE(p.name() + " " + arch);
          const auto cubin = tileops::jit::compile_to_cubin(strict(norm_bwd_source(p, arch)));
          EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
        }
      }
    }
  }
}

TEST(NormBwdPlan, LlamaRowsAreStagedWithRegisterPartials) {
  const auto p = plan_norm_bwd(c10::kBFloat16, 4096, false, true, true, false, 8);
  EXPECT_EQ(p.vec, 8);
  EXPECT_EQ(p.tpr, 128);  // 4 vectors of 8 a thread
  EXPECT_EQ(p.rows, 2);   // 256-thread CTAs
  EXPECT_TRUE(p.smem);
  EXPECT_TRUE(p.acc_reg);
  EXPECT_EQ(p.smem_bytes, 2 * 2 * 2 * 4096 * 2 + 4096 * 2);  // two stages of two rows of x and dy, weight
  EXPECT_GE(p.min_blocks, 2);
  const auto ln = plan_norm_bwd(c10::kBFloat16, 4096, true, true, true, true, 8);
  EXPECT_TRUE(ln.smem && ln.acc_reg && ln.db);
  EXPECT_GE(ln.min_blocks, 2);
}

TEST(NormBwdPlan, AccessWidthFollowsRowAndAlignment) {
  EXPECT_EQ(plan_norm_bwd(c10::kHalf, 4095, false, true, true, false, 8).vec, 1);
  EXPECT_EQ(plan_norm_bwd(c10::kHalf, 4096, false, true, true, false, 2).vec, 2);
  EXPECT_EQ(plan_norm_bwd(c10::kFloat, 4096, false, true, true, false, 4).vec, 4);
  // 2-byte accesses cannot go through cp.async: the rows are read from global memory.
  EXPECT_FALSE(plan_norm_bwd(c10::kHalf, 4095, false, true, true, false, 8).smem);
}

TEST(NormBwdPlan, ShortRowsShareACtaLongRowsStream) {
  const auto small = plan_norm_bwd(c10::kBFloat16, 64, false, true, true, false, 8);
  EXPECT_LE(small.tpr, 32);
  EXPECT_EQ(small.threads(), 256);
  EXPECT_TRUE(small.acc_reg);
  const auto wide = plan_norm_bwd(c10::kBFloat16, 65536, false, true, true, false, 8);
  EXPECT_FALSE(wide.smem);
  EXPECT_FALSE(wide.acc_reg);  // partials in the workspace row
  EXPECT_EQ(wide.rows, 1);
  const auto huge = plan_norm_bwd(c10::kFloat, 1 << 20, true, true, true, true, 4);
  EXPECT_EQ(huge.tpr, 1024);
  EXPECT_FALSE(huge.acc_reg);
  for (const auto& c : kCases) {
    const auto p = plan_norm_bwd(c.dtype, c.n, c.layer, c.weight, c.dw, c.db, c.max_vec);
    SCOPED_TRACE(case_name(c));
    EXPECT_TRUE(p.acc_reg || p.rows == 1);
    EXPECT_LE(p.smem_bytes, tileops::nvrtc::kNormBwdSmemBudget);
    EXPECT_LE(p.threads(), 1024);
    EXPECT_GE(p.min_blocks, 1);
    EXPECT_LE(p.min_blocks * p.threads(), 2048);
  }
}

TEST(NormBwdPlan, SharedMemoryBudgetIsRespected) {
  // A device with 48 KB per block gets no 72 KB stages.
  const auto p = plan_norm_bwd(c10::kBFloat16, 4096, false, true, true, false, 8, 48 * 1024);
  EXPECT_FALSE(p.smem);
  EXPECT_LE(p.smem_bytes, 48 * 1024);
}

TEST(NormBwdPlan, GridIsFixedByPlanAndDevice) {
  const DeviceFacts h200 = sm_of(2048, 32, 228 * 1024, 1024);
  // Staged RMSNorm rows: one CTA an SM (measured faster than the min_blocks the registers allow).
  const auto p = plan_norm_bwd(c10::kBFloat16, 4096, false, true, true, false, 8);
  EXPECT_GE(p.min_blocks, 2);
  EXPECT_EQ(p.grid_per_sm, 1);
  EXPECT_EQ(tileops::nvrtc::norm_bwd_blocks_per_sm(p, h200), 1);
  EXPECT_EQ(tileops::nvrtc::norm_bwd_max_grid(p, h200), 132);
  // LayerNorm fills the SM up to min_blocks.
  const auto ln = plan_norm_bwd(c10::kBFloat16, 4096, true, true, true, true, 8);
  const int per_sm = tileops::nvrtc::norm_bwd_blocks_per_sm(ln, h200);
  EXPECT_GE(per_sm, 2);
  EXPECT_EQ(per_sm, ln.min_blocks);
  EXPECT_EQ(tileops::nvrtc::norm_bwd_max_grid(ln, h200), 132 * per_sm);
  // Not measured at one CTA an SM, so they keep min_blocks: unstaged rows (2-byte accesses), dx
  // alone (no partial rows), rows under 8 KB (several a CTA).
  const auto gm = plan_norm_bwd(c10::kHalf, 4095, false, true, true, false, 8);
  EXPECT_FALSE(gm.smem);
  EXPECT_EQ(gm.grid_per_sm, gm.min_blocks);
  const auto dx_only = plan_norm_bwd(c10::kBFloat16, 4096, false, true, false, false, 8);
  EXPECT_TRUE(dx_only.smem);
  EXPECT_EQ(dx_only.grid_per_sm, dx_only.min_blocks);
  EXPECT_GE(dx_only.min_blocks, 2);
  const auto short_rows = plan_norm_bwd(c10::kBFloat16, 1024, false, true, true, false, 8);
  EXPECT_TRUE(short_rows.smem);
  EXPECT_GT(short_rows.rows, 1);
  EXPECT_EQ(short_rows.grid_per_sm, short_rows.min_blocks);
  EXPECT_GE(short_rows.min_blocks, 2);
  EXPECT_EQ(plan_norm_bwd(c10::kFloat, 2048, false, true, true, false, 4).grid_per_sm, 1);  // 8 KB
  // Shared memory bounds the CTAs a SM holds.
  const DeviceFacts small = sm_of(2048, 32, 100 * 1024, 1024);
  EXPECT_LE(tileops::nvrtc::norm_bwd_blocks_per_sm(ln, small) * (ln.smem_bytes + tileops::nvrtc::kNormBwdStaticSmem),
            100 * 1024);
  EXPECT_LT(tileops::nvrtc::norm_bwd_blocks_per_sm(ln, small), per_sm);
  // Very long rows: the workspace [grid, n] stays within its budget.
  const auto huge = plan_norm_bwd(c10::kFloat, 1 << 20, true, true, true, true, 4);
  const int g = tileops::nvrtc::norm_bwd_max_grid(huge, h200);
  EXPECT_GE(g, 1);
  EXPECT_LE(int64_t{g} * (1 << 20) * 4 * 2, tileops::nvrtc::kNormBwdWorkspaceBudget);
}

TEST(NormBwdPlan, StagesLeaveRoomForTheStaticScratch) {
  // 99 KB opt-in (sm_86/89/120): LayerNorm rows of ~10K 2-byte elements at 2-byte accesses stage
  // ~100 KB with 1024 threads a row, whose static scratch is 1280 bytes (2 x 5 x 32 floats).
  const int optin = 99 * 1024;
  for (int64_t n : {10010, 10022, 10034}) {
    const auto p = plan_norm_bwd(c10::kBFloat16, n, true, true, true, true, 2,
                                 tileops::nvrtc::norm_bwd_smem_budget(optin));
    SCOPED_TRACE(n);
    EXPECT_LE(p.smem_bytes + 2 * 5 * (p.tpr / 32) * 4, optin);
  }
  EXPECT_EQ(tileops::nvrtc::norm_bwd_smem_budget(227 * 1024), tileops::nvrtc::kNormBwdSmemBudget);  // H200
}

TEST(NormBwdPlan, ShortLayerNormCallsRunOneCtaAnSm) {
  using tileops::nvrtc::norm_bwd_grid;
  // LayerNorm, 2 row groups a CTA, 2 CTAs an SM on 132 SMs: a full grid of 264.
  const auto ln = plan_norm_bwd(c10::kBFloat16, 4096, true, true, true, true, 8);
  ASSERT_EQ(ln.rows, 2);
  const int full = 264;
  EXPECT_EQ(norm_bwd_grid(ln, 2048, full, 132), 132);        // 1024 groups: 3.9 a CTA of the full grid
  EXPECT_EQ(norm_bwd_grid(ln, 2 * 8 * full, full, 132), 132);  // 8 a CTA: still short
  EXPECT_EQ(norm_bwd_grid(ln, 2 * 8 * full + 2, full, 132), full);  // longer walks keep the full grid
  EXPECT_EQ(norm_bwd_grid(ln, 16384, full, 132), full);
  EXPECT_EQ(norm_bwd_grid(ln, 100, full, 132), 50);           // never more CTAs than row groups
  EXPECT_EQ(norm_bwd_grid(ln, 0, full, 132), 0);
  // dx alone has no partial rows to reduce: the full grid.
  const auto ln_dx = plan_norm_bwd(c10::kBFloat16, 4096, true, true, false, false, 8);
  EXPECT_EQ(norm_bwd_grid(ln_dx, 2048, full, 132), full);
  // RMSNorm: min(max_grid, groups), whatever the row count.
  const auto rms = plan_norm_bwd(c10::kBFloat16, 1024, false, true, true, false, 8);
  EXPECT_EQ(norm_bwd_grid(rms, int64_t{rms.rows} * 1000, full, 132), full);
  // A workspace-capped grid below the SM count stays capped: 320 groups, 8 a CTA of 40.
  EXPECT_EQ(norm_bwd_grid(ln, 640, 40, 132), 40);
}

TEST(NormBwdPlan, NameCarriesTheIdentity) {
  const auto a = plan_norm_bwd(c10::kBFloat16, 4096, false, true, true, false, 8);
  const auto b = plan_norm_bwd(c10::kBFloat16, 4096, false, true, false, false, 8);
  const auto l = plan_norm_bwd(c10::kBFloat16, 4096, true, true, true, true, 8);
  const std::string na = norm_bwd_name(a, "sm_90a");
  EXPECT_EQ(na.rfind("rms_norm_bwd__bf16__n4096__", 0), 0u) << na;
  EXPECT_NE(na, norm_bwd_name(b, "sm_90a"));
  EXPECT_EQ(norm_bwd_name(l, "sm_90a").rfind("layer_norm_bwd__", 0), 0u);
  EXPECT_EQ(na, norm_bwd_name(
                    plan_norm_bwd(c10::kBFloat16, 4096, false, true, true, false, 8), "sm_90a"));
  // RMSNorm has no dbias whatever the caller asks.
  EXPECT_FALSE(plan_norm_bwd(c10::kBFloat16, 4096, false, true, true, true, 8).db);
}

}  // namespace
