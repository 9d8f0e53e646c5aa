// The RMSNorm kernel source compiles with NVRTC to CUBIN for sm_80 and sm_90a (no GPU needed), and
// the planner picks sensible specialisations.
#include <cstdlib>
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/norm/row_norm.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/nvrtc/tuning.h"

namespace {

using tileops::nvrtc::DeviceFacts;
using tileops::nvrtc::RowNormImpl;
using tileops::nvrtc::RowNormOp;
using tileops::nvrtc::RowNormProblem;
using tileops::nvrtc::RowNormSpec;
using RmsNormImpl = RowNormImpl;

// Facts of a device of compute capability cc (0: one without clusters or bulk copies).
DeviceFacts facts(int cc) {
  if (cc >= 9) return tileops::nvrtc::named_device_facts("h200");
  if (cc == 8) return tileops::nvrtc::named_device_facts("a100");
  DeviceFacts d;
  d.arch = "sm_75";
  d.cc_major = 7;
  d.cc_minor = 5;
  return d;
}
// The spec of an RMSNorm (or, fused, FusedAddRMSNorm) problem.
RowNormSpec plan_rms_norm(c10::ScalarType dtype, int64_t n, bool weight, int max_vec, bool fused = false, int cc = 0) {
  return tileops::nvrtc::plan_row_norm(
      RowNormProblem{fused ? RowNormOp::kFusedAddRmsNorm : RowNormOp::kRmsNorm, dtype, n, max_vec, weight}, facts(cc));
}
RowNormSpec plan_layer_norm(c10::ScalarType dtype, int64_t n, bool weight, bool bias, int max_vec, int cc = 0) {
  return tileops::nvrtc::plan_row_norm(RowNormProblem{RowNormOp::kLayerNorm, dtype, n, max_vec, weight, bias},
                                       facts(cc));
}
tileops::jit::KernelSource source(RowNormSpec s, const char* arch) {
  s.arch = arch;
  return s.sources()[0];
}
std::string kernel_name(RowNormSpec s, const char* arch) {
  s.arch = arch;
  return s.name();
}
// A row forced into the staged kernel at `per_thread` vectors a thread.
void plan_staged(RowNormSpec& s, int per_thread) {
  s.impl = RowNormImpl::kStaged;
  s.staged = true;
  s.cluster = s.rows = 1;
  s.cache = true;
  s.tpr = tileops::nvrtc::staged_row_threads(s.n / s.vec, per_thread);
}

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
    const auto plan = plan_rms_norm(c.dtype, c.n, c.weight, 16, fused);
    const auto src = source(plan, arch);
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
  EXPECT_EQ(plan_rms_norm(c10::kHalf, 4096, true, 8).vec, 8);
  EXPECT_EQ(plan_rms_norm(c10::kFloat, 4096, true, 4).vec, 4);
  EXPECT_EQ(plan_rms_norm(c10::kHalf, 4095, true, 8).vec, 1);   // odd row
  EXPECT_EQ(plan_rms_norm(c10::kHalf, 1000, true, 8).vec, 8);
  EXPECT_EQ(plan_rms_norm(c10::kHalf, 4096, true, 2).vec, 2);   // pointers only 4-byte aligned
}

TEST(RmsNormPlan, ThreadsPerRowScaleWithTheRow) {
  const auto small = plan_rms_norm(c10::kBFloat16, 128, true, 8);  // QK-norm: many rows per CTA
  EXPECT_LE(small.tpr, 32);
  EXPECT_GT(small.rows, 1);
  EXPECT_TRUE(small.cache);
  const auto mid = plan_rms_norm(c10::kHalf, 4096, true, 8);
  EXPECT_EQ(mid.rows, 1);
  EXPECT_TRUE(mid.cache);
  const auto huge = plan_rms_norm(c10::kFloat, 1 << 20, true, 4);
  EXPECT_EQ(huge.tpr, 1024);
  EXPECT_FALSE(huge.cache);  // too long for registers: second pass re-reads
}

