// GroupNormFwdOp / InstanceNormFwdOp on the nvrtc target without a GPU: every kernel the plans
// instantiate compiles with NVRTC to CUBIN for sm_80 and sm_90a, the plans pick the intended kernel
// for each shape on an H200 (the GPU tests' shapes among them), and what a call builds is what an
// offline warm-up compiles.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/norm/group_norm.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace {

using namespace tileops::nvrtc;
using tileops::OpCall;
using tileops::ParamValue;

DeviceFacts h200() { return named_device_facts("h200"); }

// The problem of x [n, c, *spatial] in `groups` groups, with pointers aligned for 16-byte accesses.
GroupNormProblem problem(c10::ScalarType dtype, std::vector<int64_t> shape, int64_t groups, bool weight = true,
                         bool bias = true, bool running = false, int max_vec = 16) {
  int64_t hw = 1;
  for (size_t d = 2; d < shape.size(); ++d) hw *= shape[d];
  GroupNormProblem q{};
  q.dtype = dtype;
  q.rows = shape[0] * groups;
  q.groups = groups;
  q.cpg = shape[1] / groups;
  q.hw = hw;
  q.max_vec = max_vec;
  q.weight = weight;
  q.bias = bias;
  q.running = running;
  return q;
}

void expect_compiles(const GroupNormProblem& q, const char* arch) {
  const GroupNormSpec s = plan_group_norm(q, named_device_facts(arch));
  const auto sources = s.sources();
  ASSERT_EQ(sources.size(), s.impl == GroupNormImpl::kSplit && !s.running ? 2u : 1u) << s.describe();
  for (const auto& src : sources) {
    const auto cubin = tileops::jit::compile_to_cubin(src);
    ASSERT_GT(cubin.image.size(), 4u) << src.name;
    EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
    EXPECT_NE(src.name.find(arch), std::string::npos) << src.name;
    EXPECT_NE(cubin.lowered_name.find("group_norm_fwd_"), std::string::npos) << cubin.lowered_name;
  }
}

class GroupNormCompiles : public ::testing::TestWithParam<const char*> {};

// Each kernel template in each form a plan gives it: short rows several a CTA, rows in registers (up to
// 1024 threads), streamed rows, split rows (stats + apply), running stats (rows and split), scalar
// accesses, every dtype, weight and bias each on and off.
TEST_P(GroupNormCompiles, EveryPlannedKernelToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const char* arch = GetParam();
  expect_compiles(problem(c10::kHalf, {5, 32}, 32, false, false), arch);               // rows of 1
  expect_compiles(problem(c10::kBFloat16, {3, 6, 5}, 3, true, false), arch);           // scalar, 4 threads a row
  expect_compiles(problem(c10::kHalf, {8, 128, 32, 32}, 32, false, true), arch);       // registers, 128 threads
  expect_compiles(problem(c10::kFloat, {8, 128, 32, 32}, 32), arch);
  expect_compiles(problem(c10::kHalf, {2, 32, 64, 128}, 4), arch);                     // registers, 1024 threads
  expect_compiles(problem(c10::kBFloat16, {12, 128, 130, 130}, 32), arch);             // streamed
  expect_compiles(problem(c10::kFloat, {12, 128, 130, 130}, 32, false, false), arch);
  expect_compiles(problem(c10::kHalf, {4, 128, 1024, 1024}, 32), arch);                // split
  expect_compiles(problem(c10::kFloat, {3, 4, 255, 257}, 2, true, false), arch);       // split, scalar
  expect_compiles(problem(c10::kBFloat16, {8, 128, 32, 32}, 128, false, false, true), arch);  // running rows
  expect_compiles(problem(c10::kHalf, {1, 3, 1024, 1024}, 3, true, true, true), arch);        // running split
}

INSTANTIATE_TEST_SUITE_P(Archs, GroupNormCompiles, ::testing::Values("sm_80", "sm_90a"));

