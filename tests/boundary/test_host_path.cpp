// The per-call host path of a cache hit: no heap allocation besides the outputs, in the runtime,
// in the generated boundary and in the nvrtc identity (problem + spec lookup), all on CPU.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <new>

#include "boundary/runtime.h"
#include "targets/nvrtc/norm/norm_bwd_launch.h"
#include "targets/nvrtc/norm/row_norm_launch.h"
#include "targets/nvrtc/reduction/softmax_launch.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops/target.h"
#include "tileops_generated/ops.h"

// Counts operator new on this thread while a test asks (a replacement for the whole test binary;
// it only counts, then allocates as the default one does).
namespace {
thread_local bool t_counting = false;
thread_local int64_t t_allocs = 0;
}  // namespace

void* operator new(std::size_t n) {
  if (t_counting) ++t_allocs;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

// Heap allocations `fn` makes per call, over `n` calls after a warm-up.
template <class F>
double allocs_per_call(F&& fn, int n = 200) {
  for (int i = 0; i < 10; ++i) fn();
  t_allocs = 0;
  t_counting = true;
  for (int i = 0; i < n; ++i) fn();
  t_counting = false;
  return static_cast<double>(t_allocs) / n;
}

template <class F>
double ns_per_call(F&& fn, int n = 20000) {
  for (int i = 0; i < 200; ++i) fn();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) fn();
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
}

class NoopKernel final : public tileops::Kernel {
 public:
  void launch(const tileops::OpCall&) const override {}
};

// A target whose ReluFwdOp kernel does nothing: what is left of a call is the host path itself.
struct NoopTarget {
  NoopTarget() {
    EXPECT_TRUE(tileops::register_target("host_path_noop", [](tileops::TargetRegistration& reg) {
      tileops::KernelBuilder b;
      b.identity = [](const tileops::OpCall& call) {
        return tileops::BuildKey{static_cast<int64_t>(tileops::ops::activation_relu_fwd::View(call).x().scalar_type())};
      };
      b.build = [](const tileops::OpCall&, const tileops::BuildKey&) -> std::shared_ptr<const tileops::Kernel> {
        return std::make_shared<NoopKernel>();
      };
      reg.detector([](const c10::Device&) { return false; }).kernel("ReluFwdOp", b);
    }));
  }
  ~NoopTarget() { tileops::unregister_target("host_path_noop"); }
};

TEST(HostPath, RuntimeCacheHitAllocatesNothing) {
  NoopTarget noop;
  namespace op = tileops::ops::activation_relu_fwd;
  const at::Tensor x = at::randn({1, 64}), y = at::empty({1, 64});
  const at::Tensor ins[] = {x}, outs[] = {y};
  const tileops::OpCall call{op::kId, op::kName, x.device(), ins, outs, {}};
  const auto hits = tileops::runtime_stats().kernel_hits;
  EXPECT_EQ(allocs_per_call([&] { tileops::runtime::invoke(call, "host_path_noop"); }), 0.0);
  EXPECT_GT(tileops::runtime_stats().kernel_hits, hits + 200);  // they were cache hits
}

TEST(HostPath, DispatchedCallAllocatesOnlyItsOutput) {
  NoopTarget noop;
  const auto relu = c10::Dispatcher::singleton()
                        .findSchemaOrThrow("tileops::activation_relu_fwd", "")
                        .typed<at::Tensor(const at::Tensor&, std::optional<c10::string_view>)>();
  const at::Tensor x = at::randn({1, 64});
  const c10::string_view target = "host_path_noop";
  const double output = allocs_per_call([&] { return at::empty({1, 64}); });
  const double ours = allocs_per_call([&] { return relu.call(x, target); });
  EXPECT_LE(ours, output) << "a cache hit allocates " << ours << " times, the output alone " << output;
  // For the log: the whole dispatched call beside at::add's (both on a [1, 64] float32 CPU tensor).
  RecordProperty("tileops_relu_noop_ns", std::to_string(ns_per_call([&] { return relu.call(x, target); })));
  RecordProperty("at_add_ns", std::to_string(ns_per_call([&] { return at::add(x, x); })));
}

TEST(HostPath, NvrtcIdentityOfAKnownProblemAllocatesNothing) {
  using namespace tileops::nvrtc;
  const DeviceFacts h200 = named_device_facts("h200");
  const int64_t ns[] = {64};
  const at::Tensor x = at::randn({2, 64}).to(at::kHalf), w = at::randn({64}).to(at::kHalf), y = at::empty_like(x);
  {
    const at::Tensor ins[] = {x, w}, outs[] = {y};
    const tileops::ParamValue params[] = {tileops::ParamValue::ints(ns), tileops::ParamValue()};
    const tileops::OpCall call{0, "rms_norm", x.device(), ins, outs, params};
    const RowNormFamily f = rms_norm_fwd_family();
    SpecTable<RowNormFamily> table;
    EXPECT_EQ(allocs_per_call([&] { return table.id_for(f, f.problem(call), h200, 0); }), 0.0);
  }
  {
    const at::Tensor ins[] = {x, x, w}, outs[] = {y, w};
    const tileops::ParamValue params[] = {tileops::ParamValue::ints(ns), tileops::ParamValue()};
    const tileops::OpCall call{0, "rms_norm_bwd", x.device(), ins, outs, params};
    const NormBwdFamily f = rms_norm_bwd_family();
    SpecTable<NormBwdFamily> table;
    EXPECT_EQ(allocs_per_call([&] { return table.id_for(f, f.problem(call), h200, 0); }), 0.0);
  }
  {
    const at::Tensor ins[] = {x}, outs[] = {y};
    const tileops::ParamValue params[] = {tileops::ParamValue::integer(-1)};
    const tileops::OpCall call{0, "softmax", x.device(), ins, outs, params};
    const SoftmaxFamily f{false};
    SpecTable<SoftmaxFamily> table;
    EXPECT_EQ(allocs_per_call([&] { return table.id_for(f, f.problem(call), h200, 0); }), 0.0);
  }
}

}  // namespace
