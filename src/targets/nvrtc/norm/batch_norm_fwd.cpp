// BatchNormFwdOp on the nvrtc target: x as InstanceNorm's rows (sample n's channel c: row n * C + c).
// Not training: the group norm kernels (group_norm.h) with the running stats. Training, a channel that
// fits in one CTA's registers: batch_norm_fwd_channel (src/kernels/norm/batch_norm_fwd.cuh), one launch.
// Training, larger channels: group_norm_fwd_stats over the rows, batch_norm_fwd_stats a channel (the
// batch mean and biased variance; the running stats moved in place when given), then the same group
// norm kernels with the batch statistics standing for the running stats.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <climits>
#include <string>

#include "targets/builtin.h"
#include "targets/nvrtc/norm/group_norm.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace op = tileops::ops::norm_batch_norm_fwd;

constexpr int kStatsThreads = 256;  // batch_norm_fwd_stats: a thread a channel

// The one-launch plan's limits: a thread holds about vecs_per_thread vectors of its channel, more
// threads up to max_threads, then up to cache_regs registers of x in at most max_cache accesses; a
// channel beyond that takes the three-launch path. 1024 threads of 64 registers: more accesses a
// thread spill their addresses.
struct BatchNormTable {
  int vecs_per_thread = 4;
  int cache_regs = 32;  // registers of x a thread: 8 accesses of 16 bytes
  int max_cache = 16;
  int max_threads = 1024;
  int max_channels = 32;  // channels a CTA for 2-d x: a warp's lanes along C
};
constexpr BatchNormTable kBatchNormTable{};

// batch_norm_fwd_channel's template arguments.
struct BatchNormChannelSpec {
  c10::ScalarType dtype;
  int vec;    // elements an access; divides HW
  int cpb;    // channels a CTA (> 1 only for 2-d x)
  int tpb;    // threads a CTA
  int cache;  // vectors a thread holds
  bool weight, bias;
  TILEOPS_IDENTITY(BatchNormChannelSpec, dtype, vec, cpb, tpb, cache, weight, bias)
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The one-launch plan of a training call, or false when a channel does not fit one CTA. Pure.
bool plan_channel(const GroupNormProblem& q, BatchNormChannelSpec& out) {
  const BatchNormTable& t = kBatchNormTable;
  const int64_t samples = q.rows / std::max<int64_t>(q.groups, 1), channels = q.groups;
  BatchNormChannelSpec s{};
  s.dtype = q.dtype;
  s.weight = q.weight;
  s.bias = q.bias;
  // 2-d x: a CTA's threads run along C, adjacent channels adjacent in memory; else a channel a CTA,
  // its N runs of HW contiguous elements read in accesses as wide as HW and alignment allow.
  s.vec = q.hw == 1 ? 1 : row_access_width(q.dtype, q.hw, q.max_vec);
  s.cpb = q.hw == 1 ? next_pow2(std::clamp<int64_t>(channels, 1, t.max_channels)) : 1;
  const int64_t lv = samples * (q.hw / s.vec);  // vectors a channel
  const int reg_per_vec = std::max<int>(1, s.vec * static_cast<int>(c10::elementSize(q.dtype)) / 4);
  const int max_cache = std::min(t.max_cache, t.cache_regs / reg_per_vec);
  const int max_tpc = t.max_threads / s.cpb;  // threads a channel
  if (lv < 1 || lv > static_cast<int64_t>(max_tpc) * max_cache) return false;
  const int min_tpc = std::max(1, 32 / s.cpb);  // whole warps
  int tpc = next_pow2(std::clamp<int64_t>(ceil_div(lv, t.vecs_per_thread), min_tpc, max_tpc));
  if (ceil_div(lv, tpc) > max_cache) tpc = next_pow2(ceil_div(lv, max_cache));
  s.tpb = tpc * s.cpb;
  s.cache = next_pow2(ceil_div(lv, tpc));
  out = s;
  return true;
}

// The output pass's arguments: the running stats, or (training) the batch's mean and variance.
GroupNormArgs apply_args(const op::View& v, const at::Tensor* mean, const at::Tensor* var) {
  return {v.x(), v.y(), v.weight(), v.bias(), mean, var, v.x().size(1), v.eps()};
}

struct BatchNormProblem {
  GroupNormProblem apply;  // running stats (given, or the batch's): a row a sample's channel
  bool training;
  bool update;  // training with running stats: they are moved in place
  TILEOPS_IDENTITY(BatchNormProblem, apply, training, update)
};

struct BatchNormSpec {
  GroupNormSpec apply;  // unused (value-initialised) when channel
  bool training, update;
  int threads;  // group_norm_fwd_stats's CTA (training)
  bool channel;  // training in one launch: batch_norm_fwd_channel
  BatchNormChannelSpec one;
  std::string arch;
  TILEOPS_IDENTITY(BatchNormSpec, apply, training, update, threads, channel, one, arch)

