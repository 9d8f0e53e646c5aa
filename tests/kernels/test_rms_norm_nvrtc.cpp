// The RMSNorm kernel source compiles with NVRTC to CUBIN for sm_80 and sm_90a (no GPU needed), and
// the planner picks sensible specialisations.
#include <cstdlib>
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/norm_rms_norm_fwd.h"
#include "targets/nvrtc/norm_layer_norm_fwd.h"
#include "targets/nvrtc/nvrtc_target.h"

namespace {

using tileops::nvrtc::plan_rms_norm;

struct Case {
  c10::ScalarType dtype;
  int64_t n;
  bool weight;
};

class RmsNormCompiles : public ::testing::TestWithParam<std::tuple<Case, const char*>> {};

TEST_P(RmsNormCompiles, ToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto& [c, arch] = GetParam();
  for (bool fused : {false, true}) {  // RMSNormFwdOp and FusedAddRMSNormFwdOp
    const auto plan = plan_rms_norm(c.dtype, c.n, c.weight, FLT_EPSILON, 16, fused);
    const auto src = tileops::nvrtc::rms_norm_source(plan, arch);
    const auto cubin = tileops::jit::compile_to_cubin(src);
    ASSERT_GT(cubin.image.size(), 4u);
    EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
    EXPECT_NE(cubin.lowered_name.find(fused ? "fused_add_rms_norm_fwd" : "rms_norm_fwd"), std::string::npos);
    EXPECT_NE(src.name.find(arch), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Archs, RmsNormCompiles,
    ::testing::Combine(::testing::Values(Case{c10::kHalf, 4096, true}, Case{c10::kBFloat16, 128, false},
                                         Case{c10::kFloat, 65536, true},  // streaming (row not in registers)
                                         Case{c10::kHalf, 1000, true}, Case{c10::kBFloat16, 4095, true}),
                       ::testing::Values("sm_80", "sm_90a")));

TEST(RmsNormPlan, WidestAccessTheRowAndPointersAllow) {
  EXPECT_EQ(plan_rms_norm(c10::kHalf, 4096, true, 1e-6f, 8).vec, 8);
  EXPECT_EQ(plan_rms_norm(c10::kFloat, 4096, true, 1e-6f, 4).vec, 4);
  EXPECT_EQ(plan_rms_norm(c10::kHalf, 4095, true, 1e-6f, 8).vec, 1);   // odd row
  EXPECT_EQ(plan_rms_norm(c10::kHalf, 1000, true, 1e-6f, 8).vec, 8);
  EXPECT_EQ(plan_rms_norm(c10::kHalf, 4096, true, 1e-6f, 2).vec, 2);   // pointers only 4-byte aligned
}

TEST(RmsNormPlan, ThreadsPerRowScaleWithTheRow) {
  const auto small = plan_rms_norm(c10::kBFloat16, 128, true, 1e-6f, 8);  // QK-norm: many rows per CTA
  EXPECT_LE(small.tpr, 32);
  EXPECT_GT(small.rows, 1);
  EXPECT_TRUE(small.cache);
  const auto mid = plan_rms_norm(c10::kHalf, 4096, true, 1e-6f, 8);
  EXPECT_EQ(mid.rows, 1);
  EXPECT_TRUE(mid.cache);
  const auto huge = plan_rms_norm(c10::kFloat, 1 << 20, true, 1e-6f, 4);
  EXPECT_EQ(huge.tpr, 1024);
  EXPECT_FALSE(huge.cache);  // too long for registers: second pass re-reads
}

TEST(RmsNormPlan, NameIsReadableAndCarriesTheIdentity) {
  const auto p = plan_rms_norm(c10::kBFloat16, 4096, false, FLT_EPSILON, 8);
  const std::string name = tileops::nvrtc::rms_norm_name(p, "sm_90a");
  EXPECT_EQ(name.rfind("rms_norm_fwd__bf16__n4096__", 0), 0u) << name;
  EXPECT_NE(name.find("sm_90a"), std::string::npos);
  EXPECT_NE(name, tileops::nvrtc::rms_norm_name(plan_rms_norm(c10::kBFloat16, 4096, true, FLT_EPSILON, 8), "sm_90a"));
}

TEST(RmsNormImplementations, ChosenByDeclaredApplicabilityAndPreference) {
  using tileops::nvrtc::RmsNormImpl;
  auto impl = [](c10::ScalarType t, int64_t n, int cc) { return plan_rms_norm(t, n, true, 1e-6f, 16, false, cc).impl; };
  EXPECT_EQ(impl(c10::kBFloat16, 4096, 9), RmsNormImpl::kRegisterResident);
  EXPECT_EQ(impl(c10::kBFloat16, 32768, 9), RmsNormImpl::kRegisterResident);  // 64 KB: still one CTA
  // The fused add stages rows of 32..64 KB in shared memory on sm_90+ with 16-byte accesses.
  auto fused = [](int64_t n, int max_vec, int cc) { return plan_rms_norm(c10::kBFloat16, n, true, 1e-6f, max_vec, true, cc).impl; };
  EXPECT_EQ(fused(16384, 8, 9), RmsNormImpl::kStaged);
  EXPECT_EQ(fused(32768, 8, 9), RmsNormImpl::kStaged);
  EXPECT_EQ(fused(8192, 8, 9), RmsNormImpl::kRegisterResident);   // 16 KB: registers
  EXPECT_EQ(fused(16384, 8, 8), RmsNormImpl::kRegisterResident);  // no bulk copies before sm_90
  EXPECT_EQ(fused(16384, 4, 9), RmsNormImpl::kRegisterResident);  // 8-byte accesses
  EXPECT_EQ(impl(c10::kBFloat16, 65536, 9), RmsNormImpl::kCluster);
  EXPECT_EQ(impl(c10::kBFloat16, 131072, 9), RmsNormImpl::kCluster);          // the long-row workload
  EXPECT_EQ(impl(c10::kFloat, 1 << 18, 9), RmsNormImpl::kCluster);            // 1 MB: 8 CTAs of 128 KB
  EXPECT_EQ(impl(c10::kFloat, 1 << 20, 9), RmsNormImpl::kStreaming);          // 4 MB: more than a cluster holds
  EXPECT_EQ(impl(c10::kBFloat16, 131072, 8), RmsNormImpl::kStreaming);        // no clusters before sm_90
  EXPECT_EQ(impl(c10::kBFloat16, 131072, 0), RmsNormImpl::kStreaming);
  const auto p = plan_rms_norm(c10::kBFloat16, 131072, true, 1e-6f, 8, false, 9);
  EXPECT_EQ(p.cluster, 8);  // 256 KB rows: 8 CTAs holding 32 KB each ...
  EXPECT_TRUE(p.staged);    // ... in shared memory (16-byte accesses), 16 vectors a thread
  EXPECT_EQ(p.tpr, 128);
  EXPECT_EQ(tileops::nvrtc::rms_norm_smem_bytes(p), 32768);
  EXPECT_EQ(plan_rms_norm(c10::kBFloat16, 65536, true, 1e-6f, 8, false, 9).cluster, 4);
  const auto row = plan_rms_norm(c10::kBFloat16, 16384, true, 1e-6f, 8, true, 9);  // staged row: a CTA of
  EXPECT_EQ(row.cluster, 1);                                                        // 256 threads, 8
  EXPECT_EQ(row.tpr, 256);                                                          // vectors each, x
  EXPECT_EQ(tileops::nvrtc::rms_norm_smem_bytes(row), 65536);                       // and residual
}

// Staging needs 16-byte accesses (bulk copies move multiples of 16 bytes); the fused add stages the
// residual too (twice the shared memory) unless that exceeds 128 KB a CTA; narrower accesses keep
// the register chunk (4 vectors a thread, no dynamic shared memory).
TEST(RmsNormImplementations, StagedOnlyForSixteenByteAccessesWithinTheSharedMemoryBudget) {
  const auto fused = plan_rms_norm(c10::kBFloat16, 131072, true, 1e-6f, 8, true, 9);
  EXPECT_EQ(fused.impl, tileops::nvrtc::RmsNormImpl::kCluster);
  EXPECT_TRUE(fused.staged);
  EXPECT_EQ(tileops::nvrtc::rms_norm_smem_bytes(fused), 65536);
  const auto narrow = plan_rms_norm(c10::kBFloat16, 131072, true, 1e-6f, 4, false, 9);  // 8-byte aligned
  EXPECT_EQ(narrow.impl, tileops::nvrtc::RmsNormImpl::kCluster);
  EXPECT_FALSE(narrow.staged);
  EXPECT_EQ(narrow.tpr, 1024);  // 4096 8-byte vectors a CTA, 4 a thread
  EXPECT_EQ(tileops::nvrtc::rms_norm_smem_bytes(narrow), 0);
  const auto wide = plan_rms_norm(c10::kFloat, 1 << 18, true, 1e-6f, 4, false, 9);  // 128 KB a CTA
  EXPECT_TRUE(wide.staged);
  EXPECT_EQ(tileops::nvrtc::rms_norm_smem_bytes(wide), 131072);
  EXPECT_EQ(wide.tpr, 512);
  EXPECT_FALSE(plan_rms_norm(c10::kFloat, 1 << 18, true, 1e-6f, 4, true, 9).staged);  // 2 x 128 KB
  EXPECT_NE(tileops::nvrtc::rms_norm_name(wide, "sm_90a"),
            tileops::nvrtc::rms_norm_name(plan_rms_norm(c10::kFloat, 1 << 18, true, 1e-6f, 2, false, 9), "sm_90a"));
}

TEST(RmsNormImplementations, DeclarationOrderDecidesNothing) {
  using namespace tileops::nvrtc;
  auto impls = rms_norm_implementations();
  for (const RmsNormProblem q : {RmsNormProblem{c10::kBFloat16, 4096, 8, 9}, RmsNormProblem{c10::kBFloat16, 131072, 8, 9},
                                 RmsNormProblem{c10::kBFloat16, 131072, 8, 8}, RmsNormProblem{c10::kFloat, 1 << 20, 4, 9}}) {
    const int first = select_implementation("t", impls, q).id;
    for (int k = 0; k < 3; ++k) {
      std::rotate(impls.begin(), impls.begin() + 1, impls.end());
      EXPECT_EQ(select_implementation("t", impls, q).id, first);
    }
    std::reverse(impls.begin(), impls.end());
    EXPECT_EQ(select_implementation("t", impls, q).id, first);
  }
}

TEST(RmsNormImplementations, OnlyClusterAndStagedCarryDeviceFactsIntoTheirIdentity) {
  for (const auto& i : tileops::nvrtc::rms_norm_implementations())
    EXPECT_EQ(i.device_dependent, std::string(i.name) == "cluster" || std::string(i.name) == "staged") << i.name;
}

// Cluster kernels exist for sm_90+ only (distributed shared memory).
TEST(RmsNormClusterCompiles, ToCubinForSm90a) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  for (auto [dtype, n, max_vec] : {std::tuple{c10::kBFloat16, int64_t{131072}, 8}, std::tuple{c10::kFloat, int64_t{1} << 18, 4},
                                   std::tuple{c10::kHalf, int64_t{100003}, 8},   // odd row: ragged chunks
                                   std::tuple{c10::kBFloat16, int64_t{100008}, 8}})  // staged, ragged last chunk
    for (bool fused : {false, true}) {
      const auto plan = plan_rms_norm(dtype, n, true, FLT_EPSILON, max_vec, fused, 9);
      ASSERT_EQ(plan.impl, tileops::nvrtc::RmsNormImpl::kCluster);
      const auto cubin = tileops::jit::compile_to_cubin(tileops::nvrtc::rms_norm_source(plan, "sm_90a"));
      EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
      EXPECT_NE(cubin.lowered_name.find(plan.staged ? "rms_norm_fwd_staged" : "rms_norm_fwd_cluster"), std::string::npos);
    }
}

// Staged fused-add rows (one CTA, x and residual in shared memory), with and without weight, exact
// and ragged parts (16392 bf16 = 2049 vectors on 256 threads).
TEST(RmsNormStagedCompiles, ToCubinForSm90a) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  for (auto [dtype, n, weight] : {std::tuple{c10::kBFloat16, int64_t{16384}, true}, std::tuple{c10::kFloat, int64_t{8192}, false},
                                  std::tuple{c10::kHalf, int64_t{16392}, true}}) {
    const auto plan = plan_rms_norm(dtype, n, weight, FLT_EPSILON, 8, true, 9);
    ASSERT_EQ(plan.impl, tileops::nvrtc::RmsNormImpl::kStaged);
    const auto cubin = tileops::jit::compile_to_cubin(tileops::nvrtc::rms_norm_source(plan, "sm_90a"));
    EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
    EXPECT_NE(cubin.lowered_name.find("fused_add_rms_norm_fwd_staged"), std::string::npos);
  }
}

// RMSNorm rows of 16..32 KB are staged (2 vectors a thread: faster on the H200 sweep); 8 KB and
// 64 KB rows stay in registers. Staged rows must compile, ragged ones too (4104, forced).
TEST(RmsNormStagedCompiles, PlainRowsToCubinForSm90a) {
  using tileops::nvrtc::RmsNormImpl;
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto row16k = plan_rms_norm(c10::kBFloat16, 8192, true, 1e-6f, 8, false, 9);
  EXPECT_EQ(row16k.impl, RmsNormImpl::kStaged);
  EXPECT_EQ(row16k.tpr, 512);  // 1024 vectors, 2 a thread
  EXPECT_EQ(plan_rms_norm(c10::kBFloat16, 16384, true, 1e-6f, 8, false, 9).impl, RmsNormImpl::kStaged);
  EXPECT_EQ(plan_rms_norm(c10::kFloat, 4096, true, 1e-6f, 4, false, 9).impl, RmsNormImpl::kStaged);
  EXPECT_EQ(plan_rms_norm(c10::kBFloat16, 4096, true, 1e-6f, 8, false, 9).impl, RmsNormImpl::kRegisterResident);
  EXPECT_EQ(plan_rms_norm(c10::kBFloat16, 32768, true, 1e-6f, 8, false, 9).impl, RmsNormImpl::kRegisterResident);
  EXPECT_EQ(plan_rms_norm(c10::kBFloat16, 8192, true, 1e-6f, 8, false, 8).impl, RmsNormImpl::kRegisterResident);
  EXPECT_EQ(plan_rms_norm(c10::kBFloat16, 8192, true, 1e-6f, 4, false, 9).impl, RmsNormImpl::kRegisterResident);
  // The production plans (2 a thread), and a ragged row forced to stage at 8 a thread.
  for (auto [n, weight] : {std::pair{int64_t{8192}, true}, std::pair{int64_t{16384}, false},
                           std::pair{int64_t{4104}, false}}) {
    auto plan = plan_rms_norm(c10::kBFloat16, n, weight, FLT_EPSILON, 8, false, 9);
    if (n == 4104) tileops::nvrtc::plan_staged(plan, 8);
    const auto cubin = tileops::jit::compile_to_cubin(tileops::nvrtc::rms_norm_source(plan, "sm_90a"));
    EXPECT_NE(cubin.lowered_name.find("rms_norm_fwd_staged"), std::string::npos);
    EXPECT_EQ(cubin.lowered_name.find("fused_add"), std::string::npos);
  }
}

// The launch of a kernel that may start before the previous one ends (norm backward reduction).
TEST(DependentLaunch, NeedsHopperLaunchExAndACuda123Driver) {
  using tileops::nvrtc::dependent_launch_supported;
  EXPECT_TRUE(dependent_launch_supported(9, 12030, true));
  EXPECT_TRUE(dependent_launch_supported(10, 13000, true));
  EXPECT_FALSE(dependent_launch_supported(8, 13000, true));   // sm_80: no griddepcontrol
  EXPECT_FALSE(dependent_launch_supported(9, 12020, true));   // graphs do not capture it before 12.3
  EXPECT_FALSE(dependent_launch_supported(9, 13000, false));  // no cuLaunchKernelEx
}

// Persistent staged rows: the grid holds what fits the SMs at once (two slots a CTA), and a call with
// more rows gives every CTA the same number of rows (no straggler wave); one slot when each CTA has
// one row.
TEST(StagedWalk, EqualWalksWithinWhatFitsTheSms) {
  using tileops::nvrtc::staged_walk_for;
  const auto w = staged_walk_for(13, 132, 16384);  // 16 KB rows: 13 CTAs an SM on 132 SMs
  EXPECT_EQ(w.max_grid, 1716);
  EXPECT_EQ(w.grid(1000), 1000);  // fits: a CTA a row, one slot
  EXPECT_EQ(w.smem_bytes(1000), 16384);
  EXPECT_EQ(w.grid(1716), 1716);
  EXPECT_EQ(w.grid(2048), 1024);  // 2 rows each, not 1716 CTAs of which 332 walk twice
  EXPECT_EQ(w.smem_bytes(2048), 32768);
  EXPECT_EQ(w.grid(4097), 1366);  // 3 rows each (the last CTA 2)
  EXPECT_EQ(w.grid(1 << 20), 1714);  // 612 rows a CTA (ceil(2^20 / 1716)), the last CTA fewer
  const auto off = staged_walk_for(0, 132, 16384);  // two slots do not fit: one CTA a row
  EXPECT_EQ(off.grid(100000), 100000);
  EXPECT_EQ(off.smem_bytes(100000), 16384);
}

// A knob whose valid range includes 0 still gets its default when unset (the walk knob's default
// once read as 0 because an unset variable parsed as 0).
TEST(NvrtcTarget, UnsetKnobTakesItsDefault) {
  using tileops::nvrtc::env_int;
  unsetenv("TILEOPS_TEST_KNOB");
  EXPECT_EQ(env_int("TILEOPS_TEST_KNOB", 1, 0, 1), 1);
  setenv("TILEOPS_TEST_KNOB", "0", 1);
  EXPECT_EQ(env_int("TILEOPS_TEST_KNOB", 1, 0, 1), 0);
  setenv("TILEOPS_TEST_KNOB", "7", 1);
  EXPECT_EQ(env_int("TILEOPS_TEST_KNOB", 1, 0, 1), 1);  // out of range: the default
  unsetenv("TILEOPS_TEST_KNOB");
}

TEST(NvrtcTarget, ArchForHopperIsSm90a) {
  EXPECT_EQ(tileops::nvrtc::arch_for(9, 0), "sm_90a");
  EXPECT_EQ(tileops::nvrtc::arch_for(8, 0), "sm_80");
}

}  // namespace

