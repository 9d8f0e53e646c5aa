// Kernel specs, plans and tuning of the nvrtc target, without a GPU: eps is a launch argument (two
// eps values, one spec and one source), the sources an offline warm-up gets for a named device are
// the ones the build path compiles (same disk keys), TILEOPS_TUNE is validated and reaches the plans.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/norm/norm_bwd_launch.h"
#include "targets/nvrtc/norm/row_norm_launch.h"
#include "targets/nvrtc/reduction/softmax_launch.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace {

using namespace tileops::nvrtc;
using tileops::OpCall;
using tileops::ParamValue;

// One call's tensors and params (CPU tensors: the problem reads shapes, dtypes and alignment only).
struct Call {
  std::vector<at::Tensor> in, out;
  std::vector<ParamValue> params;
  OpCall call(const char* op) const {
    return OpCall{0, op, c10::Device(c10::kCPU), in, out, params};
  }
};

at::Tensor t(std::vector<int64_t> shape, c10::ScalarType dtype = c10::kBFloat16) {
  return at::empty(shape, at::TensorOptions().dtype(dtype));
}

// The build path of spec_builder without a GPU: identity plans the call's problem into the table,
// build reads the spec back and compiles its sources.
template <class Family>
std::vector<tileops::jit::KernelSource> build_path_sources(const Family& f, const OpCall& call, const DeviceFacts& dev) {
  SpecTable<Family> table;
  return table.spec(table.id_for(f, f.problem(call), dev, 0)).sources();
}

std::vector<std::string> disk_keys(const std::vector<tileops::jit::KernelSource>& sources) {
  std::vector<std::string> keys;
  for (const auto& s : sources) keys.push_back(tileops::jit::disk_key(s));
  return keys;
}

const std::vector<int64_t> kShape4096{4096};
const std::vector<int64_t> kShape8192{8192};

Call rms_norm_call(double eps) {
  namespace op = tileops::ops::norm_rms_norm_fwd;
  static_assert(op::x == 0 && op::weight == 1 && op::normalized_shape == 0 && op::eps == 1);
  return Call{{t({64, 4096}), t({4096})}, {t({64, 4096})},
              {ParamValue::ints(kShape4096), ParamValue::real(eps)}};
}

Call layer_norm_call(double eps) {
  namespace op = tileops::ops::norm_layer_norm_fwd;
  static_assert(op::x == 0 && op::weight == 1 && op::bias == 2);
  return Call{{t({64, 8192}), t({8192}), t({8192})}, {t({64, 8192})},
              {ParamValue::ints(kShape8192), ParamValue::real(eps)}};
}

Call rms_norm_bwd_call(double eps) {
  namespace op = tileops::ops::norm_rms_norm_bwd;
  static_assert(op::dy == 0 && op::x == 1 && op::weight == 2 && op::dx == 0 && op::dweight == 1);
  return Call{{t({64, 4096}), t({64, 4096}), t({4096})}, {t({64, 4096}), t({4096})},
              {ParamValue::ints(kShape4096), ParamValue::real(eps)}};
}

TEST(EpsIsALaunchArgument, TwoEpsValuesShareOneSpecAndOneSource) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const DeviceFacts h200 = named_device_facts("h200");
  {
    const auto f = rms_norm_fwd_family();
    const Call a = rms_norm_call(1e-5), b = rms_norm_call(1e-6);
    EXPECT_EQ(f.problem(a.call("tileops::norm_rms_norm_fwd")), f.problem(b.call("tileops::norm_rms_norm_fwd")));
    SpecTable<RowNormFamily> table;
    EXPECT_EQ(table.id_for(f, f.problem(a.call("a")), h200, 0), table.id_for(f, f.problem(b.call("b")), h200, 0));
    EXPECT_EQ(disk_keys(build_path_sources(f, a.call("a"), h200)), disk_keys(build_path_sources(f, b.call("b"), h200)));
  }
  {
    const auto f = layer_norm_fwd_family();
    EXPECT_EQ(f.problem(layer_norm_call(1e-5).call("a")), f.problem(layer_norm_call(1e-3).call("b")));
  }
  {
    const auto f = rms_norm_bwd_family();
    EXPECT_EQ(f.problem(rms_norm_bwd_call(1e-5).call("a")), f.problem(rms_norm_bwd_call(1e-6).call("b")));
  }
}

// What an offline warm-up compiles for a named device (no GPU) is what a call's build loads there.
TEST(OfflineSources, EqualWhatTheBuildPathCompiles) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  for (const char* device : {"h200", "a100"}) {
    const DeviceFacts dev = named_device_facts(device);
    {
      const auto f = rms_norm_fwd_family();
      RowNormProblem q{RowNormOp::kRmsNorm, c10::kBFloat16, 4096, 8, true};
      q.few_rows = true;  // the call's 64 rows
      EXPECT_EQ(disk_keys(kernel_sources(f, q, dev)), disk_keys(build_path_sources(f, rms_norm_call(1e-6).call("r"), dev)));
    }
    {
      const auto f = layer_norm_fwd_family();
      const RowNormProblem q{RowNormOp::kLayerNorm, c10::kBFloat16, 8192, 8, true, true};
      const auto sources = kernel_sources(f, q, dev);
      EXPECT_EQ(disk_keys(sources), disk_keys(build_path_sources(f, layer_norm_call(1e-5).call("l"), dev)));
      EXPECT_EQ(sources[0].name.find("staged") != std::string::npos, dev.cc_major >= 9) << sources[0].name;
    }
    {
      const auto f = rms_norm_bwd_family();
      const NormBwdProblem q{false, c10::kBFloat16, 4096, 8, true, true, false};
      const auto sources = kernel_sources(f, q, dev);
      ASSERT_EQ(sources.size(), 2u);  // the main kernel and the reduction of dweight
      EXPECT_EQ(disk_keys(sources), disk_keys(build_path_sources(f, rms_norm_bwd_call(1e-6).call("b"), dev)));
    }
    {
      const SoftmaxFamily f{false};
      const Call c{{t({4, 128256})}, {t({4, 128256})}, {ParamValue::integer(-1)}};
      const SoftmaxProblem q{false, c10::kBFloat16, 128256, 8, true};
      EXPECT_EQ(disk_keys(kernel_sources(f, q, dev)), disk_keys(build_path_sources(f, c.call("s"), dev)));
    }
    for (const auto& s : kernel_sources(rms_norm_fwd_family(), RowNormProblem{RowNormOp::kRmsNorm, c10::kBFloat16, 4096, 8, true}, dev))
      EXPECT_EQ(s.arch, dev.arch);
  }
}