  // Training: batch_norm_fwd_channel alone, or group_norm_fwd_stats, batch_norm_fwd_stats, then the
  // output pass's kernels.
  std::vector<jit::KernelSource> sources() const {
    std::vector<jit::KernelSource> out;
    if (channel) {
      const auto n = [](int v) { return std::to_string(v); };
      const char* tf[] = {"false", "true"};
      out.push_back(make_source(
          "batch_norm_fwd_channel__" + std::string(short_type_name(one.dtype)) + "__v" + n(one.vec) + "_c" +
              n(one.cpb) + "_t" + n(one.tpb) + "_k" + n(one.cache) + (update ? "_update" : "") +
              (one.weight ? "_w" : "_nw") + (one.bias ? "_b" : "_nb") + "__" + arch,
          "norm/batch_norm_fwd.cuh",
          "tileops::batch_norm_fwd_channel<" + std::string(kernel_type_name(one.dtype)) + ", " + n(one.vec) + ", " +
              n(one.cpb) + ", " + n(one.tpb) + ", " + n(one.cache) + ", " + tf[update] + ", " + tf[one.weight] +
              ", " + tf[one.bias] + ">",
          arch));
      return out;
    }
    if (training) {
      GroupNormSpec stats = apply;  // the split plan's first pass over the same rows and vectors
      stats.impl = GroupNormImpl::kSplit;
      stats.running = stats.weight = stats.bias = false;
      stats.tpr = threads;
      stats.rows = 1;
      stats.cache = 0;
      out.push_back(stats.sources().front());
      const std::string t = std::to_string(kStatsThreads);
      out.push_back(make_source("batch_norm_fwd_stats__t" + t + (update ? "_update" : "") + "__" + apply.arch,
                                "norm/batch_norm_fwd.cuh",
                                "tileops::batch_norm_fwd_stats<" + t + ", " + (update ? "true" : "false") + ">",
                                apply.arch));
    }
    for (auto& s : apply.sources()) out.push_back(std::move(s));
    return out;
  }
  std::string describe() const {
    if (channel)
      return std::string("batch_norm_fwd(batch stats") + (update ? ", running stats updated" : "") +
             ", one launch: dtype=" + short_type_name(one.dtype) + ", vec=" + std::to_string(one.vec) +
             ", channels a CTA=" + std::to_string(one.cpb) + ", threads=" + std::to_string(one.tpb) +
             ", cache=" + std::to_string(one.cache) + ", weight=" + (one.weight ? "yes" : "no") +
             ", bias=" + (one.bias ? "yes" : "no") + ")";
    return std::string("batch_norm_fwd(") + (training ? "batch stats" : "running stats") +
           (update ? ", running stats updated" : "") + ", apply=" + apply.describe() + ")";
  }
};

class BatchNormKernel final : public Kernel {
 public:
  BatchNormKernel(std::vector<LoadedKernel> k, BatchNormSpec s, DeviceFacts dev)
      : s_(std::move(s)), dev_(std::move(dev)) {
    if (s_.channel) {
      stats_ = std::move(k);
      return;
    }
    const size_t first = s_.training ? 2 : 0;
    if (s_.training) stats_.assign(k.begin(), k.begin() + 2);
    apply_.assign(k.begin() + static_cast<std::ptrdiff_t>(first), k.end());
  }

