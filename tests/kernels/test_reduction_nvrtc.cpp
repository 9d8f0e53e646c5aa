// The softmax / log_softmax kernel sources compile with NVRTC to CUBIN for sm_80 and sm_90a (no GPU
// needed) in every kind of specialisation, and the planner picks sensible ones.
#include <gtest/gtest.h>

#include <algorithm>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/nvrtc/reduction/softmax.h"

namespace {

using tileops::nvrtc::DeviceFacts;
using tileops::nvrtc::SoftmaxImpl;
using tileops::nvrtc::SoftmaxProblem;
using tileops::nvrtc::SoftmaxSpec;

DeviceFacts facts(int cc) {
  return tileops::nvrtc::named_device_facts(cc >= 9 ? "h200" : "a100");
}
// The spec of a given implementation (split rows: few rows in the call).
SoftmaxSpec plan_softmax(c10::ScalarType dtype, int64_t n, bool log, int max_vec, SoftmaxImpl impl) {
  return tileops::nvrtc::plan_softmax_as(impl, SoftmaxProblem{log, dtype, n, max_vec, true}, facts(9));
}
// The implementation the plan chooses for a call of `rows` rows on a device of compute capability cc.
SoftmaxImpl select_softmax(c10::ScalarType dtype, int64_t n, int max_vec, int64_t rows, int cc) {
  return tileops::nvrtc::plan_softmax(
             SoftmaxProblem{false, dtype, n, max_vec, tileops::nvrtc::softmax_few_rows(rows)}, facts(cc))
      .impl;
}
bool softmax_wants_split(int64_t n, int64_t rows) {
  return select_softmax(c10::kBFloat16, n, 8, rows, 8) == SoftmaxImpl::kSplit;
}
std::vector<tileops::jit::KernelSource> softmax_sources(SoftmaxSpec p, const char* arch) {
  p.arch = arch;
  return p.sources();
}
std::string softmax_name(SoftmaxSpec p, const char* arch) {
  p.arch = arch;
  return p.name();
}
constexpr auto kRow = SoftmaxImpl::kRowPerCta;
constexpr auto kSplit = SoftmaxImpl::kSplit;
constexpr auto kCluster = SoftmaxImpl::kCluster;
constexpr auto kStaged = SoftmaxImpl::kStaged;

struct Case {
  c10::ScalarType dtype;
  int64_t n;
  int max_vec;
  SoftmaxImpl impl;
};

class SoftmaxCompiles : public ::testing::TestWithParam<std::tuple<Case, bool, const char*>> {};

TEST_P(SoftmaxCompiles, ToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto& [c, log, arch] = GetParam();
  const auto plan = plan_softmax(c.dtype, c.n, log, c.max_vec, c.impl);
  const auto sources = softmax_sources(plan, arch);
  ASSERT_EQ(sources.size(), c.impl == kSplit ? 2u : 1u);
  for (const auto& src : sources) {
    const auto cubin = tileops::jit::compile_to_cubin(src);
    ASSERT_GT(cubin.image.size(), 4u);
    EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
    EXPECT_NE(cubin.lowered_name.find("softmax"), std::string::npos);
    EXPECT_NE(src.name.find(arch), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Archs, SoftmaxCompiles,
    ::testing::Combine(::testing::Values(Case{c10::kHalf, 1, 8, kRow},         // one element a row
                                         Case{c10::kBFloat16, 7, 8, kRow},     // odd row: scalar accesses
                                         Case{c10::kBFloat16, 128, 8, kRow},   // many rows a CTA
                                         Case{c10::kFloat, 1000, 4, kRow},
                                         Case{c10::kBFloat16, 4096, 8, kRow},  // one CTA a row, registers
                                         Case{c10::kHalf, 4096, 2, kRow},      // narrow pointers
                                         Case{c10::kFloat, 65536, 4, kRow},    // streaming row
                                         Case{c10::kBFloat16, 128256, 8, kSplit}, // lm-head: split rows
                                         Case{c10::kFloat, 16384, 4, kSplit}),
                       ::testing::Bool(), ::testing::Values("sm_80", "sm_90a")));

TEST(SoftmaxPlan, WidestAccessTheRowAndPointersAllow) {
  EXPECT_EQ(plan_softmax(c10::kBFloat16, 4096, false, 8, kRow).vec, 8);
  EXPECT_EQ(plan_softmax(c10::kFloat, 4096, false, 4, kRow).vec, 4);
  EXPECT_EQ(plan_softmax(c10::kHalf, 4095, false, 8, kRow).vec, 1);
  EXPECT_EQ(plan_softmax(c10::kHalf, 4096, false, 2, kRow).vec, 2);
  EXPECT_EQ(plan_softmax(c10::kBFloat16, 128256, false, 8, kSplit).vec, 8);  // 128256 = 8 * 16032
}

TEST(SoftmaxPlan, ThreadsPerRowScaleWithTheRow) {
  const auto tiny = plan_softmax(c10::kFloat, 7, false, 4, kRow);  // about 2 vectors a thread
  EXPECT_EQ(tiny.tpr, 4);
  EXPECT_EQ(tiny.rows, 64);
  EXPECT_TRUE(tiny.cache);
  const auto small = plan_softmax(c10::kBFloat16, 128, false, 8, kRow);
  EXPECT_LE(small.tpr, 32);
  EXPECT_GT(small.rows, 1);
  const auto mid = plan_softmax(c10::kBFloat16, 4096, false, 8, kRow);
  EXPECT_EQ(mid.tpr, 256);  // 2 vectors a thread: 20.5 us vs 22.1 at 4 (H200, docs/PERF.md)
  EXPECT_EQ(mid.rows, 1);
  EXPECT_TRUE(mid.cache);
  EXPECT_EQ(mid.splits, 1);
  const auto huge = plan_softmax(c10::kFloat, 1 << 20, false, 4, kRow);
  EXPECT_EQ(huge.tpr, 1024);
  EXPECT_FALSE(huge.cache);  // too long for registers: online pass, then a second read
}

TEST(SoftmaxPlan, LongRowsWithFewRowsSplitAcrossCtas) {
  EXPECT_TRUE(softmax_wants_split(128256, 4));
  EXPECT_FALSE(softmax_wants_split(128256, 4096));  // enough rows to fill the GPU one CTA a row
  EXPECT_FALSE(softmax_wants_split(4096, 4));       // short rows: one launch is cheaper
  const auto p = plan_softmax(c10::kBFloat16, 128256, false, 8, kSplit);
  EXPECT_EQ(p.splits, 63);  // 4 rows -> 252 CTAs
  EXPECT_EQ(p.tpb, 256);
  EXPECT_EQ(plan_softmax(c10::kFloat, 1 << 22, false, 4, kSplit).splits, 64);
}

TEST(SoftmaxPlan, NameIsReadableAndCarriesTheIdentity) {
  const auto p = plan_softmax(c10::kBFloat16, 4096, false, 8, kRow);
  const std::string name = softmax_name(p, "sm_90a");
  EXPECT_EQ(name.rfind("softmax_fwd__bf16__n4096__v8", 0), 0u) << name;
  EXPECT_NE(name.find("sm_90a"), std::string::npos);
  const auto l = plan_softmax(c10::kBFloat16, 4096, true, 8, kRow);
  EXPECT_EQ(softmax_name(l, "sm_90a").rfind("log_softmax_fwd__", 0), 0u);
  EXPECT_NE(softmax_name(plan_softmax(c10::kBFloat16, 4096, false, 4, kRow), "sm_90a"), name);
}

// Cluster kernels exist for sm_90+ only (distributed shared memory).
TEST(SoftmaxClusterCompiles, ToCubinForSm90a) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  for (const auto& c : {Case{c10::kBFloat16, 128256, 8, kCluster}, Case{c10::kFloat, 16384, 4, kCluster},
                        Case{c10::kHalf, 100003, 1, kCluster}})  // odd row: scalar accesses, ragged chunks
    for (bool log : {false, true}) {
      const auto plan = plan_softmax(c.dtype, c.n, log, c.max_vec, c.impl);
      const auto sources = softmax_sources(plan, "sm_90a");
      ASSERT_EQ(sources.size(), 1u);
      const auto cubin = tileops::jit::compile_to_cubin(sources[0]);
      EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
      EXPECT_NE(cubin.lowered_name.find("softmax_fwd_cluster"), std::string::npos);
    }
}

// Staged rows (a CTA each, the row in shared memory): exact and ragged parts, both ops.
TEST(SoftmaxStagedCompiles, ToCubinForSm90a) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  for (const auto& c : {Case{c10::kBFloat16, 4096, 8, kStaged}, Case{c10::kFloat, 16384, 4, kStaged},
                        Case{c10::kHalf, 4104, 8, kStaged}})
    for (bool log : {false, true}) {
      const auto plan = plan_softmax(c.dtype, c.n, log, c.max_vec, c.impl);
      EXPECT_EQ(plan.smem_bytes(), c.n * static_cast<int>(c10::elementSize(c.dtype)));
      const auto sources = softmax_sources(plan, "sm_90a");
      ASSERT_EQ(sources.size(), 1u);
      const auto cubin = tileops::jit::compile_to_cubin(sources[0]);
      EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
      EXPECT_NE(cubin.lowered_name.find("softmax_fwd_staged"), std::string::npos);
    }
}

TEST(SoftmaxPlan, StagedRowsLeaveRoomForThreeLongRowsAnSm) {
  EXPECT_EQ(plan_softmax(c10::kBFloat16, 4096, false, 8, kStaged).tpb, 128);    // 8 KB: 4 vectors a thread
  EXPECT_EQ(plan_softmax(c10::kBFloat16, 8192, false, 8, kStaged).tpb, 256);     // 16 KB: still 4
  EXPECT_EQ(plan_softmax(c10::kBFloat16, 16384, false, 8, kStaged).tpb, 128);    // 32 KB: 16 a thread
  const auto vocab = plan_softmax(c10::kBFloat16, 32000, false, 8, kStaged);     // 64 KB rows
  EXPECT_EQ(vocab.tpb, 256);  // three CTAs an SM, as shared memory allows (at 1024 threads: two)
  EXPECT_EQ(vocab.smem_bytes(), 64000);
}

TEST(SoftmaxImplementations, ChosenByDeclaredApplicabilityAndPreference) {
  EXPECT_EQ(select_softmax(c10::kBFloat16, 128256, 8, 4, 9), kCluster);  // lm-head logits on sm_90
  EXPECT_EQ(select_softmax(c10::kBFloat16, 128256, 8, 4, 8), kSplit);    // no clusters before sm_90
  EXPECT_EQ(select_softmax(c10::kBFloat16, 128256, 8, 4096, 9), kRow);   // enough rows: a CTA each
  EXPECT_EQ(select_softmax(c10::kBFloat16, 4096, 8, 4, 9), kStaged);     // 8 KB rows on sm_90: shared memory
  EXPECT_EQ(select_softmax(c10::kBFloat16, 4096, 8, 4, 8), kRow);        // before sm_90: registers
  EXPECT_EQ(select_softmax(c10::kBFloat16, 4096, 4, 4, 9), kRow);        // 8-byte accesses
  EXPECT_EQ(select_softmax(c10::kBFloat16, 2048, 8, 4, 9), kRow);        // 4 KB rows: registers
  EXPECT_EQ(select_softmax(c10::kBFloat16, 65536, 8, 4096, 9), kRow);    // 128 KB rows: too long to stage
  EXPECT_EQ(select_softmax(c10::kFloat, 1 << 20, 4, 4, 9), kSplit);      // 4 MB rows exceed a cluster
  const auto p = plan_softmax(c10::kBFloat16, 128256, false, 8, kCluster);
  EXPECT_EQ(p.cluster, 16);  // 256 KB rows: 16 CTAs of 16 KB (few rows: more, smaller CTAs)
  EXPECT_EQ(p.tpb, 256);
}

TEST(SoftmaxImplementations, DeclarationOrderDecidesNothing) {
  auto impls = tileops::nvrtc::softmax_implementations();
  const SoftmaxProblem problems[] = {{false, c10::kBFloat16, 128256, 8, true}, {false, c10::kBFloat16, 4096, 8, true}};
  const tileops::nvrtc::SoftmaxTable& t = tileops::nvrtc::kSoftmaxTable;
  for (const auto& [p, cc] : {std::pair{problems[0], 9}, std::pair{problems[0], 8}, std::pair{problems[1], 9}}) {
    const DeviceFacts dev = facts(cc);
    const tileops::nvrtc::SoftmaxQuery q{p, 8, dev, t};
    const int first = tileops::nvrtc::select_implementation("t", impls, q).id;
    std::reverse(impls.begin(), impls.end());
    EXPECT_EQ(tileops::nvrtc::select_implementation("t", impls, q).id, first);
    std::rotate(impls.begin(), impls.begin() + 1, impls.end());
    EXPECT_EQ(tileops::nvrtc::select_implementation("t", impls, q).id, first);
  }
}

TEST(SoftmaxImplementations, AMissingPreferenceIsAnError) {
  auto impls = tileops::nvrtc::softmax_implementations();
  for (auto& i : impls) i.preferred_over = 0;  // split and row-per-cta both apply to lm-head rows
  try {
    const SoftmaxProblem p{false, c10::kBFloat16, 128256, 8, true};
    const DeviceFacts dev = facts(8);
    tileops::nvrtc::select_implementation("tileops::reduction_softmax_fwd", impls,
                                          tileops::nvrtc::SoftmaxQuery{p, 8, dev, tileops::nvrtc::kSoftmaxTable});
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tileops::reduction_softmax_fwd"), std::string::npos) << what;
    EXPECT_NE(what.find("row-per-cta, split"), std::string::npos) << what;
  }
}

}  // namespace
