// Registry snapshots and dropped kernels are freed, and never while a reader or a launch uses them.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "targets/registry.h"
#include "tileops/target.h"

namespace {

using RmsNormFn = at::Tensor(const at::Tensor&, const std::optional<at::Tensor>&, c10::SymIntArrayRef,
                             std::optional<double>, std::optional<c10::string_view>);

at::Tensor rms_norm(const at::Tensor& x, c10::string_view target) {
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("tileops::norm_rms_norm_fwd", "").typed<RmsNormFn>();
  const std::vector<c10::SymInt> ns{c10::SymInt(x.size(-1))};
  return op.call(x, std::nullopt, ns, std::nullopt, target);
}

// A one-shot gate: wait() blocks until open().
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool is_open = false;
  void open() {
    std::lock_guard<std::mutex> lock(mu);
    is_open = true;
    cv.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return is_open; });
  }
};

std::atomic<int> g_kernels_alive{0};

// Fills its output; optionally signals `entered` and waits at `release` inside the launch.
class GatedKernel : public tileops::Kernel {
 public:
  GatedKernel(Gate* entered, Gate* release) : entered_(entered), release_(release) { ++g_kernels_alive; }
  ~GatedKernel() override { --g_kernels_alive; }
  void launch(const tileops::OpCall& call) const override {
    if (entered_) entered_->open();
    if (release_) release_->wait();
    call.outputs[0].fill_(7.0);
  }

 private:
  Gate* entered_;
  Gate* release_;
};

struct ScopedTarget {
  std::string name;
  ScopedTarget(std::string n, Gate* entered, Gate* release) : name(std::move(n)) {
    tileops::KernelBuilder b;
    b.identity = [](const tileops::OpCall& call) { return tileops::BuildKey{call.inputs[0].size(-1)}; };
    b.build = [=](const tileops::OpCall&, const tileops::BuildKey&) -> std::shared_ptr<const tileops::Kernel> {
      return std::make_shared<GatedKernel>(entered, release);
    };
    tileops::TargetRegistration(name).kernel("RMSNormFwdOp", b).commit();
  }
  ~ScopedTarget() { tileops::unregister_target(name); }
};

int64_t live_after_pin() {
  const tileops::registry::Pin pin;  // refreshes this thread's copy
  return tileops::registry::live_snapshots();
}

TEST(RegistryMemory, ReplacedSnapshotsAreFreed) {
  const int64_t before = live_after_pin();
  for (int i = 0; i < 1000; ++i) {
    tileops::set_default_target(std::string("reference"));
    tileops::set_default_target(std::nullopt);
  }
  // The published one and this thread's copy (the same snapshot once refreshed): not 2000 more.
  EXPECT_LE(live_after_pin(), before);
  EXPECT_GE(tileops::registry::live_snapshots(), 1);
}

TEST(RegistryMemory, PinnedSnapshotOutlivesItsReplacementThenIsFreed) {
  const int64_t before = live_after_pin();
  Gate pinned, published, done;
  std::string seen;
  std::thread reader([&] {
    {
      const tileops::registry::Pin pin;
      pinned.open();
      published.wait();  // the writer replaced it meanwhile: it must still be readable
      seen = tileops::registry::names_of(*pin);
      {
        const tileops::registry::Pin inner;  // a nested pin refreshes; the outer one stays valid
        EXPECT_EQ(inner->default_target != nullptr, true);
        seen += "|" + tileops::registry::names_of(*pin);
      }
    }
    done.open();
  });
  pinned.wait();
  tileops::set_default_target(std::string("reference"));
  EXPECT_GE(tileops::registry::live_snapshots(), before + 1);  // the reader's and the new one
  published.open();
  done.wait();
  reader.join();  // the thread's copy goes with it
  tileops::set_default_target(std::nullopt);
  EXPECT_NE(seen.find("'reference'"), std::string::npos) << seen;
  EXPECT_LE(live_after_pin(), before);
}

TEST(RegistryMemory, DroppedKernelIsFreedWhenNoLaunchHoldsIt) {
  ScopedTarget t("memory_target", nullptr, nullptr);
  const int alive = g_kernels_alive.load();
  EXPECT_TRUE(at::equal(rms_norm(at::randn({2, 8}), t.name), at::full({2, 8}, 7.0)));
  EXPECT_EQ(g_kernels_alive.load(), alive + 1);
  tileops::clear_kernel_caches();
  EXPECT_EQ(g_kernels_alive.load(), alive);
  EXPECT_EQ(tileops::registry::live_dropped_kernels(), 0);
}

int g_side_cache_clears = 0;
void clear_side_cache() { ++g_side_cache_clears; }

TEST(RegistryMemory, ClearingKernelCachesEmptiesEachRegisteredSideCacheOnce) {
  // The nvrtc target's CUBIN cache is one such cache; registering one twice keeps one entry.
  tileops::registry::on_clear_kernel_caches(&clear_side_cache);
  tileops::registry::on_clear_kernel_caches(&clear_side_cache);
  const int before = g_side_cache_clears;
  tileops::clear_kernel_caches();
  EXPECT_EQ(g_side_cache_clears, before + 1);
}

TEST(RegistryMemory, KernelDroppedDuringItsLaunchLivesUntilTheLaunchReturns) {
  Gate entered, release;
  ScopedTarget t("gated_target", &entered, &release);
  const int alive = g_kernels_alive.load();
  at::Tensor y;
  std::thread caller([&] { y = rms_norm(at::randn({2, 8}), t.name); });
  entered.wait();
  tileops::clear_kernel_caches();  // the cache lets go while the launch runs
  EXPECT_EQ(g_kernels_alive.load(), alive + 1);
  EXPECT_EQ(tileops::registry::live_dropped_kernels(), 1);
  release.open();
  caller.join();
  EXPECT_TRUE(at::equal(y, at::full({2, 8}, 7.0)));
  EXPECT_EQ(g_kernels_alive.load(), alive);
  EXPECT_EQ(tileops::registry::live_dropped_kernels(), 0);
}

TEST(RegistryMemory, CallsRacingWithPublishersSeeWholeSnapshotsAndLeaveFew) {
  ScopedTarget t("racing_target", nullptr, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, calls{0};
  std::vector<std::thread> callers;
  for (int i = 0; i < 3; ++i)
    callers.emplace_back([&] {
      const at::Tensor x = at::randn({2, 8});
      while (!stop.load()) {
        if (!at::equal(rms_norm(x, "racing_target"), at::full({2, 8}, 7.0))) ++bad;
        ++calls;
      }
    });
  int published = 0;
  for (; published < 2000 || calls.load() < 2000; ++published)
    tileops::set_default_target(published % 2 ? std::nullopt : std::optional<std::string>("reference"));
  tileops::set_default_target(std::nullopt);
  stop = true;
  for (auto& c : callers) c.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GE(calls.load(), 2000);
  EXPECT_LE(live_after_pin(), 1);  // the callers' copies went with their threads
}

}  // namespace