namespace {

class LayerNormCompiles : public ::testing::TestWithParam<const char*> {};

TEST_P(LayerNormCompiles, ToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const char* arch = GetParam();
  // Register-resident rows with weight/bias prefetched with x (<= 64 bytes a thread) or loaded
  // after the reductions (16384), each of weight/bias alone, none, and streaming rows.
  for (auto [dtype, n, weight, bias] : {std::tuple{c10::kBFloat16, int64_t{4096}, true, true},
                                        std::tuple{c10::kBFloat16, int64_t{16384}, true, true},
                                        std::tuple{c10::kBFloat16, int64_t{128}, true, false},
                                        std::tuple{c10::kHalf, int64_t{4096}, false, false},
                                        std::tuple{c10::kHalf, int64_t{1000}, false, true},
                                        std::tuple{c10::kFloat, int64_t{1} << 18, true, false}}) {
    const auto plan = tileops::nvrtc::plan_rms_norm(dtype, n, weight, 1e-5f, 16);
    const auto cubin = tileops::jit::compile_to_cubin(tileops::nvrtc::layer_norm_source(plan, bias, arch));
    EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
    EXPECT_NE(cubin.lowered_name.find("layer_norm_fwd"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, LayerNormCompiles, ::testing::Values("sm_80", "sm_90a"));

// Staged LayerNorm rows: 8 KB to 64 KB with 16-byte accesses on sm_90+; weight/bias prefetched
// (4096: 4 vectors a thread) or read after the reductions (16384).
TEST(LayerNormStaged, AppliesAndCompilesForSm90a) {
  using tileops::nvrtc::layer_norm_staged;
  EXPECT_TRUE(layer_norm_staged(c10::kBFloat16, 4096, 8, 9));
  EXPECT_TRUE(layer_norm_staged(c10::kBFloat16, 32768, 8, 9));
  EXPECT_FALSE(layer_norm_staged(c10::kBFloat16, 65536, 8, 9));  // 128 KB
  EXPECT_FALSE(layer_norm_staged(c10::kBFloat16, 2048, 8, 9));   // 4 KB: registers
  EXPECT_FALSE(layer_norm_staged(c10::kBFloat16, 4096, 4, 9));   // 8-byte accesses
  EXPECT_FALSE(layer_norm_staged(c10::kBFloat16, 4096, 8, 8));   // sm_80
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  // 8 vectors a thread below 16 KB rows, 4 from 16 KB (H200 sweep).
  EXPECT_EQ(tileops::nvrtc::layer_norm_staged_per_thread(c10::kBFloat16, 4096), 8);
  EXPECT_EQ(tileops::nvrtc::layer_norm_staged_per_thread(c10::kBFloat16, 8192), 4);
  EXPECT_EQ(tileops::nvrtc::layer_norm_staged_per_thread(c10::kFloat, 4096), 4);
  // One pass of shifted statistics: bfloat16 rows up to 16384 elements (the default, no knob set).
  using tileops::nvrtc::layer_norm_one_pass;
  EXPECT_TRUE(layer_norm_one_pass(c10::kBFloat16, 4096));
  EXPECT_TRUE(layer_norm_one_pass(c10::kBFloat16, 16384));
  EXPECT_FALSE(layer_norm_one_pass(c10::kBFloat16, 32768));
  EXPECT_FALSE(layer_norm_one_pass(c10::kHalf, 4096));
  EXPECT_FALSE(layer_norm_one_pass(c10::kFloat, 4096));
  // Each statistics variant, with weight/bias cached in registers or read in the output pass
  // (the default: cache = false).
  for (auto [n, weight, bias, one_pass, cache] :
       {std::tuple{int64_t{4096}, true, true, false, true}, std::tuple{int64_t{16384}, true, false, false, true},
        std::tuple{int64_t{4104}, false, true, false, false}, std::tuple{int64_t{4104}, true, true, true, true},
        std::tuple{int64_t{16384}, true, true, true, false}, std::tuple{int64_t{4096}, true, true, true, false}}) {
    auto plan = tileops::nvrtc::plan_rms_norm(c10::kBFloat16, n, weight, 1e-5f, 8);
    tileops::nvrtc::plan_staged(plan, tileops::nvrtc::layer_norm_staged_per_thread(plan.dtype, plan.n));
    plan.one_pass = one_pass;
    plan.cache = cache;
    EXPECT_EQ(tileops::nvrtc::rms_norm_smem_bytes(plan), n * 2);
    const auto src = tileops::nvrtc::layer_norm_source(plan, bias, "sm_90a");
    EXPECT_EQ(src.name.find("_1p") != std::string::npos, one_pass) << src.name;
    EXPECT_EQ(src.name.find("_nca") != std::string::npos, !cache) << src.name;
    const auto cubin = tileops::jit::compile_to_cubin(src);
    EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
    EXPECT_NE(cubin.lowered_name.find("layer_norm_fwd_staged"), std::string::npos);
  }
}

}  // namespace

namespace {

TEST(NvrtcTarget, AccessWidthFollowsTheLeastAlignedPointer) {
  alignas(16) static char buf[64];
  using tileops::nvrtc::access_width;
  EXPECT_EQ(access_width({buf}, 2), 8);                   // 16 bytes of fp16
  EXPECT_EQ(access_width({buf, buf + 4}, 2), 2);          // 4-byte aligned: two fp16 at a time
  EXPECT_EQ(access_width({buf + 2}, 2), 1);
  EXPECT_EQ(access_width({buf, nullptr}, 4), 4);          // absent optional tensors do not narrow it
  EXPECT_EQ(access_width({buf + 8}, 4), 2);
  EXPECT_EQ(access_width({buf + 4}, 4), 1);
}

TEST(NvrtcTarget, NamingHelpers) {
  using namespace tileops::nvrtc;
  EXPECT_STREQ(kernel_type_name(c10::kBFloat16), "tileops::bf16");
  EXPECT_STREQ(short_type_name(c10::kHalf), "f16");
  EXPECT_EQ(next_pow2(1), 1);
  EXPECT_EQ(next_pow2(129), 256);
  EXPECT_EQ(float_bits(1.0f), 0x3f800000u);
  EXPECT_THROW(kernel_type_name(c10::kDouble), c10::Error);
}

}  // namespace
