// GroupNormFwdOp and InstanceNormFwdOp on the nvrtc target: the plan (problem, device -> spec),
// what a spec renders, the launch both ops use, and their registrations (group_norm.h).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <climits>

#include "targets/builtin.h"
#include "targets/nvrtc/norm/group_norm.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

const GroupNormTable& kT = kGroupNormTable;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Vectors a row, at the access width the problem allows.
int64_t row_vecs(const GroupNormProblem& q, int vec) { return q.cpg * (q.hw / vec); }

// The row kernel's shape: about vecs_per_thread vectors a thread on up to 256 threads a row, then up
// to cache_vecs (the row still in registers) on up to max_tpr, then streamed; rows of a warp or less
// share a CTA of cta_threads.
GroupNormSpec row_shape(const GroupNormProblem& q, const DeviceFacts& dev, const GroupNormTable& T) {
  GroupNormSpec s{};
  s.impl = GroupNormImpl::kRows;
  s.dtype = q.dtype;
  s.vec = row_access_width(q.dtype, q.hw, q.max_vec);  // divides hw: no vector straddles two channels
  s.weight = q.weight;
  s.bias = q.bias;
  s.running = q.running;
  s.arch = dev.arch;
  const int64_t lv = std::max<int64_t>(row_vecs(q, s.vec), 1);
  const int vpt = q.running ? T.running_vecs_per_thread : T.vecs_per_thread;
  s.tpr = next_pow2(std::clamp<int64_t>(ceil_div(lv, vpt), 1, 256));
  if (ceil_div(lv, s.tpr) > T.cache_vecs) s.tpr = next_pow2(std::clamp<int64_t>(ceil_div(lv, T.cache_vecs), 1, T.max_tpr));
  const int64_t per_thread = ceil_div(lv, s.tpr);
  // Running stats need no reduction: nothing to keep between passes.
  s.cache = q.running || per_thread > T.cache_vecs ? 0 : next_pow2(per_thread);
  s.rows = s.tpr > 32 ? 1 : std::max(1, T.rows_cta_threads / s.tpr);
  return s;
}

const char* tf(bool b) { return b ? "true" : "false"; }

std::string affine_part(const GroupNormSpec& s) {
  return std::string(s.weight ? "_w" : "_nw") + (s.bias ? "_b" : "_nb") + (s.running ? "_running" : "");
}

}  // namespace

int group_norm_splits(const GroupNormProblem& q, const DeviceFacts& dev) {
  const int vec = row_access_width(q.dtype, q.hw, q.max_vec);
  const int64_t lv = row_vecs(q, vec);
  if (lv <= static_cast<int64_t>(kT.max_tpr) * kT.cache_vecs) return 1;  // the row kernel holds it in registers
  if (q.rows >= static_cast<int64_t>(dev.sm_count) * kT.row_ctas_per_sm) return 1;  // enough rows to fill the GPU
  const int64_t most = lv / (static_cast<int64_t>(kT.cta_threads) * kT.min_split_vecs);
  if (most < 2) return 1;
  const int64_t want =
      static_cast<int64_t>(dev.sm_count) * std::max(1, dev.threads_per_sm / kT.cta_threads) * kT.split_waves;
  return static_cast<int>(std::clamp<int64_t>(ceil_div(want, std::max<int64_t>(q.rows, 1)), 2,
                                              std::min<int64_t>(most, kT.max_splits)));
}

GroupNormTable group_norm_table(const Tuning& t) {
  GroupNormTable T = kGroupNormTable;
  if (t.gn_vecs_per_thread) T.vecs_per_thread = t.gn_vecs_per_thread;
  if (t.gn_running_vecs_per_thread) T.running_vecs_per_thread = t.gn_running_vecs_per_thread;
  if (t.gn_cta_threads) T.rows_cta_threads = t.gn_cta_threads;
  return T;
}

GroupNormSpec plan_group_norm(const GroupNormProblem& q, const DeviceFacts& dev, const Tuning& t) {
  GroupNormSpec s = row_shape(q, dev, group_norm_table(t));
  if (group_norm_splits(q, dev) > 1) {
    s.impl = GroupNormImpl::kSplit;
    s.tpr = kT.cta_threads;
    s.rows = 1;
    s.cache = 0;
  }
  return s;
}

