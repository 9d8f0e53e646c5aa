// The pool family on the nvrtc target: problem, plan, launch and registration (pool.h).
#include "targets/nvrtc/pool/pool.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <memory>
#include <type_traits>

#include "kernels/common/int_divider.cuh"
#include "targets/builtin.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

constexpr int kPoolThreads = 256;
// Output rows shorter than this take one output a thread with a fixed max window, where a warp's
// pairs would span several rows (docs/PERF.md, "Pools").
constexpr int64_t kPoolPairMinRow = 64;

namespace avg1 = tileops::ops::pool_avg_pool1d_fwd;
namespace avg2 = tileops::ops::pool_avg_pool2d_fwd;
namespace avg3 = tileops::ops::pool_avg_pool3d_fwd;
namespace max1 = tileops::ops::pool_max_pool1d_fwd;
namespace max2 = tileops::ops::pool_max_pool2d_fwd;
namespace max3 = tileops::ops::pool_max_pool3d_fwd;
using PoolView = tileops::ops::family::pool::View;

// What one call passes besides the pointers: its geometry and the avg params (0 / false otherwise).
struct PoolArgs {
  PoolGeometry g;
  int count_include_pad = 0;
  int64_t divisor_override = 0;  // 0: none (the manifest refuses 0)
};
using ArgsReader = PoolArgs (*)(const OpCall&, int rank);

template <class View>
PoolArgs avg_args(const OpCall& call, int rank) {
  const View v(call);
  PoolArgs a{pool_geometry(v.input().sizes(), v.output().sizes(), rank, v.kernel_size(), or_empty(v.stride()),
                           v.padding(), {})};
  a.count_include_pad = v.count_include_pad() ? 1 : 0;
  if constexpr (!std::is_same_v<View, avg1::View>) a.divisor_override = v.divisor_override().value_or(0);
  return a;
}
template <class View>
PoolArgs max_args(const OpCall& call, int rank) {
  const View v(call);
  return PoolArgs{pool_geometry(v.input().sizes(), v.output().sizes(), rank, v.kernel_size(), or_empty(v.stride()),
                                v.padding(), v.dilation())};
}
PoolArgs adaptive_args(const OpCall& call, int rank) {
  const PoolView v(call);
  return PoolArgs{pool_geometry(v.input().sizes(), v.output().sizes(), rank, {}, {}, {}, {})};
}

class PoolKernel final : public Kernel {
 public:
  PoolKernel(LoadedKernel k, int rank, int threads, int lanes, int per_thread, int sm_count, ArgsReader args)
      : k_(std::move(k)), rank_(rank), threads_(threads), lanes_(lanes), per_thread_(per_thread), sm_count_(sm_count),
        args_(args) {}
  void launch(const OpCall& call) const override {
    const PoolView v(call);
    PoolArgs a = args_(call, rank_);
    const void* xp = v.input().const_data_ptr();
    void* yp = v.output().mutable_data_ptr();
    long long units = pool_units(v.output().numel(), a.g, per_thread_);
    long long divisor = a.divisor_override;
    PoolDividers dividers = pool_dividers(a.g, per_thread_);
    void* args[] = {&xp, &yp, &units, &a.g, &dividers, &a.count_include_pad, &divisor};
    const int threads = lanes_ ? threads_ : pool_cta_threads(units, sm_count_, threads_);
    nvrtc::launch(k_, pool_grid(units, lanes_ ? threads / lanes_ : threads), static_cast<unsigned>(threads), 0, args);
  }

 private:
  LoadedKernel k_;
  int rank_;
  int threads_;  // the most a CTA takes
  int lanes_;    // pool_fwd_warp's lanes an output, else 0 (a work item a thread)
  int per_thread_;
  int sm_count_;
  ArgsReader args_;
};

struct PoolFamily {
  using Problem = PoolProblem;
  using Spec = PoolSpec;
  int rank;
  PoolMode mode;
  bool adaptive;
  ArgsReader args;

  Problem problem(const OpCall& call) const {
    const PoolView v(call);
    const PoolGeometry g = args(call, rank).g;
    const PoolWindowParams window = adaptive ? PoolWindowParams{} : pool_small_window(g);
    const bool aligned = reinterpret_cast<uintptr_t>(v.input().const_data_ptr()) % 16 == 0;
    return {v.input().scalar_type(), rank, mode, adaptive, pool_index_bits(v.input().numel(), v.output().numel(), g),
            window, pool_lanes(g, adaptive),
            pool_wide_outputs(g, v.input().scalar_type(), window, aligned, v.output().numel()),
            pool_short_rows(g)};
  }
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning& t) const { return plan_pool(q, dev, t); }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const {
    return std::make_shared<PoolKernel>(std::move(k[0]), s.rank, s.threads, s.lanes, s.outputs_a_thread(),
                                        dev.sm_count, args);
  }
};