TEST(GroupNormPlan, ShortRowsShareACtaAndRowsOfAThousandKeepThemInRegisters) {
  auto s = plan_group_norm(problem(c10::kHalf, {5, 32}, 32), h200());  // rows of one element
  EXPECT_EQ(s.impl, GroupNormImpl::kRows);
  EXPECT_EQ(s.tpr, 1);
  EXPECT_EQ(s.rows, 256);
  EXPECT_EQ(s.cache, 1);
  s = plan_group_norm(problem(c10::kHalf, {16, 64, 8, 8}, 64), h200());  // rows of 64: 8 vectors
  EXPECT_EQ(s.vec, 8);
  EXPECT_EQ(s.tpr, 2);
  EXPECT_EQ(s.rows, 128);
  s = plan_group_norm(problem(c10::kHalf, {8, 128, 32, 32}, 32), h200());  // TileOPs' image-g32
  EXPECT_EQ(s.impl, GroupNormImpl::kRows);
  EXPECT_EQ(s.vec, 8);
  EXPECT_EQ(s.tpr, 128);
  EXPECT_EQ(s.rows, 1);
  EXPECT_EQ(s.cache, 4);
  s = plan_group_norm(problem(c10::kHalf, {4, 128, 30, 30}, 16), h200());  // tail-spatial-g16: 900 = 4 * 225
  EXPECT_EQ(s.vec, 4);
  EXPECT_EQ(s.tpr, 256);
  EXPECT_EQ(s.cache, 8);
  s = plan_group_norm(problem(c10::kHalf, {2, 32, 64, 64}, 4), h200());  // rows of 32768
  EXPECT_EQ(s.tpr, 512);
  EXPECT_EQ(s.cache, 8);
  s = plan_group_norm(problem(c10::kHalf, {2, 32, 64, 128}, 4), h200());  // rows of 65536: the most in registers
  EXPECT_EQ(s.impl, GroupNormImpl::kRows);
  EXPECT_EQ(s.tpr, 1024);
  EXPECT_EQ(s.cache, 8);
}

TEST(GroupNormPlan, LongRowsAreStreamedWhenManyAndSplitWhenFew) {
  // 384 rows of 67600: enough rows for every SM, each read twice by 1024 threads.
  const auto many = problem(c10::kBFloat16, {12, 128, 130, 130}, 32);
  auto s = plan_group_norm(many, h200());
  EXPECT_EQ(s.impl, GroupNormImpl::kRows);
  EXPECT_EQ(s.tpr, 1024);
  EXPECT_EQ(s.cache, 0);
  EXPECT_EQ(group_norm_splits(many, h200()), 1);
  // TileOPs' large-spatial shape with 32 groups: 128 rows of 4M elements over about 4 waves of CTAs.
  const auto few = problem(c10::kHalf, {4, 128, 1024, 1024}, 32);
  s = plan_group_norm(few, h200());
  EXPECT_EQ(s.impl, GroupNormImpl::kSplit);
  EXPECT_EQ(s.vec, 8);
  EXPECT_EQ(s.threads(), 256);
  EXPECT_EQ(group_norm_splits(few, h200()), 33);  // ceil(132 SMs * 8 CTAs * 4 / 128 rows)
  // A split chunk keeps every thread busy: at most rows / (256 threads * 4 vectors) splits.
  const auto odd = problem(c10::kFloat, {3, 4, 255, 257}, 2);  // 6 rows of 131070, scalar accesses
  s = plan_group_norm(odd, h200());
  EXPECT_EQ(s.impl, GroupNormImpl::kSplit);
  EXPECT_EQ(s.vec, 1);
  EXPECT_EQ(group_norm_splits(odd, h200()), 127);
  // The GPU tests' other split shapes.
  EXPECT_EQ(plan_group_norm(problem(c10::kHalf, {2, 64, 256, 256}, 8), h200()).impl, GroupNormImpl::kSplit);
  EXPECT_EQ(plan_group_norm(problem(c10::kHalf, {1, 12, 16, 64, 64}, 3), h200()).impl, GroupNormImpl::kSplit);
  EXPECT_EQ(plan_group_norm(problem(c10::kHalf, {1, 4, 512, 512}, 4), h200()).impl, GroupNormImpl::kSplit);
}

