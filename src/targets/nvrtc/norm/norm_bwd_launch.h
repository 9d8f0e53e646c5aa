// Norm backward on the nvrtc target: reading a call's problem and launching a spec's kernels, for
// RMSNormBwdOp (rms_norm_bwd.cpp) and LayerNormBwdOp (layer_norm_bwd.cpp).
#pragma once

#include <memory>
#include <vector>

#include "targets/nvrtc/norm/norm_bwd.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "tileops/target.h"

namespace tileops::nvrtc {

// Where an op keeps the tensors and params (indices into OpCall); dbias = -1 for RMSNorm.
struct NormBwdSlots {
  bool layer;
  int dy, x, weight;
  int dx, dweight, dbias;
  int normalized_shape, eps;
};

struct NormBwdFamily {
  using Problem = NormBwdProblem;
  using Spec = NormBwdSpec;
  NormBwdSlots slots;

  Problem problem(const OpCall& call) const;
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning& t) const { return plan_norm_bwd(q, dev, t); }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const;
};

// The families of the two ops (their slots), as registered.
NormBwdFamily rms_norm_bwd_family();
NormBwdFamily layer_norm_bwd_family();

}  // namespace tileops::nvrtc
