// GroupNormFwdOp and InstanceNormFwdOp (num_groups = C) on the nvrtc target
// (src/kernels/norm/group_norm_fwd.cuh): x as rows of one sample's group of channels, C / G * HW
// contiguous elements each. One problem, spec and plan serve both ops.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/nvrtc/tuning.h"
#include "tileops/target.h"

namespace tileops::nvrtc {

enum class GroupNormImpl : int {
  kRows = 0,   // group_norm_fwd_rows: TPR threads a row, the row in registers or read twice
  kSplit = 1,  // group_norm_fwd_stats, then group_norm_fwd_apply: each long row over several CTAs
};

// What a call asks for. eps is a launch argument: not part of the problem.
struct GroupNormProblem {
  c10::ScalarType dtype;
  int64_t rows;    // N * G
  int64_t groups;  // G
  int64_t cpg;     // channels a group, C / G
  int64_t hw;      // elements a channel of a sample: the product of x's dims after C (1 for 2-d x)
  int max_vec;     // widest access (elements) the alignment of x and y allows
  bool weight, bias;
  bool running;    // InstanceNormFwdOp with use_input_stats=False: normalised by the running stats
  TILEOPS_IDENTITY(GroupNormProblem, dtype, rows, groups, cpg, hw, max_vec, weight, bias, running)
};

struct GroupNormSpec {
  GroupNormImpl impl;
  c10::ScalarType dtype;
  int vec;    // elements an access; divides hw
  int tpr;    // kRows: threads a row (a power of two); kSplit: threads a CTA
  int rows;   // kRows: rows a CTA
  int cache;  // kRows: most vectors a thread keeps in registers; 0: the row is read twice
  bool weight, bias, running;
  std::string arch;

  TILEOPS_IDENTITY(GroupNormSpec, impl, dtype, vec, tpr, rows, cache, weight, bias, running, arch)
  int threads() const { return tpr * rows; }
  // kRows: the row kernel; kSplit: the stats kernel (input stats only), then the apply kernel.
  std::vector<jit::KernelSource> sources() const;
  std::string describe() const;
};

// The thresholds of the group norm plans. running_vecs_per_thread is measured and vecs_per_thread and
// cta_threads were swept with nothing faster (docs/PERF.md, "Spatial norms"); the rest are from the bandwidth arithmetic (enough bytes in flight an
// SM, as the row norms' and the reductions').
struct GroupNormTable {
  int vecs_per_thread = 4;    // a row's threads: about this many vectors each, up to 256 threads
  int running_vecs_per_thread = 1;  // the same with running stats: no reduction, so more threads
  int cache_vecs = 8;         // then up to this many each, in registers, up to max_tpr threads
  int max_tpr = 1024;
  int cta_threads = 256;      // a CTA of a split row's chunk
  int rows_cta_threads = 256; // a CTA of short rows (several a CTA)
  int row_ctas_per_sm = 2;    // rows too long for registers: fewer rows than this per SM are split
  int split_waves = 4;        // split CTAs: about this many times what the SMs hold at once
  int min_split_vecs = 4;     // vectors a thread of a split chunk at least
  int max_splits = 4096;
};
constexpr GroupNormTable kGroupNormTable{};
// The table with the tuning's overrides (TILEOPS_TUNE, a developer tool): what the plans read.
GroupNormTable group_norm_table(const Tuning& t);

// plan(problem, device facts, tuning) -> spec: pure.
GroupNormSpec plan_group_norm(const GroupNormProblem& q, const DeviceFacts& dev, const Tuning& t = {});
// CTAs each row of a kSplit spec spreads over (1: the row kernel serves it). Pure: the launch
// recomputes it from the call.
int group_norm_splits(const GroupNormProblem& q, const DeviceFacts& dev);

// The tensors and params the kernels use, read from one call through the op's view.
struct GroupNormArgs {
  const at::Tensor& x;
  const at::Tensor& y;
  const at::Tensor* weight;
  const at::Tensor* bias;
  const at::Tensor* running_mean;  // InstanceNormFwdOp with use_input_stats=False only
  const at::Tensor* running_var;
  int64_t groups;
  double eps;
};
using GroupNormArgsOf = GroupNormArgs (*)(const OpCall& call);

// The launch of a spec's kernels (k: its sources(), in order) on a call's tensors; the problem is
// `problem_of(a)`. BatchNormFwdOp uses it too, with its batch statistics standing for running stats.
GroupNormProblem group_norm_problem(const GroupNormArgs& a);
void launch_group_norm(const std::vector<LoadedKernel>& k, const GroupNormSpec& s, const GroupNormArgs& a,
                       const DeviceFacts& dev, const char* op_name);

struct GroupNormFamily {
  using Problem = GroupNormProblem;
  using Spec = GroupNormSpec;
  GroupNormArgsOf args;

  Problem problem(const OpCall& call) const;
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning& t) const { return plan_group_norm(q, dev, t); }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const;
};

// The families of the two ops (their argument readers), as registered.
GroupNormFamily group_norm_fwd_family();
GroupNormFamily instance_norm_fwd_family();

}  // namespace tileops::nvrtc