TEST(RmsNormPlan, UnevenRowsTakeHalfTheThreadsWhenThatSplitsThemEvenly) {
  EXPECT_EQ(plan_rms_norm(c10::kBFloat16, 4096, true, 8).tpr, 128);        // 512 vectors, 4 a thread
  EXPECT_EQ(plan_rms_norm(c10::kBFloat16, 3584, true, 8).tpr, 64);         // 448: 7 a thread, not 3.5
  EXPECT_EQ(plan_rms_norm(c10::kBFloat16, 3584, true, 8, true).tpr, 64);   // the fused add too
  EXPECT_EQ(plan_rms_norm(c10::kBFloat16, 5120, true, 8).tpr, 128);        // 640: 5 a thread, not 2.5
  EXPECT_EQ(plan_rms_norm(c10::kHalf, 1000, true, 8).tpr, 32);             // 125: odd, stays uneven
  EXPECT_EQ(plan_rms_norm(c10::kBFloat16, 2400, true, 8).tpr, 128);        // 300: 64 would not split it
  EXPECT_EQ(plan_layer_norm(c10::kBFloat16, 3584, true, true, 8).tpr, 64);
  // A float32 weight: the fused add halves, a lone row keeps 128 threads (it ran slower at 64).
  auto f32w = [](RowNormOp op) {
    return tileops::nvrtc::plan_row_norm(RowNormProblem{op, c10::kBFloat16, 3584, 8, true, false, true}, facts(9)).tpr;
  };
  EXPECT_EQ(f32w(RowNormOp::kFusedAddRmsNorm), 64);
  EXPECT_EQ(f32w(RowNormOp::kRmsNorm), 128);
}

TEST(RmsNormPlan, NameIsReadableAndCarriesTheIdentity) {
  const auto p = plan_rms_norm(c10::kBFloat16, 4096, false, 8);
  const std::string name = kernel_name(p, "sm_90a");
  EXPECT_EQ(name.rfind("rms_norm_fwd__bf16__n4096__", 0), 0u) << name;
  EXPECT_NE(name.find("sm_90a"), std::string::npos);
  EXPECT_NE(name, kernel_name(plan_rms_norm(c10::kBFloat16, 4096, true, 8), "sm_90a"));
}

TEST(RmsNormImplementations, ChosenByDeclaredApplicabilityAndPreference) {
  
  auto impl = [](c10::ScalarType t, int64_t n, int cc) { return plan_rms_norm(t, n, true, 16, false, cc).impl; };
  EXPECT_EQ(impl(c10::kBFloat16, 4096, 9), RmsNormImpl::kRegisterResident);
  EXPECT_EQ(impl(c10::kBFloat16, 32768, 9), RmsNormImpl::kRegisterResident);  // 64 KB: still one CTA
  // The fused add stages rows of 32..64 KB in shared memory on sm_90+ with 16-byte accesses.
  auto fused = [](int64_t n, int max_vec, int cc) { return plan_rms_norm(c10::kBFloat16, n, true, max_vec, true, cc).impl; };
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
  const auto p = plan_rms_norm(c10::kBFloat16, 131072, true, 8, false, 9);
  EXPECT_EQ(p.cluster, 8);  // 256 KB rows: 8 CTAs holding 32 KB each ...
  EXPECT_TRUE(p.staged);    // ... in shared memory (16-byte accesses), 16 vectors a thread
  EXPECT_EQ(p.tpr, 128);
  EXPECT_EQ(p.smem_bytes(), 32768);
  EXPECT_EQ(plan_rms_norm(c10::kBFloat16, 65536, true, 8, false, 9).cluster, 4);
  const auto row = plan_rms_norm(c10::kBFloat16, 16384, true, 8, true, 9);  // staged row: a CTA of
  EXPECT_EQ(row.cluster, 1);                                                        // 256 threads, 8
  EXPECT_EQ(row.tpr, 256);                                                          // vectors each, x
  EXPECT_EQ(row.smem_bytes(), 65536);                       // and residual
}