KernelBuilder avg_pool1d_builder() { return spec_builder(PoolFamily{1, PoolMode::Avg, false, avg_args<avg1::View>}); }
KernelBuilder avg_pool2d_builder() { return spec_builder(PoolFamily{2, PoolMode::Avg, false, avg_args<avg2::View>}); }
KernelBuilder avg_pool3d_builder() { return spec_builder(PoolFamily{3, PoolMode::Avg, false, avg_args<avg3::View>}); }
KernelBuilder max_pool1d_builder() { return spec_builder(PoolFamily{1, PoolMode::Max, false, max_args<max1::View>}); }
KernelBuilder max_pool2d_builder() { return spec_builder(PoolFamily{2, PoolMode::Max, false, max_args<max2::View>}); }
KernelBuilder max_pool3d_builder() { return spec_builder(PoolFamily{3, PoolMode::Max, false, max_args<max3::View>}); }
KernelBuilder adaptive_avg_pool2d_builder() { return spec_builder(PoolFamily{2, PoolMode::Avg, true, adaptive_args}); }
KernelBuilder adaptive_max_pool2d_builder() { return spec_builder(PoolFamily{2, PoolMode::Max, true, adaptive_args}); }

int64_t pick(c10::IntArrayRef v, int j, int64_t fallback) {
  return v.empty() ? fallback : v[v.size() == 1 ? 0 : static_cast<size_t>(j)];
}

}  // namespace

PoolGeometry pool_geometry(c10::IntArrayRef in_sizes, c10::IntArrayRef out_sizes, int rank, c10::IntArrayRef kernel,
                           c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation) {
  TORCH_CHECK(rank >= 1 && rank <= 3 && static_cast<int>(in_sizes.size()) >= rank &&
                  static_cast<int>(out_sizes.size()) >= rank,
              "tileops: pool_geometry takes 1 to 3 spatial dims");
  PoolGeometry g{};
  for (int d = 0; d < 3; ++d) {
    const int j = d - (3 - rank);  // the op's spatial dim, or < 0 before them
    if (j < 0) {
      g.in[d] = g.out[d] = g.kernel[d] = g.stride[d] = g.dil[d] = 1;
      g.pad[d] = 0;
      continue;
    }
    g.in[d] = in_sizes[in_sizes.size() - rank + j];
    g.out[d] = out_sizes[out_sizes.size() - rank + j];
    g.kernel[d] = pick(kernel, j, 1);
    g.stride[d] = pick(stride, j, g.kernel[d]);
    g.pad[d] = pick(padding, j, 0);
    g.dil[d] = pick(dilation, j, 1);
  }
  return g;
}

int pool_index_bits(int64_t in_numel, int64_t out_numel, const PoolGeometry& g) {
  constexpr int64_t kLimit = int64_t{1} << 30;
  if (in_numel >= kLimit || out_numel >= kLimit) return 64;
  for (int d = 0; d < 3; ++d) {
    // each factor is below 2^30 (sizes of tensors under 2^30 elements, params checked first), so the
    // products fit in int64 before they are compared
    if (g.kernel[d] >= kLimit || g.dil[d] >= kLimit || g.stride[d] >= kLimit || g.pad[d] >= kLimit) return 64;
    const int64_t bound = (g.out[d] + 1) * std::max(g.in[d], g.stride[d]) + g.kernel[d] * g.dil[d] + 2 * g.pad[d];
    if (bound >= kLimit) return 64;
  }
  return 32;
}

PoolWindowParams pool_small_window(const PoolGeometry& g) {
  constexpr int64_t kMaxTaps = 128, kMaxValue = 256;
  PoolWindowParams w{};
  int64_t taps = 1;
  for (int d = 0; d < 3; ++d) {
    const int64_t v[4] = {g.kernel[d], g.stride[d], g.pad[d], g.dil[d]};
    for (int k = 0; k < 4; ++k) {
      if (v[k] < 0 || v[k] >= kMaxValue) return {};
      w[k * 3 + d] = static_cast<int>(v[k]);
    }
    taps *= g.kernel[d];
  }
  if (taps > kMaxTaps || taps == 0) return {};
  return w;
}