  void launch(const OpCall& call) const override {
    const op::View v(call);
    if (!s_.training) {
      launch_group_norm(apply_, s_.apply, apply_args(v, v.running_mean(), v.running_var()), dev_, call.op_name);
      return;
    }
    const at::Tensor& x = v.x();
    long long samples = x.size(0), channels = x.size(1);
    if (s_.channel) {
      const void* xp = x.const_data_ptr();
      const void* w = s_.one.weight ? v.weight()->const_data_ptr() : nullptr;
      const void* b = s_.one.bias ? v.bias()->const_data_ptr() : nullptr;
      void* rm = s_.update ? v.running_mean()->mutable_data_ptr() : nullptr;
      void* rv = s_.update ? v.running_var()->mutable_data_ptr() : nullptr;
      void* y = v.y().mutable_data_ptr();
      long long hv = x.numel() / (samples * channels) / s_.one.vec;
      float momentum = static_cast<float>(v.momentum()), eps = static_cast<float>(v.eps());
      const long long grid = (channels + s_.one.cpb - 1) / s_.one.cpb;
      TORCH_CHECK(grid <= INT_MAX, call.op_name, ": too many channels (", channels, ") for one launch");
      void* args[] = {&xp, &w, &b, &rm, &rv, &y, &samples, &channels, &hv, &momentum, &eps};
      nvrtc::launch(stats_[0], static_cast<unsigned>(grid), static_cast<unsigned>(s_.one.tpb), 0, args);
      return;
    }
    GroupNormProblem q = group_norm_problem(apply_args(v, nullptr, nullptr));  // the rows' input statistics
    int splits = std::max(1, group_norm_splits(q, dev_));
    long long lv = q.hw / s_.apply.vec;
    long long chunk = (lv + splits - 1) / splits;
    const long long grid = q.rows * splits;
    TORCH_CHECK(grid <= INT_MAX, call.op_name, ": too many channels of samples (", q.rows, ") for one launch");
    const at::Tensor ws = at::empty({grid * 3}, x.options().dtype(at::kFloat));  // (count, mean, M2) a chunk
    const void* xp = x.const_data_ptr();
    void* wsp = ws.mutable_data_ptr();
    {
      void* args[] = {&xp, &wsp, &lv, &splits, &chunk};
      nvrtc::launch(stats_[0], static_cast<unsigned>(grid), static_cast<unsigned>(s_.threads), 0, args);
    }
    const at::Tensor stats = at::empty({2 * channels}, x.options().dtype(at::kFloat));
    void* sp = stats.mutable_data_ptr();
    void* rm = s_.update ? v.running_mean()->mutable_data_ptr() : nullptr;
    void* rv = s_.update ? v.running_var()->mutable_data_ptr() : nullptr;
    float momentum = static_cast<float>(v.momentum());
    {
      const void* wsc = wsp;
      void* args[] = {&wsc, &sp, &rm, &rv, &samples, &channels, &splits, &momentum};
      nvrtc::launch(stats_[1], static_cast<unsigned>((channels + kStatsThreads - 1) / kStatsThreads), kStatsThreads,
                    0, args);
    }
    const at::Tensor mean = stats.narrow(0, 0, channels), var = stats.narrow(0, channels, channels);
    launch_group_norm(apply_, s_.apply, apply_args(v, &mean, &var), dev_, call.op_name);
  }

 private:
  BatchNormSpec s_;
  DeviceFacts dev_;
  std::vector<LoadedKernel> stats_, apply_;  // channel: stats_ holds batch_norm_fwd_channel
};

struct BatchNormFamily {
  using Problem = BatchNormProblem;
  using Spec = BatchNormSpec;

  Problem problem(const OpCall& call) const {
    const op::View v(call);
    const bool training = v.training();
    // The output pass always reads running stats (the batch's when training; the generated checks
    // refused training=False without them).
    GroupNormProblem apply = group_norm_problem(apply_args(v, nullptr, nullptr));
    apply.running = true;
    return {apply, training, training && v.running_mean() != nullptr};
  }
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning& t) const {
    Spec s{};
    s.training = q.training;
    s.update = q.update;
    s.arch = dev.arch;
    if (q.training && plan_channel(q.apply, s.one)) {
      s.channel = true;
      return s;
    }
    s.apply = plan_group_norm(q.apply, dev, t);
    s.threads = kGroupNormTable.cta_threads;
    return s;
  }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const {
    return std::make_shared<BatchNormKernel>(std::move(k), s, static_cast<const DeviceFacts&>(dev));
  }
};

KernelBuilder batch_norm_fwd_builder() { return spec_builder(BatchNormFamily{}); }
TILEOPS_BUILTIN_KERNEL(nvrtc, BatchNormFwdOp, batch_norm_fwd_builder);

}  // namespace
}  // namespace tileops::nvrtc
