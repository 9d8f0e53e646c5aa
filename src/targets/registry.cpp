#include "targets/registry.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <memory>
#include <mutex>

#include "common/counters.h"
#include "common/log.h"
#include "tileops/ops.h"

namespace tileops {

std::shared_ptr<const Kernel> declined_kernel() {
  struct Declined final : Kernel {
    void launch(const OpCall& call) const override {
      TORCH_CHECK(false, call.op_name, ": a declined call reached a launch");
    }
  };
  static const std::shared_ptr<const Kernel> declined = std::make_shared<Declined>();
  return declined;
}

// ---- BuildKey -----------------------------------------------------------------------------------

BuildKey::BuildKey(std::initializer_list<int64_t> ws) {
  for (auto w : ws) add(w);
}

BuildKey& BuildKey::add(int64_t w) {
  TORCH_CHECK(size < kMaxWords, "tileops: a BuildKey holds at most ", kMaxWords, " words");
  words[size++] = w;
  return *this;
}

bool BuildKey::operator==(const BuildKey& o) const {
  if (size != o.size) return false;
  for (int i = 0; i < size; ++i)
    if (words[i] != o.words[i]) return false;
  return true;
}

size_t BuildKey::hash() const {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(size);
  for (int i = 0; i < size; ++i) {
    h ^= static_cast<uint64_t>(words[i]) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  }
  return static_cast<size_t>(h);
}

namespace registry {
namespace {

std::mutex g_write_mu;      // serialises writers (registration, defaults)
std::mutex g_published_mu;  // guards g_published only (a leaf lock: readers refresh under it)
std::shared_ptr<const Snapshot> g_published;
std::atomic<uint64_t> g_version{1};  // bumped after each publish; readers compare it with their copy's
std::atomic<int64_t> g_live_snapshots{0};
std::mutex g_dropped_mu;
std::vector<std::weak_ptr<const Kernel>> g_dropped;  // kernels dropped by clear_kernel_caches(), for counting
std::vector<std::string> g_registration_errors;
std::once_flag g_builtins_once;
thread_local bool t_in_builtins = false;

// Each thread reads through its own copy of the published snapshot: a hit costs one atomic load
// (the version) and no reference-count traffic; an old snapshot is freed once no thread holds it.
struct ThreadView {
  std::shared_ptr<const Snapshot> snap;
  uint64_t version = 0;
  int pins = 0;                                     // open Pins on this thread (calls nest: composites)
  std::vector<std::shared_ptr<const Snapshot>> held;  // replaced while pinned; dropped at the last unpin
};
thread_local ThreadView t_view;

void ensure_builtins() {
  if (t_in_builtins) return;
  std::call_once(g_builtins_once, [] {
    t_in_builtins = true;
    try {
      register_builtin_targets();
    } catch (...) {
      t_in_builtins = false;
      throw;
    }
    t_in_builtins = false;
  });
}

std::shared_ptr<const Snapshot> counted(std::unique_ptr<Snapshot> s) {
  g_live_snapshots.fetch_add(1, std::memory_order_relaxed);
  return std::shared_ptr<const Snapshot>(s.release(), [](const Snapshot* p) {
    g_live_snapshots.fetch_sub(1, std::memory_order_relaxed);
    delete p;
  });
}

// Caller holds g_write_mu.
void publish(std::unique_ptr<Snapshot> next) {
  auto snap = counted(std::move(next));
  std::shared_ptr<const Snapshot> old;
  {
    std::lock_guard<std::mutex> lock(g_published_mu);
    old = std::exchange(g_published, std::move(snap));
    g_version.fetch_add(1, std::memory_order_release);
  }
}  // `old` is freed here unless a thread still reads it

std::unique_ptr<Snapshot> copy_current() {
  auto s = std::make_unique<Snapshot>();
  std::lock_guard<std::mutex> lock(g_published_mu);
  if (g_published) *s = *g_published;
  return s;
}

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

}  // namespace

Pin::Pin() {
  ensure_builtins();
  ThreadView& v = t_view;
  const uint64_t version = g_version.load(std::memory_order_acquire);
  if (v.version != version) {
    std::shared_ptr<const Snapshot> fresh;
    {
      std::lock_guard<std::mutex> lock(g_published_mu);
      fresh = g_published;
      v.version = g_version.load(std::memory_order_relaxed);
    }
    if (v.pins > 0 && v.snap) v.held.push_back(std::move(v.snap));  // an outer Pin on this thread still reads it
    v.snap = std::move(fresh);
  }
  ++v.pins;
  static const Snapshot kEmpty;
  snap_ = v.snap ? v.snap.get() : &kEmpty;
}

Pin::~Pin() {
  ThreadView& v = t_view;
  if (--v.pins == 0 && !v.held.empty()) v.held.clear();
}

int64_t live_snapshots() { return g_live_snapshots.load(std::memory_order_relaxed); }

int64_t live_dropped_kernels() {
  std::lock_guard<std::mutex> lock(g_dropped_mu);
  std::erase_if(g_dropped, [](const auto& w) { return w.expired(); });
  return static_cast<int64_t>(g_dropped.size());
}

const Target* find(const Snapshot& s, std::string_view name) {
  for (const auto& t : s.targets)
    if (t->name == name) return t.get();
  return nullptr;
}

std::string names_of(const Snapshot& s) {
  std::string out;
  for (const auto& t : s.targets) out += (out.empty() ? "'" : ", '") + t->name + "'";
  return out.empty() ? "(none)" : out;
}

}  // namespace registry

struct RegistryAccess {
  static void commit(TargetRegistration& r) {
    using namespace registry;
    ensure_builtins();
    const std::string& name = r.name_;
    TORCH_CHECK(r.deferred_error_.empty(), "tileops: registering target '", name, "' failed: ", r.deferred_error_,
                "; nothing of it was registered");
    TORCH_CHECK(valid_name(name), "tileops: target name '", name,
                "' is not valid (1-64 characters of letters, digits, '_', '-', '.')");
    auto table = op_table();
    auto target = std::make_shared<Target>();
    target->name = name;
    target->detector = r.detector_;
    target->fallback = r.fallback_;
    target->backstop = r.backstop_;
    target->backstop_devices = r.backstop_devices_;
    target->ops.resize(table.size());
    for (auto& [op_name, builder, status] : r.kernels_) {
      const OpInfo* info = find_op(op_name);
      TORCH_CHECK(info != nullptr, "tileops: registering target '", name, "' failed: unknown op '", op_name,
                  "' (not in the op table); nothing of it was registered");
      const size_t id = static_cast<size_t>(info - table.data());
      TORCH_CHECK(!target->ops[id], "tileops: registering target '", name, "' failed: two kernels for op '",
                  info->op_class, "'; nothing of it was registered");
      TORCH_CHECK(builder.identity && builder.build, "tileops: registering target '", name, "' failed: the kernel for '",
                  info->op_class, "' lacks identity() or build(); nothing of it was registered");
      auto ok = std::make_shared<OpKernels>();
      ok->target = name;
      ok->builder = builder;
      ok->pending = status == KernelStatus::kPending;
      target->ops[id] = std::move(ok);
    }
    std::lock_guard<std::mutex> lock(g_write_mu);
    auto next = copy_current();
    TORCH_CHECK(find(*next, name) == nullptr, "tileops: registering target '", name,
                "' failed: a target of that name is already registered (", names_of(*next), ")");
    next->targets.push_back(std::move(target));
    publish(std::move(next));
    log::info("tileops: registered target '" + name + "'");
  }
};

TargetRegistration::TargetRegistration(std::string name) : name_(std::move(name)) {}

TargetRegistration& TargetRegistration::detector(Detector d) {
  detector_ = std::move(d);
  return *this;
}

TargetRegistration& TargetRegistration::fallback(bool is_fallback) {
  fallback_ = is_fallback;
  return *this;
}

TargetRegistration& TargetRegistration::kernel(std::string_view op, KernelBuilder builder, KernelStatus status) {
  kernels_.push_back({std::string(op), std::move(builder), status});
  return *this;
}

TargetRegistration& TargetRegistration::backstop(bool is_backstop) {
  backstop_ = is_backstop;
  backstop_devices_ = nullptr;
  return *this;
}

TargetRegistration& TargetRegistration::backstop_on(Detector devices) {
  if (!devices) deferred_error_ = "backstop_on() was given an empty device predicate";
  backstop_ = true;
  backstop_devices_ = std::move(devices);
  return *this;
}

void TargetRegistration::commit() { RegistryAccess::commit(*this); }

bool register_target(const std::string& name, const std::function<void(TargetRegistration&)>& fill) noexcept {
  try {
    TargetRegistration reg(name);
    fill(reg);  // may throw half-way: the registration object is dropped, nothing was published
    reg.commit();
    return true;
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (auto* ce = dynamic_cast<const c10::Error*>(&e)) msg = ce->what_without_backtrace();
    if (msg.find(name) == std::string::npos) msg = "tileops: registering target '" + name + "' failed: " + msg;
    log::warn(msg);
    std::lock_guard<std::mutex> lock(registry::g_write_mu);
    registry::g_registration_errors.push_back(msg);
    return false;
  }
}

std::vector<std::string> take_registration_errors() {
  std::lock_guard<std::mutex> lock(registry::g_write_mu);
  return std::exchange(registry::g_registration_errors, {});
}

bool unregister_target(const std::string& name) {
  using namespace registry;
  ensure_builtins();
  std::lock_guard<std::mutex> lock(g_write_mu);
  auto next = copy_current();
  auto it = std::find_if(next->targets.begin(), next->targets.end(), [&](const auto& t) { return t->name == name; });
  if (it == next->targets.end()) return false;
  if (next->default_target == it->get()) next->default_target = nullptr;
  next->targets.erase(it);
  publish(std::move(next));
  return true;
}

std::vector<std::string> target_names() {
  std::vector<std::string> out;
  const registry::Pin snap;
  for (const auto& t : snap->targets) out.push_back(t->name);
  return out;
}

void set_default_target(const std::optional<std::string>& name) {
  using namespace registry;
  ensure_builtins();
  std::lock_guard<std::mutex> lock(g_write_mu);
  auto next = copy_current();
  if (!name) {
    next->default_target = nullptr;
  } else {
    const Target* t = find(*next, *name);
    TORCH_CHECK_VALUE(t != nullptr, "tileops: unknown target '", *name, "' for the process default; registered: ",
                      names_of(*next));
    next->default_target = t;
  }
  publish(std::move(next));
}

std::optional<std::string> default_target() {
  const registry::Pin snap;
  const auto* t = snap->default_target;
  return t ? std::optional<std::string>(t->name) : std::nullopt;
}

RuntimeStats runtime_stats() {
  using namespace counters;
  return RuntimeStats{get(kKernelBuilds), get(kKernelHits), get(kCaptureRefusals),
                      get(kNvrtcCompiles), get(kDiskCacheHits), get(kModuleLoads)};
}

void reset_runtime_stats() { counters::reset(); }

namespace {
std::mutex g_clearers_mu;
std::vector<void (*)()> g_clearers;  // on_clear_kernel_caches
}  // namespace

void registry::on_clear_kernel_caches(void (*clear)()) {
  std::lock_guard<std::mutex> lock(g_clearers_mu);
  if (std::find(g_clearers.begin(), g_clearers.end(), clear) == g_clearers.end()) g_clearers.push_back(clear);
}

void clear_kernel_caches() {
  using namespace registry;
  const Pin s;
  for (const auto& t : s->targets)
    for (const auto& ok : t->ops) {
      if (!ok) continue;
      std::unique_lock<std::shared_mutex> lock(ok->mu);
      std::lock_guard<std::mutex> dl(g_dropped_mu);
      std::erase_if(g_dropped, [](const auto& w) { return w.expired(); });
      // A launch in flight holds its own reference: the kernel is freed when that launch returns.
      for (auto& [k, v] : ok->kernels) g_dropped.push_back(v);
      ok->kernels.clear();
    }
  std::lock_guard<std::mutex> lock(g_clearers_mu);
  for (auto* clear : g_clearers) clear();
}

}  // namespace tileops
