// SoftmaxFwdOp and LogSoftmaxFwdOp (softmax_ops.cpp) on the nvrtc target: reading a
// call's problem and launching a spec's kernels.
//
// The kernels reduce the last dim of a contiguous tensor. Another `dim` is moved last first
// (x.movedim(dim, -1).contiguous()), computed, and copied back into y's layout: a known cost of two
// extra copies of the tensor (read+write each) and two temporaries, on top of the kernel.
#pragma once

#include <memory>
#include <vector>

#include "targets/nvrtc/reduction/softmax.h"
#include "tileops/target.h"

namespace tileops::nvrtc {

struct SoftmaxFamily {
  using Problem = SoftmaxProblem;
  using Spec = SoftmaxSpec;
  bool log;

  Problem problem(const OpCall& call) const;
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning& t) const { return plan_softmax(q, dev, t); }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const;
};

KernelBuilder softmax_builder(bool log);

}  // namespace tileops::nvrtc
