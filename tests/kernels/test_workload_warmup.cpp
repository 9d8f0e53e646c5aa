// The offline warm-up from workloads, without a GPU: an op call made with CPU tensors while an
// offline plan for a named device is active goes through the generated boundary and yields the
// kernels a build of that call loads on that device (same disk-cache keys), and builds nothing.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "tileops/target.h"
#include "targets/nvrtc/norm/row_norm_launch.h"
#include "targets/nvrtc/offline_plan.h"
#include "targets/nvrtc/reduction/softmax_launch.h"
#include "targets/nvrtc/spec_builder.h"

namespace {

using namespace tileops::nvrtc;

std::vector<std::string> disk_keys(const std::vector<tileops::jit::KernelSource>& sources) {
  std::vector<std::string> keys;
  for (const auto& s : sources) keys.push_back(tileops::jit::disk_key(s));
  return keys;
}

// The keys the offline plan collects for one call of `op` through the dispatcher.
std::vector<std::string> offline_keys(const char* device, const char* op, std::vector<c10::IValue> args) {
  begin_offline_plan(device);
  try {
    auto stack = std::move(args);
    c10::Dispatcher::singleton().findSchemaOrThrow(op, "").callBoxed(&stack);
  } catch (...) {
    end_offline_plan();
    throw;
  }
  return disk_keys(end_offline_plan());
}

// What the nvrtc build of a call loads on a device (spec_builder's identity, then the spec's sources).
template <class Family>
std::vector<std::string> build_path_keys(const Family& f, const tileops::OpCall& call, const DeviceFacts& dev) {
  SpecTable<Family> table;
  return disk_keys(table.spec(table.id_for(f, f.problem(call), dev, 0)).sources());
}

at::Tensor bf16(std::vector<int64_t> shape) { return at::empty(shape, at::TensorOptions().dtype(at::kBFloat16)); }

// Workloads of manifests/norm.yaml (RMSNormFwdOp llama-8b-prefill, long-row) and
// manifests/reduction.yaml (SoftmaxFwdOp lm-head-logits): the register, cluster and split plans.
TEST(WorkloadWarmup, OfflineCallsPlanWhatTheBuildPathLoads) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto before = tileops::runtime_stats();
  for (const char* device : {"h200", "a100", "sm_90a"}) {
    const DeviceFacts dev = named_device_facts(device);
    for (int64_t n : {4096, 131072}) {
      const int64_t rows = n == 4096 ? 2048 : 64;
      const at::Tensor x = bf16({rows, n}), w = bf16({n}), y = bf16({rows, n});
      const std::vector<int64_t> ns{n};
      const std::vector<at::Tensor> in{x, w}, out{y};
      const std::vector<tileops::ParamValue> params{tileops::ParamValue::ints(ns), tileops::ParamValue()};
      const tileops::OpCall call{0, "tileops::norm_rms_norm_fwd", c10::Device(c10::kCPU), in, out, params};
      const auto offline = offline_keys(device, "tileops::norm_rms_norm_fwd",
                                        {x, w, c10::IValue(ns), c10::IValue(), c10::IValue()});
      ASSERT_FALSE(offline.empty());
      EXPECT_EQ(offline, build_path_keys(rms_norm_fwd_family(), call, dev)) << device << " n=" << n;
    }
    {
      const at::Tensor x = bf16({4, 128256}), y = bf16({4, 128256});
      const std::vector<at::Tensor> in{x}, out{y};
      const std::vector<tileops::ParamValue> params{tileops::ParamValue::integer(-1)};
      const tileops::OpCall call{0, "tileops::reduction_softmax_fwd", c10::Device(c10::kCPU), in, out, params};
      const auto offline = offline_keys(device, "tileops::reduction_softmax_fwd", {x, c10::IValue(int64_t{-1}), c10::IValue()});
      EXPECT_EQ(offline, build_path_keys(SoftmaxFamily{false}, call, dev)) << device;
    }
  }
  // The h200 and a100 plans differ (arch and device facts), and nothing was built or compiled.
  EXPECT_NE(offline_keys("h200", "tileops::norm_rms_norm_fwd", {bf16({2048, 4096}), bf16({4096}),
                                                                 c10::IValue(std::vector<int64_t>{4096}), c10::IValue(), c10::IValue()}),
            offline_keys("a100", "tileops::norm_rms_norm_fwd", {bf16({2048, 4096}), bf16({4096}),
                                                                 c10::IValue(std::vector<int64_t>{4096}), c10::IValue(), c10::IValue()}));
  const auto after = tileops::runtime_stats();
  EXPECT_EQ(after.kernel_builds, before.kernel_builds);
  EXPECT_EQ(after.nvrtc_compiles, before.nvrtc_compiles);
  EXPECT_EQ(offline_plan(), nullptr);
}

TEST(WorkloadWarmup, TheBoundaryStillChecksTheCall) {
  const at::Tensor x = bf16({8, 4096});
  try {
    offline_keys("h200", "tileops::norm_rms_norm_fwd", {x, bf16({1024}), c10::IValue(std::vector<int64_t>{4096}),
                                                        c10::IValue(), c10::IValue()});
    FAIL() << "a weight of the wrong shape was planned";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("weight"), std::string::npos) << e.what_without_backtrace();
  }
  EXPECT_EQ(offline_plan(), nullptr);
}

TEST(WorkloadWarmup, UnknownDeviceIsRefusedNamingTheKnownOnes) {
  try {
    begin_offline_plan("h300");
    FAIL() << "h300 was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("h300"), std::string::npos) << msg;
    EXPECT_NE(msg.find("h200"), std::string::npos) << msg;
  }
  EXPECT_EQ(offline_plan(), nullptr);
}

}  // namespace