TEST(DeviceFacts, NamedDevicesNeedNoGpu) {
  const DeviceFacts h200 = named_device_facts("h200");
  EXPECT_EQ(h200.arch, "sm_90a");
  EXPECT_EQ(h200.sm_count, 132);
  EXPECT_EQ(h200.max_smem_optin, 227 * 1024);
  EXPECT_EQ(named_device_facts("sm_90a").arch, "sm_90a");
  const DeviceFacts a100 = named_device_facts("a100");
  EXPECT_EQ(a100.arch, "sm_80");
  EXPECT_EQ(a100.sm_count, 108);
  EXPECT_EQ(named_device_facts("l40s").arch, "sm_89");
  EXPECT_THROW(named_device_facts("v100"), std::invalid_argument);
}

TEST(Tuning, ParsesKnownKeysAndRejectsTheRest) {
  EXPECT_EQ(parse_tuning(""), Tuning{});
  const Tuning t = parse_tuning("rms_vecs_per_thread=8,cluster_max=16");
  EXPECT_EQ(t.rms_vecs_per_thread, 8);
  EXPECT_EQ(t.cluster_max, 16);
  EXPECT_EQ(t.softmax_vecs_per_thread, 0);
  for (const char* bad : {"no_such_key=1", "rms_vecs_per_thread", "rms_vecs_per_thread=0", "rms_vecs_per_thread=x",
                          "cluster_max=17", "rms_vecs_per_thread=4x", "ew_unroll=3",
                          "gn_cta_threads=96"}) {
    try {
      parse_tuning(bad);
      FAIL() << bad << " was accepted";
    } catch (const c10::Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("TILEOPS_TUNE"), std::string::npos) << what;
    }
  }
  try {
    parse_tuning("staged_walk=1");
    FAIL();
  } catch (const c10::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unknown key 'staged_walk'"), std::string::npos) << what;
    EXPECT_NE(what.find("norm_bwd_blocks_per_sm"), std::string::npos) << what;  // the keys are listed
  }
}

TEST(Tuning, EveryKeyIsListedAndReachesItsField) {
  const std::string list = describe_tuning_keys();
  for (const auto& k : tuning_keys()) {
    EXPECT_NE(list.find(k.name), std::string::npos) << k.name;
    const Tuning t = parse_tuning(std::string(k.name) + "=" + std::to_string(k.hi));
    EXPECT_EQ(t.*(k.field), k.hi) << k.name;
    EXPECT_NE(t, Tuning{}) << k.name;
  }
}

TEST(Tuning, OverridesReachThePlans) {
  const DeviceFacts h200 = named_device_facts("h200");
  const RowNormProblem q{RowNormOp::kRmsNorm, c10::kBFloat16, 4096, 8, true};
  EXPECT_EQ(plan_row_norm(q, h200).tpr, 128);  // 512 vectors, 4 a thread
  EXPECT_EQ(plan_row_norm(q, h200, parse_tuning("rms_vecs_per_thread=8")).tpr, 64);
  const RowNormProblem staged{RowNormOp::kRmsNorm, c10::kBFloat16, 8192, 8, true};
  EXPECT_EQ(plan_row_norm(staged, h200).impl, RowNormImpl::kStaged);
  EXPECT_EQ(plan_row_norm(staged, h200, parse_tuning("staged_min_row_bytes=1073741824")).impl,
            RowNormImpl::kRegisterResident);
}

// A spec is a value: equal problems on equal devices plan equal specs; the spec is the cache identity.
TEST(SpecTable, EqualSpecsShareAnIdDevicesPlanSeparately) {
  const auto f = rms_norm_fwd_family();
  SpecTable<RowNormFamily> table;
  const RowNormProblem a{RowNormOp::kRmsNorm, c10::kBFloat16, 4096, 8, true};
  RowNormProblem b = a;
  b.max_vec = 16;  // wider pointers, same access width: the same kernel
  const DeviceFacts h200 = named_device_facts("h200"), a100 = named_device_facts("a100");
  const uint32_t id = table.id_for(f, a, h200, 0);
  EXPECT_EQ(table.id_for(f, b, h200, 0), id);
  EXPECT_EQ(table.id_for(f, a, h200, 1), id);  // a second H200
  const uint32_t other = table.id_for(f, a, a100, 2);
  EXPECT_NE(other, id);
  EXPECT_EQ(table.spec(other).arch, "sm_80");
  EXPECT_EQ(table.spec(id).describe(), "rms_norm_fwd(dtype=bf16, n=4096, weight=yes, vec=8, impl=register-resident)");
}

}  // namespace