std::vector<jit::KernelSource> GroupNormSpec::sources() const {
  const std::string type = kernel_type_name(dtype);
  const std::string head = std::string("__") + short_type_name(dtype) + "__v" + std::to_string(vec) + "_t" +
                           std::to_string(tpr);
  const std::string stats = running ? "tileops::kGroupNormRunningStats" : "tileops::kGroupNormInputStats";
  const std::string tail = stats + ", " + tf(weight) + ", " + tf(bias) + ">";
  const char* header = "norm/group_norm_fwd.cuh";
  if (impl == GroupNormImpl::kRows) {
    return {make_source("group_norm_fwd_rows" + head + "_r" + std::to_string(rows) + "_c" + std::to_string(cache) +
                            affine_part(*this) + "__" + arch,
                        header,
                        "tileops::group_norm_fwd_rows<" + type + ", " + std::to_string(vec) + ", " +
                            std::to_string(tpr) + ", " + std::to_string(rows) + ", " + std::to_string(cache) + ", " +
                            tail,
                        arch)};
  }
  std::vector<jit::KernelSource> out;
  if (!running) {  // the running stats need no first pass
    out.push_back(make_source("group_norm_fwd_stats" + head + "__" + arch, header,
                              "tileops::group_norm_fwd_stats<" + type + ", " + std::to_string(vec) + ", " +
                                  std::to_string(tpr) + ">",
                              arch));
  }
  out.push_back(make_source("group_norm_fwd_apply" + head + affine_part(*this) + "__" + arch, header,
                            "tileops::group_norm_fwd_apply<" + type + ", " + std::to_string(vec) + ", " +
                                std::to_string(tpr) + ", " + tail,
                            arch));
  return out;
}

std::string GroupNormSpec::describe() const {
  return std::string("group_norm_fwd(dtype=") + short_type_name(dtype) + ", stats=" + (running ? "running" : "input") +
         ", weight=" + (weight ? "yes" : "no") + ", bias=" + (bias ? "yes" : "no") + ", vec=" + std::to_string(vec) +
         (impl == GroupNormImpl::kRows
              ? ", impl=rows, tpr=" + std::to_string(tpr) + ", rows=" + std::to_string(rows) +
                    ", cache=" + std::to_string(cache)
              : ", impl=split, threads=" + std::to_string(tpr)) +
         ")";
}


namespace {

class GroupNormKernel final : public Kernel {
 public:
  GroupNormKernel(std::vector<LoadedKernel> k, GroupNormSpec s, GroupNormArgsOf args, DeviceFacts dev)
      : k_(std::move(k)), s_(std::move(s)), args_(args), dev_(std::move(dev)) {}

  void launch(const OpCall& call) const override { launch_group_norm(k_, s_, args_(call), dev_, call.op_name); }

 private:
  std::vector<LoadedKernel> k_;
  GroupNormSpec s_;
  GroupNormArgsOf args_;
  DeviceFacts dev_;
};

GroupNormArgs read_args(const OpCall& call) {
  const tileops::ops::norm_group_norm_fwd::View v(call);
  return {v.x(), v.y(), v.weight(), v.bias(), nullptr, nullptr, v.num_groups(), v.eps()};
}

}  // namespace

GroupNormProblem group_norm_problem(const GroupNormArgs& a) {
  const at::Tensor& x = a.x;
  int64_t hw = 1;
  for (int64_t d = 2; d < x.dim(); ++d) hw *= x.size(d);
  GroupNormProblem q{};
  q.dtype = x.scalar_type();
  q.groups = a.groups;
  q.rows = x.size(0) * a.groups;
  q.cpg = x.size(1) / a.groups;  // the generated checks refused a num_groups that does not divide C
  q.hw = hw;
  q.max_vec = access_width({x.const_data_ptr(), a.y.const_data_ptr()}, static_cast<int>(x.element_size()));
  q.weight = a.weight != nullptr;
  q.bias = a.bias != nullptr;
  q.running = a.running_mean != nullptr;
  return q;
}