int64_t pool_row_taps(const PoolGeometry& g, bool adaptive) {
  // a window's taps along dim d (an adaptive bin's at most), and whether every window covers dim d
  // whole with step 1
  auto taps = [&](int d) { return adaptive ? (g.in[d] + g.out[d] - 1) / g.out[d] : g.kernel[d]; };
  auto whole = [&](int d) {
    return g.out[d] == 1 && (adaptive || (g.pad[d] == 0 && g.dil[d] == 1 && g.kernel[d] >= g.in[d]));
  };
  int64_t run = taps(2);
  if (whole(2) && (adaptive || g.dil[1] == 1)) {
    run = g.in[2] * taps(1);
    if (whole(1) && (adaptive || g.dil[0] == 1)) run = g.in[2] * g.in[1] * taps(0);
  }
  return run;
}

int pool_lanes(const PoolGeometry& g, bool adaptive) {
  // fewer lanes for shorter rows: more outputs a warp, each lane still reading several taps
  const int64_t taps = pool_row_taps(g, adaptive);
  return taps < 32 ? 0 : taps <= 64 ? 8 : taps <= 256 ? 16 : 32;
}

int pool_wide_outputs(const PoolGeometry& g, c10::ScalarType dtype, const PoolWindowParams& window, bool x_aligned,
                      int64_t out_numel) {
  if (window[0] == 0 || !x_aligned) return 0;
  const int v = 16 / static_cast<int>(c10::elementSize(dtype));
  const int k = window[2], s = window[5], pad = window[8], dil = window[11];
  if (dil != 1 || s < 1 || v % s != 0 || v / s < 2 || pad >= v || k - pad - s >= v || g.in[2] % v != 0) return 0;
  // windows that share no tap along the row are read once and coalesced by a thread an output too;
  // fewer, wider work items pay only where they still fill the GPU many times over (docs/PERF.md,
  // "Pools")
  constexpr int64_t kMinItemsUnshared = int64_t{1} << 17;
  if (k <= s && out_numel / (v / s) < kMinItemsUnshared) return 0;
  return v / s;
}

bool pool_short_rows(const PoolGeometry& g) { return g.out[2] < kPoolPairMinRow; }

int64_t pool_units(int64_t out_numel, const PoolGeometry& g, int per_thread) {
  if (out_numel == 0) return 0;
  return out_numel / g.out[2] * ((g.out[2] + per_thread - 1) / per_thread);
}

PoolDividers pool_dividers(const PoolGeometry& g, int per_thread) {
  PoolDividers p{};
  for (int d = 0; d < 3; ++d) {
    const int64_t n = d == 2 ? (g.out[2] + per_thread - 1) / per_thread : g.out[d];
    // only the int path reads them, whose sizes are below 2^30; 64-bit calls get placeholders
    const IntDivider v = make_int_divider(n >= 1 && n < (int64_t{1} << 31) ? static_cast<unsigned>(n) : 1u);
    p.out[d][0] = v.magic;
    p.out[d][1] = v.shift;
  }
  return p;
}

int pool_cta_threads(int64_t units, int sm_count, int max_threads) {
  // a small call in CTAs of fewer threads: at least 4 CTAs an SM where 64 threads a CTA allow it, so
  // that no SM holds twice another's work and each has loads from several CTAs in flight
  // (docs/PERF.md, "Pools")
  if (sm_count <= 0) return max_threads;
  int threads = max_threads;
  while (threads > 64 && units < int64_t{4} * sm_count * threads) threads /= 2;
  return threads;
}

unsigned pool_grid(int64_t units, int items) {
  return static_cast<unsigned>(std::clamp<int64_t>((units + items - 1) / items, 1, 0x7fffffffLL));
}

PoolSpec plan_pool(const PoolProblem& q, const DeviceFacts& dev, const Tuning& t) {
  // a wide window: a warp an output, its window read from the call (one kernel for every size);
  // else a small window in the code: taps unrolled, no loop bounds or divisions by kernel params
  if (q.lanes) return PoolSpec{q.dtype, q.rank, q.mode, q.adaptive, q.index_bits, kPoolThreads, dev.arch, {}, q.lanes};
  PoolSpec s{q.dtype, q.rank, q.mode, q.adaptive, q.index_bits, kPoolThreads, dev.arch,
             q.adaptive ? PoolWindowParams{} : q.window, 0};
  s.wide = s.fixed_window() ? q.wide : 0;
  s.single = q.mode == PoolMode::Max && s.fixed_window() && !s.wide &&
             (t.pool_max_outputs ? t.pool_max_outputs == 1 : q.short_rows);
  return s;
}