TEST(GroupNormPlan, RunningStatsNeedNoReductionAndNoRegisters) {
  auto s = plan_group_norm(problem(c10::kHalf, {8, 128, 32, 32}, 128, true, true, true), h200());
  EXPECT_EQ(s.impl, GroupNormImpl::kRows);
  EXPECT_EQ(s.cache, 0);
  EXPECT_EQ(s.sources().size(), 1u);
  // One vector a thread (128 a row), where the input's stats take four (32 threads, 8 rows a CTA).
  EXPECT_EQ(s.tpr, 128);
  EXPECT_EQ(s.rows, 1);
  EXPECT_EQ(plan_group_norm(problem(c10::kHalf, {8, 128, 32, 32}, 128), h200()).tpr, 32);
  EXPECT_EQ(plan_group_norm(problem(c10::kHalf, {4, 64, 30, 30}, 64, false, false, true), h200()).tpr, 256);
  // The tuning keys move both (sweep.py --spatial).
  Tuning t;
  t.gn_running_vecs_per_thread = 4;
  EXPECT_EQ(plan_group_norm(problem(c10::kHalf, {8, 128, 32, 32}, 128, true, true, true), h200(), t).tpr, 32);
  t.gn_vecs_per_thread = 2;
  t.gn_cta_threads = 32;
  const auto in = plan_group_norm(problem(c10::kHalf, {8, 128, 32, 32}, 128), h200(), t);
  EXPECT_EQ(in.tpr, 64);
  EXPECT_EQ(plan_group_norm(problem(c10::kHalf, {16, 64, 8, 8}, 64), h200(), t).rows, 8);  // 4 threads a row
  EXPECT_THROW(parse_tuning("gn_cta_threads=100"), c10::Error);  // whole warps: powers of two only
  const Tuning warps2 = parse_tuning("gn_vecs_per_thread=2,gn_cta_threads=64");
  EXPECT_EQ(plan_group_norm(problem(c10::kHalf, {16, 64, 8, 8}, 64), h200(), warps2).rows, 16);  // 4 threads a row
  s = plan_group_norm(problem(c10::kHalf, {1, 3, 1024, 1024}, 3, false, false, true), h200());
  EXPECT_EQ(s.impl, GroupNormImpl::kSplit);
  const auto sources = s.sources();
  ASSERT_EQ(sources.size(), 1u);  // the output pass only
  EXPECT_EQ(sources[0].name.rfind("group_norm_fwd_apply__", 0), 0u) << sources[0].name;
  EXPECT_NE(sources[0].name.find("_running"), std::string::npos);
  // Odd spatial size: scalar accesses, rows split into uneven chunks.
  s = plan_group_norm(problem(c10::kHalf, {2, 5, 99, 101}, 5, true, true, true), h200());
  EXPECT_EQ(s.vec, 1);
  EXPECT_EQ(s.impl, GroupNormImpl::kSplit);
}

TEST(GroupNormPlan, AccessWidthDividesTheSpatialSizeAndFollowsTheAlignment) {
  EXPECT_EQ(plan_group_norm(problem(c10::kHalf, {2, 8, 28, 28}, 4), h200()).vec, 8);   // 784 = 8 * 98
  EXPECT_EQ(plan_group_norm(problem(c10::kFloat, {2, 8, 28, 28}, 4), h200()).vec, 4);
  EXPECT_EQ(plan_group_norm(problem(c10::kHalf, {2, 8, 30, 30}, 4), h200()).vec, 4);   // 900 = 4 * 225
  EXPECT_EQ(plan_group_norm(problem(c10::kHalf, {2, 8, 7, 7}, 4), h200()).vec, 1);     // 49: odd
  EXPECT_EQ(plan_group_norm(problem(c10::kHalf, {2, 8}, 4), h200()).vec, 1);           // 2-d x: one a channel
  EXPECT_EQ(plan_group_norm(problem(c10::kHalf, {2, 8, 64}, 4, true, true, false, 2), h200()).vec, 2);  // 4-byte aligned
  EXPECT_EQ(plan_group_norm(problem(c10::kHalf, {2, 8, 64}, 4, true, true, false, 1), h200()).vec, 1);
}

TEST(GroupNormPlan, PureAndNamedByWhatItCompiles) {
  const auto q = problem(c10::kBFloat16, {8, 128, 32, 32}, 32, true, false);
  const auto a = plan_group_norm(q, h200()), b = plan_group_norm(q, h200());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  auto other = q;
  other.rows = 2 * q.rows;  // more samples: the same kernel
  EXPECT_EQ(plan_group_norm(other, h200()), a);
  EXPECT_EQ(a.sources()[0].name, "group_norm_fwd_rows__bf16__v8_t128_r1_c4_w_nb__sm_90a");
  EXPECT_EQ(a.describe(),
            "group_norm_fwd(dtype=bf16, stats=input, weight=yes, bias=no, vec=8, impl=rows, tpr=128, rows=1, cache=4)");
  const auto split = plan_group_norm(problem(c10::kHalf, {4, 128, 1024, 1024}, 32), named_device_facts("a100"));
  EXPECT_EQ(split.arch, "sm_80");
  const auto names = split.sources();
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0].name, "group_norm_fwd_stats__f16__v8_t256__sm_80");
  EXPECT_EQ(names[1].name, "group_norm_fwd_apply__f16__v8_t256_w_b__sm_80");
}

// ---- calls: the problem read from a call, and what its build compiles ------------------------------

struct Call {
  std::vector<at::Tensor> in, out;
  std::vector<ParamValue> params;
  OpCall call(const char* op) const { return OpCall{0, op, c10::Device(c10::kCPU), in, out, params}; }
};