void launch_group_norm(const std::vector<LoadedKernel>& k, const GroupNormSpec& s, const GroupNormArgs& a,
                       const DeviceFacts& dev, const char* op_name) {
  const GroupNormProblem q = group_norm_problem(a);
  const void* x = a.x.const_data_ptr();
  void* y = a.y.mutable_data_ptr();
  const void* w = s.weight ? a.weight->const_data_ptr() : nullptr;
  const void* b = s.bias ? a.bias->const_data_ptr() : nullptr;
  const void* rm = s.running ? a.running_mean->const_data_ptr() : nullptr;
  const void* rv = s.running ? a.running_var->const_data_ptr() : nullptr;
  long long rows = q.rows, groups = q.groups, cpg = q.cpg, hv = q.hw / s.vec;
  float eps = static_cast<float>(a.eps);
  if (s.impl == GroupNormImpl::kRows) {
    const long long grid = (rows + s.rows - 1) / s.rows;
    TORCH_CHECK(grid <= INT_MAX, op_name, ": too many groups (", rows, ") for one launch");
    void* args[] = {&x, &w, &b, &rm, &rv, &y, &rows, &groups, &cpg, &hv, &eps};
    nvrtc::launch(k[0], static_cast<unsigned>(grid), static_cast<unsigned>(s.threads()), 0, args);
    return;
  }
  int splits = std::max(1, group_norm_splits(q, dev));
  const long long lv = cpg * hv;
  long long chunk = (lv + splits - 1) / splits;
  const long long grid = rows * splits;
  TORCH_CHECK(grid <= INT_MAX, op_name, ": too many groups (", rows, ") for one launch");
  at::Tensor ws;  // each chunk's (count, mean, M2), three floats
  const void* wsp = nullptr;
  if (!s.running) {
    ws = at::empty({grid * 3}, a.x.options().dtype(at::kFloat));
    void* wsw = ws.mutable_data_ptr();
    long long lv_arg = lv;
    void* args[] = {&x, &wsw, &lv_arg, &splits, &chunk};
    nvrtc::launch(k[0], static_cast<unsigned>(grid), static_cast<unsigned>(s.tpr), 0, args);
    wsp = wsw;
  }
  void* args[] = {&x, &w, &b, &rm, &rv, &wsp, &y, &groups, &cpg, &hv, &splits, &chunk, &eps};
  nvrtc::launch(k.back(), static_cast<unsigned>(grid), static_cast<unsigned>(s.tpr), 0, args);
}

GroupNormProblem GroupNormFamily::problem(const OpCall& call) const { return group_norm_problem(args(call)); }

std::shared_ptr<const Kernel> GroupNormFamily::make(const GroupNormSpec& s, std::vector<LoadedKernel> k,
                                                    const DeviceInfo& dev) const {
  return std::make_shared<GroupNormKernel>(std::move(k), s, args, static_cast<const DeviceFacts&>(dev));
}

namespace {
// InstanceNormFwdOp: GroupNorm's kernels with a group a channel; with use_input_stats=False the running
// stats stand for each channel's mean and variance.
GroupNormArgs read_instance_args(const OpCall& call) {
  const tileops::ops::norm_instance_norm_fwd::View v(call);
  // The generated checks refused running stats beside use_input_stats=True, and their absence without.
  const bool running = !v.use_input_stats();
  return {v.x(),    v.y(), v.weight(), v.bias(), running ? v.running_mean() : nullptr,
          running ? v.running_var() : nullptr, v.x().size(1), v.eps()};
}
}  // namespace

GroupNormFamily group_norm_fwd_family() { return GroupNormFamily{read_args}; }
GroupNormFamily instance_norm_fwd_family() { return GroupNormFamily{read_instance_args}; }

namespace {
KernelBuilder group_norm_fwd_builder() { return spec_builder(group_norm_fwd_family()); }
KernelBuilder instance_norm_fwd_builder() { return spec_builder(instance_norm_fwd_family()); }
TILEOPS_BUILTIN_KERNEL(nvrtc, GroupNormFwdOp, group_norm_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, InstanceNormFwdOp, instance_norm_fwd_builder);
}  // namespace
}  // namespace tileops::nvrtc