std::string pool_window_tag(const PoolWindowParams& w, int rank) {
  std::string t;
  const char* what = "kspd";
  for (int k = 0; k < 4; ++k) {
    t += what[k];
    for (int d = 3 - rank; d < 3; ++d) t += (d > 3 - rank ? "x" : "") + std::to_string(w[k * 3 + d]);
  }
  return t;
}
std::string pool_window_expr(const PoolWindowParams& w) {
  std::string e = "tileops::PoolWindow<";
  for (int k = 0; k < 12; ++k) e += (k ? "," : "") + std::to_string(w[k]);
  return e + ">";
}

std::string pool_name(const PoolSpec& s) {
  return std::string(s.adaptive ? "adaptive_" : "") + (s.mode == PoolMode::Avg ? "avg" : "max") + "_pool" +
         std::to_string(s.rank) + "d_fwd__" + short_type_name(s.dtype) + "__i" + std::to_string(s.index_bits) + "__t" +
         std::to_string(s.threads) + (s.lanes ? "__g" + std::to_string(s.lanes) : "") +
         (s.wide ? "__w" + std::to_string(s.wide) : "") + (s.single ? "__p1" : "") +
         (s.fixed_window() ? "__" + pool_window_tag(s.window, s.rank) : "") + "__" + s.arch;
}

jit::KernelSource pool_source(const PoolSpec& s) {
  TORCH_CHECK(s.dtype == c10::kHalf || s.dtype == c10::kBFloat16 || s.dtype == c10::kFloat,
              "tileops: pool_fwd has no kernel for dtype ", s.dtype);
  TORCH_CHECK(s.rank >= 1 && s.rank <= 3, "tileops: pool_fwd pools 1 to 3 dims, not ", s.rank);
  TORCH_CHECK(s.index_bits == 32 || s.index_bits == 64, "tileops: pool_fwd indexes in int or long long");
  TORCH_CHECK(!(s.lanes && s.fixed_window()), "tileops: pool_fwd_warp reads its window from the call");
  TORCH_CHECK(s.lanes == 0 || s.lanes == 8 || s.lanes == 16 || s.lanes == 32,
              "tileops: pool_fwd_warp takes 8, 16 or 32 lanes an output");
  TORCH_CHECK(!s.wide || (s.fixed_window() && !s.adaptive),
              "tileops: pool_fwd_wide takes pools with a window in its code");
  const std::string head = std::string(kernel_type_name(s.dtype)) + ", " + (s.index_bits == 32 ? "int" : "long long") +
                           ", " + std::to_string(s.rank) + ", " + std::to_string(static_cast<int>(s.mode));
  std::string expr = s.wide ? "tileops::pool_fwd_wide<" + head
                            : std::string(s.lanes ? "tileops::pool_fwd_warp<" : "tileops::pool_fwd<") + head + ", " +
                                  (s.adaptive ? "true" : "false");
  if (s.lanes) expr += ", " + std::to_string(s.lanes);
  if (s.fixed_window()) expr += ", " + pool_window_expr(s.window) + (s.single ? ", 1" : "");
  expr += ">";
  return make_source(pool_name(s), "pool/pool_fwd.cuh", expr, s.arch);
}

std::vector<jit::KernelSource> PoolSpec::sources() const { return {pool_source(*this)}; }
std::string PoolSpec::describe() const {
  return std::string("pool_fwd(") + (adaptive ? "adaptive " : "") + (mode == PoolMode::Avg ? "avg" : "max") +
         ", rank=" + std::to_string(rank) + ", dtype=" + short_type_name(dtype) + ", index=int" +
         std::to_string(index_bits) + ", threads=" + std::to_string(threads) + (lanes ? ", " + std::to_string(lanes) + " lanes an output" : "") +
         (wide ? ", " + std::to_string(wide) + " outputs from a 16-byte vector" : "") +
         (fixed_window() ? ", window=" + pool_window_tag(window, rank) : "") + ")";
}

TILEOPS_BUILTIN_KERNEL(nvrtc, AvgPool1dFwdOp, avg_pool1d_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, AvgPool2dFwdOp, avg_pool2d_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, AvgPool3dFwdOp, avg_pool3d_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, MaxPool1dFwdOp, max_pool1d_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, MaxPool2dFwdOp, max_pool2d_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, MaxPool3dFwdOp, max_pool3d_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, AdaptiveAvgPool2dFwdOp, adaptive_avg_pool2d_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, AdaptiveMaxPool2dFwdOp, adaptive_max_pool2d_builder);

}  // namespace tileops::nvrtc
