// BatchNormFwdOp on the nvrtc target: x as InstanceNorm's rows (sample n's channel c: row n * C + c).
// Not training: the group norm kernels (group_norm.h) with the running stats. Training:
// group_norm_fwd_stats over the rows, batch_norm_fwd_stats a channel (src/kernels/norm/batch_norm_fwd.cuh:
// the batch mean and biased variance; the running stats moved in place when given), then the same
// group norm kernels with the batch statistics standing for the running stats.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <climits>

#include "targets/builtin.h"
#include "targets/nvrtc/norm/group_norm.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace op = tileops::ops::norm_batch_norm_fwd;

constexpr int kStatsThreads = 256;  // batch_norm_fwd_stats: a thread a channel

// The output pass's arguments: the running stats, or (training) the batch's mean and variance.
GroupNormArgs apply_args(const op::View& v, const at::Tensor* mean, const at::Tensor* var) {
  return {v.x(), v.y(), v.weight(), v.bias(), mean, var, v.x().size(1), v.eps()};
}

struct BatchNormProblem {
  GroupNormProblem apply;  // running stats (given, or the batch's): a row a sample's channel
  bool training;
  bool update;  // training with running stats: they are moved in place
  bool operator==(const BatchNormProblem& o) const {
    return apply == o.apply && training == o.training && update == o.update;
  }
  size_t hash() const { return apply.hash() ^ hash_words({training, update}); }
};

struct BatchNormSpec {
  GroupNormSpec apply;
  bool training, update;
  int threads;  // group_norm_fwd_stats's CTA (training)
  bool operator==(const BatchNormSpec& o) const {
    return apply == o.apply && training == o.training && update == o.update && threads == o.threads;
  }
  size_t hash() const { return apply.hash() ^ hash_words({training, update, threads}); }

  // Training: group_norm_fwd_stats, batch_norm_fwd_stats, then the output pass's kernels.
  std::vector<jit::KernelSource> sources() const {
    std::vector<jit::KernelSource> out;
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
    return std::string("batch_norm_fwd(") + (training ? "batch stats" : "running stats") +
           (update ? ", running stats updated" : "") + ", apply=" + apply.describe() + ")";
  }
};

class BatchNormKernel final : public Kernel {
 public:
  BatchNormKernel(std::vector<LoadedKernel> k, BatchNormSpec s, DeviceFacts dev)
      : s_(std::move(s)), dev_(std::move(dev)) {
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
  std::vector<LoadedKernel> stats_, apply_;
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
    return {plan_group_norm(q.apply, dev, t), q.training, q.update, kGroupNormTable.cta_threads};
  }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const {
    return std::make_shared<BatchNormKernel>(std::move(k), s, static_cast<const DeviceFacts&>(dev));
  }
};

KernelBuilder batch_norm_fwd_builder() { return spec_builder(BatchNormFamily{}); }
TILEOPS_BUILTIN_KERNEL(nvrtc, BatchNormFwdOp, batch_norm_fwd_builder);

}  // namespace
}  // namespace tileops::nvrtc
