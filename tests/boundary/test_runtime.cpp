// Runtime and registry behaviour through the real dispatcher (CPU tensors; no GPU needed).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "boundary/runtime.h"
#include "tileops/ops.h"
#include "tileops/target.h"
#include "tileops_generated/ops.h"

namespace {

using RmsNormFn = at::Tensor(const at::Tensor&, const std::optional<at::Tensor>&, c10::SymIntArrayRef,
                             std::optional<double>, std::optional<c10::string_view>);

at::Tensor rms_norm(const at::Tensor& x, std::optional<c10::string_view> target = std::nullopt) {
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("tileops::norm_rms_norm_fwd", "").typed<RmsNormFn>();
  const std::vector<c10::SymInt> ns{c10::SymInt(x.size(-1))};
  return op.call(x, std::nullopt, ns, std::nullopt, target);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "";
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)

// A kernel that fills its output with a constant, so tests can see which target served a call.
class FillKernel : public tileops::Kernel {
 public:
  explicit FillKernel(double v) : v_(v) {}
  void launch(const tileops::OpCall& call) const override { call.outputs[0].fill_(v_); }

 private:
  double v_;
};

tileops::KernelBuilder fill_builder(double v, std::atomic<int>* builds = nullptr, int sleep_ms = 0) {
  tileops::KernelBuilder b;
  b.identity = [](const tileops::OpCall& call) { return tileops::BuildKey{call.inputs[0].size(-1)}; };
  b.build = [=](const tileops::OpCall&, const tileops::BuildKey&) -> std::shared_ptr<const tileops::Kernel> {
    if (sleep_ms) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    if (builds) ++*builds;
    return std::make_shared<FillKernel>(v);
  };
  return b;
}

struct ScopedTarget {
  std::string name;
  ~ScopedTarget() { tileops::unregister_target(name); }
};

TEST(Runtime, BuilderRefusesMetaTensors) {
  const auto before = tileops::runtime_stats().kernel_builds;
  at::Tensor x = at::empty({2, 8}, at::device(at::kMeta));
  at::Tensor y = at::empty({2, 8}, at::device(at::kMeta));
  const std::array<at::Tensor, 2> ins{x, at::Tensor()};
  const std::array<at::Tensor, 1> outs{y};
  const int64_t ns[] = {8};
  const std::array<tileops::ParamValue, 2> params{tileops::ParamValue::ints(ns), tileops::ParamValue()};
  const tileops::OpCall call{tileops::ops::norm_rms_norm_fwd::kId, "tileops::norm_rms_norm_fwd", x.device(), ins, outs,
                             params};
  const std::string err = error_of([&] { tileops::runtime::invoke(call, "reference"); });
  EXPECT_CONTAINS(err, "tileops::norm_rms_norm_fwd: refusing to construct a kernel for meta tensors");
  EXPECT_EQ(tileops::runtime_stats().kernel_builds, before);
}

TEST(Runtime, CacheHitsAfterOneBuildAndKeysByIdentity) {
  tileops::clear_kernel_caches();
  const auto s0 = tileops::runtime_stats();
  rms_norm(at::randn({3, 16}));
  rms_norm(at::randn({5, 16}));  // same identity (reference kernels ignore shapes)
  const auto s1 = tileops::runtime_stats();
  EXPECT_EQ(s1.kernel_builds - s0.kernel_builds, 1);
  EXPECT_EQ(s1.kernel_hits - s0.kernel_hits, 1);
}

TEST(Registry, TwoClaimingDetectorsIsAnErrorNamingBoth) {
  ScopedTarget a{"claim_a"}, b{"claim_b"};
  tileops::TargetRegistration ra("claim_a");
  ra.detector([](const c10::Device& d) { return d.is_cpu(); }).kernel("RMSNormFwdOp", fill_builder(1)).commit();
  tileops::TargetRegistration rb("claim_b");
  rb.detector([](const c10::Device& d) { return d.is_cpu(); }).kernel("RMSNormFwdOp", fill_builder(2)).commit();
  const std::string err = error_of([] { rms_norm(at::randn({2, 4})); });
  EXPECT_CONTAINS(err, "targets 'claim_a' and 'claim_b' both claim device cpu");
}

TEST(Registry, OneClaimingDetectorWinsOverTheFallback) {
  ScopedTarget a{"claim_only"};
  tileops::TargetRegistration ra("claim_only");
  ra.detector([](const c10::Device& d) { return d.is_cpu(); }).kernel("RMSNormFwdOp", fill_builder(7)).commit();
  EXPECT_TRUE(at::equal(rms_norm(at::randn({2, 4})), at::full({2, 4}, 7.0)));
}

TEST(Registry, DetectorThatThrowsIsNamed) {
  ScopedTarget a{"throwing_detector"};
  tileops::TargetRegistration ra("throwing_detector");
  ra.detector([](const c10::Device&) -> bool { throw std::runtime_error("probe failed"); })
      .kernel("RMSNormFwdOp", fill_builder(1))
      .commit();
  const std::string err = error_of([] { rms_norm(at::randn({2, 4})); });
  EXPECT_CONTAINS(err, "the detector of target 'throwing_detector' threw for device cpu: probe failed");
}

TEST(Registry, TargetWithoutABuilderForTheOp) {
  ScopedTarget a{"empty_target"};
  tileops::TargetRegistration("empty_target").commit();
  const std::string err = error_of([] { rms_norm(at::randn({2, 4}), "empty_target"); });
  EXPECT_CONTAINS(err, "target 'empty_target' has no kernel for this op (targets that do: 'nvrtc', 'reference')");
}

// A detected target without a verified kernel for the op hands the call to the backstop (the
// reference); a pending kernel runs only when its target is named.
TEST(Registry, PendingKernelRunsOnlyWhenItsTargetIsNamed) {
  ScopedTarget a{"pending_cpu"};
  tileops::TargetRegistration ra("pending_cpu");
  ra.detector([](const c10::Device& d) { return d.is_cpu(); })
      .kernel("RMSNormFwdOp", fill_builder(7), tileops::KernelStatus::kPending)
      .commit();
  const at::Tensor x = at::randn({2, 4});
  EXPECT_TRUE(at::allclose(rms_norm(x), rms_norm(x, "reference")));
  EXPECT_TRUE(at::equal(rms_norm(x, "pending_cpu"), at::full({2, 4}, 7.0)));
  tileops::set_default_target("pending_cpu");  // a process default names it too
  const at::Tensor by_default = rms_norm(x);
  tileops::set_default_target(std::nullopt);
  EXPECT_TRUE(at::equal(by_default, at::full({2, 4}, 7.0)));
}

TEST(Registry, DetectedTargetWithoutTheOpFallsToTheBackstop) {
  ScopedTarget a{"claims_cpu_no_ops"};
  tileops::TargetRegistration("claims_cpu_no_ops").detector([](const c10::Device& d) { return d.is_cpu(); }).commit();
  const at::Tensor x = at::randn({2, 4});
  EXPECT_TRUE(at::allclose(rms_norm(x), rms_norm(x, "reference")));
  const std::string err = error_of([&] { rms_norm(x, "claims_cpu_no_ops"); });  // named: no fallback
  EXPECT_CONTAINS(err, "target 'claims_cpu_no_ops' has no kernel for this op");
}

// A device-bound backstop (backstop_on, as the in-tree cublaslt for CUDA) is asked before the
// every-device reference, only for the devices it claims, and only with a verified kernel.
TEST(Registry, DeviceBoundBackstopServesItsDevicesBeforeTheReference) {
  ScopedTarget a{"claims_cpu_none"}, b{"cpu_backstop"}, c{"cuda_backstop"}, d{"pending_backstop"};
  tileops::TargetRegistration("claims_cpu_none").detector([](const c10::Device& d) { return d.is_cpu(); }).commit();
  tileops::TargetRegistration("pending_backstop")
      .backstop_on([](const c10::Device& d) { return d.is_cpu(); })
      .kernel("RMSNormFwdOp", fill_builder(3), tileops::KernelStatus::kPending)
      .commit();
  tileops::TargetRegistration("cuda_backstop")
      .backstop_on([](const c10::Device& d) { return d.is_cuda(); })
      .kernel("RMSNormFwdOp", fill_builder(4))
      .commit();
  const at::Tensor x = at::randn({2, 4});
  EXPECT_TRUE(at::allclose(rms_norm(x), rms_norm(x, "reference")));  // neither serves a CPU call
  tileops::TargetRegistration("cpu_backstop")
      .backstop_on([](const c10::Device& d) { return d.is_cpu(); })
      .kernel("RMSNormFwdOp", fill_builder(5))
      .commit();
  EXPECT_TRUE(at::equal(rms_norm(x), at::full({2, 4}, 5.0)));  // registered after the reference, asked first
}

// A builder may decline a problem (declined_kernel()): that call goes to the device's backstops, named
// target or not, and the decision is cached like a kernel.
TEST(Registry, DeclinedCallGoesToTheBackstopAndTheDecisionIsCached) {
  ScopedTarget a{"declines_width_4"};
  std::atomic<int> builds{0};
  tileops::KernelBuilder b = fill_builder(9);
  b.build = [&builds](const tileops::OpCall& call, const tileops::BuildKey&) -> std::shared_ptr<const tileops::Kernel> {
    ++builds;
    if (call.inputs[0].size(-1) == 4) return tileops::declined_kernel();
    return std::make_shared<FillKernel>(9);
  };
  tileops::TargetRegistration("declines_width_4").detector([](const c10::Device& d) { return d.is_cpu(); })
      .kernel("RMSNormFwdOp", b)
      .commit();
  const at::Tensor x4 = at::randn({2, 4}), x8 = at::randn({2, 8});
  EXPECT_TRUE(at::equal(rms_norm(x8), at::full({2, 8}, 9.0)));
  EXPECT_TRUE(at::allclose(rms_norm(x4), rms_norm(x4, "reference")));
  EXPECT_TRUE(at::allclose(rms_norm(x4, "declines_width_4"), rms_norm(x4, "reference")));
  EXPECT_TRUE(at::allclose(rms_norm(x4), rms_norm(x4, "reference")));
  EXPECT_EQ(builds.load(), 2);  // one decision per identity: the repeats were cache hits

  ScopedTarget c{"declining_backstop"};
  tileops::KernelBuilder never = fill_builder(0);
  never.build = [](const tileops::OpCall&, const tileops::BuildKey&) { return tileops::declined_kernel(); };
  tileops::TargetRegistration("declining_backstop")
      .backstop_on([](const c10::Device& d) { return d.is_cpu(); })
      .kernel("RMSNormFwdOp", never)
      .commit();
  EXPECT_CONTAINS(error_of([&] { rms_norm(x4); }),
                  "tileops::norm_rms_norm_fwd: backstop 'declining_backstop' declined this call too");
}

TEST(Registry, BackstopOnNeedsADevicePredicate) {
  const std::string err = error_of([] {
    tileops::TargetRegistration("no_predicate").backstop_on(nullptr).kernel("RMSNormFwdOp", fill_builder(1)).commit();
  });
  EXPECT_CONTAINS(err, "registering target 'no_predicate' failed: backstop_on() was given an empty device predicate");
  EXPECT_CONTAINS(error_of([] { rms_norm(at::randn({2, 4}), "no_predicate"); }), "unknown target 'no_predicate'");
}

TEST(Registry, HalfFailedRegistrationIsRolledBackWhole) {
  const auto before = tileops::target_names();
  tileops::TargetRegistration r("half_target");
  r.detector([](const c10::Device&) { return false; })
      .kernel("RMSNormFwdOp", fill_builder(1))
      .kernel("NoSuchOp", fill_builder(1));
  const std::string err = error_of([&] { r.commit(); });
  EXPECT_CONTAINS(err, "registering target 'half_target' failed: unknown op 'NoSuchOp'");
  EXPECT_EQ(tileops::target_names(), before);

  // register_target: a fill that throws half-way registers nothing and reports the error.
  const bool ok = tileops::register_target("half_target", [](tileops::TargetRegistration& reg) {
    reg.kernel("RMSNormFwdOp", fill_builder(1));
    throw std::runtime_error("device library missing");
  });
  EXPECT_FALSE(ok);
  EXPECT_EQ(tileops::target_names(), before);
  const auto errors = tileops::take_registration_errors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_CONTAINS(errors[0], "registering target 'half_target' failed: device library missing");
}

TEST(Registry, DuplicateKernelAndBadNameAreRefused) {
  tileops::TargetRegistration dup("dup_target");
  dup.kernel("RMSNormFwdOp", fill_builder(1)).kernel("norm_rms_norm_fwd", fill_builder(2));
  EXPECT_CONTAINS(error_of([&] { dup.commit(); }), "two kernels for op 'RMSNormFwdOp'");
  EXPECT_CONTAINS(error_of([] { tileops::TargetRegistration("bad name!").commit(); }), "is not valid");
  EXPECT_CONTAINS(error_of([] { tileops::TargetRegistration("nvrtc").commit(); }), "already registered");
}

TEST(Runtime, TwoThreadsMissingTheSameIdentityBuildOnce) {
  ScopedTarget a{"slow_target"};
  std::atomic<int> builds{0};
  tileops::TargetRegistration("slow_target").kernel("RMSNormFwdOp", fill_builder(3, &builds, 100)).commit();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      if (at::equal(rms_norm(at::randn({2, 32}), "slow_target"), at::full({2, 32}, 3.0))) ++ok;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 4);
  EXPECT_EQ(builds.load(), 1);
}

TEST(Runtime, FailedBuildIsNotCachedAndPinsNothing) {
  ScopedTarget a{"flaky_target"};
  std::atomic<int> attempts{0};
  tileops::KernelBuilder b = fill_builder(5);
  auto inner = b.build;
  b.build = [&, inner](const tileops::OpCall& c, const tileops::BuildKey& k) {
    if (attempts++ == 0) throw std::runtime_error("first build fails");
    return inner(c, k);
  };
  tileops::TargetRegistration("flaky_target").kernel("RMSNormFwdOp", b).commit();
  EXPECT_CONTAINS(error_of([] { rms_norm(at::randn({2, 8}), "flaky_target"); }),
                  "tileops::norm_rms_norm_fwd (target 'flaky_target'): first build fails");
  EXPECT_TRUE(at::equal(rms_norm(at::randn({2, 8}), "flaky_target"), at::full({2, 8}, 5.0)));
  EXPECT_EQ(attempts.load(), 2);
}

}  // namespace
