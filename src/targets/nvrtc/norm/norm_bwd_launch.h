// Norm backward on the nvrtc target: reading a call's problem and launching a spec's kernels, for
// RMSNormBwdOp and LayerNormBwdOp (norm_bwd_ops.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <memory>
#include <optional>
#include <vector>

#include "targets/nvrtc/norm/norm_bwd.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "tileops/target.h"

namespace tileops::nvrtc {

// The tensors and params the kernels use, read from one call through the op's view (nullptr: the
// op has no such argument, or the call leaves it out; RMSNorm has no dbias).
struct NormBwdArgs {
  const at::Tensor& dy;
  const at::Tensor& x;
  const at::Tensor& dx;
  const at::Tensor* weight;
  const at::Tensor* dweight;
  const at::Tensor* dbias;
  c10::IntArrayRef normalized_shape;
  std::optional<double> eps;
};
using NormBwdArgsOf = NormBwdArgs (*)(const OpCall& call);

struct NormBwdFamily {
  using Problem = NormBwdProblem;
  using Spec = NormBwdSpec;
  bool layer;
  NormBwdArgsOf args;

  Problem problem(const OpCall& call) const;
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning& t) const { return plan_norm_bwd(q, dev, t); }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const;
};

// The families of the two ops (their argument readers), as registered.
NormBwdFamily rms_norm_bwd_family();
NormBwdFamily layer_norm_bwd_family();

}  // namespace tileops::nvrtc
