// GroupNormFwdOp and InstanceNormFwdOp on the nvrtc target: a call's problem, the kernels of its spec
// (group_norm.h), the launch both use, and their registrations.
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