// Staging needs 16-byte accesses (bulk copies move multiples of 16 bytes); the fused add stages the
// residual too (twice the shared memory) unless that exceeds 128 KB a CTA; narrower accesses keep
// the register chunk (4 vectors a thread, no dynamic shared memory).
TEST(RmsNormImplementations, StagedOnlyForSixteenByteAccessesWithinTheSharedMemoryBudget) {
  const auto fused = plan_rms_norm(c10::kBFloat16, 131072, true, 8, true, 9);
  EXPECT_EQ(fused.impl, RmsNormImpl::kCluster);
  EXPECT_TRUE(fused.staged);
  EXPECT_EQ(fused.smem_bytes(), 65536);
  const auto narrow = plan_rms_norm(c10::kBFloat16, 131072, true, 4, false, 9);  // 8-byte aligned
  EXPECT_EQ(narrow.impl, RmsNormImpl::kCluster);
  EXPECT_FALSE(narrow.staged);
  EXPECT_EQ(narrow.tpr, 1024);  // 4096 8-byte vectors a CTA, 4 a thread
  EXPECT_EQ(narrow.smem_bytes(), 0);
  const auto wide = plan_rms_norm(c10::kFloat, 1 << 18, true, 4, false, 9);  // 128 KB a CTA
  EXPECT_TRUE(wide.staged);
  EXPECT_EQ(wide.smem_bytes(), 131072);
  EXPECT_EQ(wide.tpr, 512);
  EXPECT_FALSE(plan_rms_norm(c10::kFloat, 1 << 18, true, 4, true, 9).staged);  // 2 x 128 KB
  EXPECT_NE(kernel_name(wide, "sm_90a"),
            kernel_name(plan_rms_norm(c10::kFloat, 1 << 18, true, 2, false, 9), "sm_90a"));
}

TEST(RmsNormImplementations, DeclarationOrderDecidesNothing) {
  using namespace tileops::nvrtc;
  auto impls = row_norm_implementations();
  const tileops::nvrtc::RowNormTable& t = tileops::nvrtc::kRowNormTable;
  for (auto [n, dtype, max_vec, cc] : {std::tuple{int64_t{4096}, c10::kBFloat16, 8, 9}, std::tuple{int64_t{131072}, c10::kBFloat16, 8, 9},
                                       std::tuple{int64_t{131072}, c10::kBFloat16, 8, 8}, std::tuple{int64_t{1} << 20, c10::kFloat, 4, 9}}) {
    const RowNormProblem p{RowNormOp::kRmsNorm, dtype, n, max_vec, true};
    const DeviceFacts dev = facts(cc);
    const RowNormQuery q{p, max_vec, dev, t};
    const int first = select_implementation("t", impls, q).id;
    for (int k = 0; k < 3; ++k) {
      std::rotate(impls.begin(), impls.begin() + 1, impls.end());
      EXPECT_EQ(select_implementation("t", impls, q).id, first);
    }
    std::reverse(impls.begin(), impls.end());
    EXPECT_EQ(select_implementation("t", impls, q).id, first);
  }
}

// Cluster kernels exist for sm_90+ only (distributed shared memory).
TEST(RmsNormClusterCompiles, ToCubinForSm90a) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  for (auto [dtype, n, max_vec] : {std::tuple{c10::kBFloat16, int64_t{131072}, 8}, std::tuple{c10::kFloat, int64_t{1} << 18, 4},
                                   std::tuple{c10::kHalf, int64_t{100003}, 8},   // odd row: ragged chunks
                                   std::tuple{c10::kBFloat16, int64_t{100008}, 8}})  // staged, ragged last chunk
    for (bool fused : {false, true}) {
      const auto plan = plan_rms_norm(dtype, n, true, max_vec, fused, 9);
      ASSERT_EQ(plan.impl, RmsNormImpl::kCluster);
      const auto cubin = tileops::jit::compile_to_cubin(source(plan, "sm_90a"));
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
    const auto plan = plan_rms_norm(dtype, n, weight, 8, true, 9);
    ASSERT_EQ(plan.impl, RmsNormImpl::kStaged);
    const auto cubin = tileops::jit::compile_to_cubin(source(plan, "sm_90a"));
    EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
    EXPECT_NE(cubin.lowered_name.find("fused_add_rms_norm_fwd_staged"), std::string::npos);
  }
}