at::Tensor t(std::vector<int64_t> shape, c10::ScalarType dtype = c10::kHalf) {
  return at::empty(shape, at::TensorOptions().dtype(dtype));
}

Call group_norm_call(std::vector<int64_t> shape, int64_t groups, double eps) {
  namespace op = tileops::ops::norm_group_norm_fwd;
  static_assert(op::x == 0 && op::weight == 1 && op::bias == 2 && op::num_groups == 0 && op::eps == 1);
  return Call{{t(shape), t({shape[1]}), at::Tensor()}, {t(shape)}, {ParamValue::integer(groups), ParamValue::real(eps)}};
}

Call instance_norm_call(std::vector<int64_t> shape, bool use_input_stats) {
  namespace op = tileops::ops::norm_instance_norm_fwd;
  static_assert(op::x == 0 && op::running_mean == 1 && op::running_var == 2 && op::weight == 3 && op::bias == 4);
  static_assert(op::use_input_stats == 0 && op::momentum == 1 && op::eps == 2);
  const at::Tensor stats = use_input_stats ? at::Tensor() : t({shape[1]}, c10::kFloat);
  return Call{{t(shape), stats, stats, at::Tensor(), t({shape[1]})},
              {t(shape)},
              {ParamValue::boolean(use_input_stats), ParamValue::real(0.1), ParamValue::real(1e-5)}};
}

template <class Family>
std::vector<std::string> build_path_keys(const Family& f, const OpCall& call, const DeviceFacts& dev) {
  SpecTable<Family> table;
  std::vector<std::string> keys;
  for (const auto& s : table.spec(table.id_for(f, f.problem(call), dev, 0)).sources())
    keys.push_back(tileops::jit::disk_key(s));
  return keys;
}

std::vector<std::string> offline_keys(const GroupNormFamily& f, const GroupNormProblem& q, const DeviceFacts& dev) {
  std::vector<std::string> keys;
  for (const auto& s : kernel_sources(f, q, dev)) keys.push_back(tileops::jit::disk_key(s));
  return keys;
}

TEST(GroupNormCall, ProblemReadsGroupsChannelsAndSpatialSizeEpsIsALaunchArgument) {
  const auto f = group_norm_fwd_family();
  const auto q = f.problem(group_norm_call({4, 12, 5, 6}, 3, 1e-5).call("g"));
  EXPECT_EQ(q.rows, 12);
  EXPECT_EQ(q.groups, 3);
  EXPECT_EQ(q.cpg, 4);
  EXPECT_EQ(q.hw, 30);
  EXPECT_TRUE(q.weight);
  EXPECT_FALSE(q.bias);
  EXPECT_FALSE(q.running);
  EXPECT_EQ(q, f.problem(group_norm_call({4, 12, 5, 6}, 3, 1e-2).call("g")));
  // InstanceNormFwdOp: a group a channel; the running stats only without the input's.
  const auto i = instance_norm_fwd_family();
  const auto qi = i.problem(instance_norm_call({4, 12, 5, 6}, true).call("i"));
  EXPECT_EQ(qi.groups, 12);
  EXPECT_EQ(qi.cpg, 1);
  EXPECT_EQ(qi.rows, 48);
  EXPECT_FALSE(qi.running);
  EXPECT_FALSE(qi.weight);
  EXPECT_TRUE(qi.bias);
  EXPECT_TRUE(i.problem(instance_norm_call({4, 12, 5, 6}, false).call("i")).running);
  EXPECT_EQ(i.problem(instance_norm_call({4, 12}, false).call("i")).hw, 1);
}

TEST(GroupNormCall, OfflineSourcesEqualWhatTheBuildPathCompiles) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  for (const char* device : {"h200", "a100"}) {
    const DeviceFacts dev = named_device_facts(device);
    const auto g = group_norm_fwd_family();
    for (const auto& shape : {std::vector<int64_t>{8, 128, 32, 32}, std::vector<int64_t>{4, 128, 1024, 1024}}) {
      const Call c = group_norm_call(shape, 32, 1e-5);  // the OpCall views its tensors and params
      const OpCall call = c.call("g");
      EXPECT_EQ(offline_keys(g, g.problem(call), dev), build_path_keys(g, call, dev));
    }
    const auto i = instance_norm_fwd_family();
    for (bool stats : {true, false}) {
      const Call c = instance_norm_call({1, 3, 1024, 1024}, stats);
      const OpCall call = c.call("i");
      const auto keys = build_path_keys(i, call, dev);
      EXPECT_EQ(offline_keys(i, i.problem(call), dev), keys);
      EXPECT_EQ(keys.size(), stats ? 2u : 1u);
    }
  }
}

}  // namespace