// RMSNorm rows of 16..32 KB are staged (2 vectors a thread: faster on the H200 sweep); 8 KB and
// 64 KB rows stay in registers. Staged rows must compile, ragged ones too (4104, forced).
TEST(RmsNormStagedCompiles, PlainRowsToCubinForSm90a) {
  
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto row16k = plan_rms_norm(c10::kBFloat16, 8192, true, 8, false, 9);
  EXPECT_EQ(row16k.impl, RmsNormImpl::kStaged);
  EXPECT_EQ(row16k.tpr, 512);  // 1024 vectors, 2 a thread
  EXPECT_EQ(plan_rms_norm(c10::kBFloat16, 16384, true, 8, false, 9).impl, RmsNormImpl::kStaged);
  EXPECT_EQ(plan_rms_norm(c10::kFloat, 4096, true, 4, false, 9).impl, RmsNormImpl::kStaged);
  EXPECT_EQ(plan_rms_norm(c10::kBFloat16, 4096, true, 8, false, 9).impl, RmsNormImpl::kRegisterResident);
  EXPECT_EQ(plan_rms_norm(c10::kBFloat16, 32768, true, 8, false, 9).impl, RmsNormImpl::kRegisterResident);
  EXPECT_EQ(plan_rms_norm(c10::kBFloat16, 8192, true, 8, false, 8).impl, RmsNormImpl::kRegisterResident);
  EXPECT_EQ(plan_rms_norm(c10::kBFloat16, 8192, true, 4, false, 9).impl, RmsNormImpl::kRegisterResident);
  // The production plans (2 a thread), and a ragged row forced to stage at 8 a thread.
  for (auto [n, weight] : {std::pair{int64_t{8192}, true}, std::pair{int64_t{16384}, false},
                           std::pair{int64_t{4104}, false}}) {
    auto plan = plan_rms_norm(c10::kBFloat16, n, weight, 8, false, 9);
    if (n == 4104) plan_staged(plan, 8);
    const auto cubin = tileops::jit::compile_to_cubin(source(plan, "sm_90a"));
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
    const auto plan = plan_layer_norm(dtype, n, weight, bias, 16);
    ASSERT_FALSE(plan.staged);
    const auto cubin = tileops::jit::compile_to_cubin(source(plan, arch));
    EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
    EXPECT_NE(cubin.lowered_name.find("layer_norm_fwd"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, LayerNormCompiles, ::testing::Values("sm_80", "sm_90a"));

// A float32 weight and bias beside a 16-bit row (vLLM and flashinfer models): register and streaming
// rows only (never staged, even where same-dtype rows are), the weight's type in the kernel's name
// and template arguments, 16-byte pieces of float weights.
TEST(LayerNormFloatWeight, RegisterOrStreamingRowsThatCompile) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  for (int64_t n : {int64_t{4096}, int64_t{1000}, int64_t{1} << 17}) {
    RowNormProblem q{RowNormOp::kLayerNorm, c10::kBFloat16, n, 8, true, true};
    q.float_weight = true;
    const RowNormSpec s = tileops::nvrtc::plan_row_norm(q, facts(9));
    EXPECT_FALSE(s.staged);
    EXPECT_TRUE(s.float_weight);
    EXPECT_NE(s.name().find("_wf32"), std::string::npos) << s.name();
    EXPECT_NE(s.template_expression().find(", float>"), std::string::npos) << s.template_expression();
    q.float_weight = false;
    EXPECT_NE(tileops::nvrtc::plan_row_norm(q, facts(9)).name(), s.name());
    for (const char* arch : {"sm_80", "sm_90a"}) {
      const auto cubin = tileops::jit::compile_to_cubin(source(s, arch));
      EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
    }
  }
  RowNormProblem rms{RowNormOp::kRmsNorm, c10::kHalf, 16384, 8, true};
  rms.float_weight = true;  // the plain RMSNorm row with a float32 weight: never the cluster or staged rows
  const RowNormSpec r = tileops::nvrtc::plan_row_norm(rms, facts(9));
  EXPECT_TRUE(r.impl == tileops::nvrtc::RowNormImpl::kRegisterResident || r.impl == tileops::nvrtc::RowNormImpl::kStreaming);
  EXPECT_EQ(tileops::jit::compile_to_cubin(source(r, "sm_90a")).image.substr(0, 4), std::string("\x7f" "ELF"));
}

// Staged LayerNorm rows: 8 KB to 64 KB with 16-byte accesses on sm_90+, 8 vectors a thread below
// 16 KB rows, 4 from 16 KB; one pass of shifted statistics for bfloat16 rows up to 16384 elements.
TEST(LayerNormStaged, AppliesAndCompilesForSm90a) {
  auto staged = [](c10::ScalarType t, int64_t n, int max_vec, int cc) { return plan_layer_norm(t, n, true, true, max_vec, cc).staged; };
  EXPECT_TRUE(staged(c10::kBFloat16, 4096, 8, 9));
  EXPECT_TRUE(staged(c10::kBFloat16, 32768, 8, 9));
  EXPECT_FALSE(staged(c10::kBFloat16, 65536, 8, 9));  // 128 KB
  EXPECT_FALSE(staged(c10::kBFloat16, 2048, 8, 9));   // 4 KB: registers
  EXPECT_FALSE(staged(c10::kBFloat16, 4096, 4, 9));   // 8-byte accesses
  EXPECT_FALSE(staged(c10::kBFloat16, 4096, 8, 8));   // sm_80
  EXPECT_EQ(plan_layer_norm(c10::kBFloat16, 4096, true, true, 8, 9).tpr, 64);    // 512 vectors, 8 a thread
  EXPECT_EQ(plan_layer_norm(c10::kBFloat16, 8192, true, true, 8, 9).tpr, 256);   // 1024 vectors, 4 a thread
  EXPECT_EQ(plan_layer_norm(c10::kFloat, 4096, true, true, 4, 9).tpr, 256);      // 16 KB rows: 4 a thread
  auto one_pass = [](c10::ScalarType t, int64_t n) { return plan_layer_norm(t, n, true, true, 8, 9).one_pass; };
  EXPECT_TRUE(one_pass(c10::kBFloat16, 4096));
  EXPECT_TRUE(one_pass(c10::kBFloat16, 16384));
  EXPECT_FALSE(one_pass(c10::kBFloat16, 32768));
  EXPECT_FALSE(one_pass(c10::kHalf, 4096));
  EXPECT_FALSE(one_pass(c10::kFloat, 4096));
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  // Each statistics variant, with and without weight and bias, exact and ragged parts.
  for (auto [n, weight, bias, one] :
       {std::tuple{int64_t{4096}, true, true, false}, std::tuple{int64_t{16384}, true, false, false},
        std::tuple{int64_t{4104}, false, true, false}, std::tuple{int64_t{4104}, true, true, true},
        std::tuple{int64_t{16384}, true, true, true}, std::tuple{int64_t{4096}, true, true, true}}) {
    auto plan = plan_layer_norm(c10::kBFloat16, n, weight, bias, 8, 9);
    ASSERT_TRUE(plan.staged);
    plan.one_pass = one;
    EXPECT_EQ(plan.smem_bytes(), n * 2);
    const auto src = source(plan, "sm_90a");
    EXPECT_EQ(src.name.find("_1p") != std::string::npos, one) << src.name;
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
  EXPECT_STREQ(kernel_type_name(c10::kDouble), "double");  // float64 scans
  EXPECT_STREQ(short_type_name(c10::kDouble), "f64");
  EXPECT_THROW(kernel_type_name(c10::kComplexFloat), c10::Error);
}

}  // namespace
