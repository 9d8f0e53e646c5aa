// Row norm forward on the nvrtc target: reading a call's problem and launching a spec's kernel, for
// RMSNormFwdOp (rms_norm_fwd.cpp), FusedAddRMSNormFwdOp (fused_add_rms_norm_fwd.cpp) and
// LayerNormFwdOp (layer_norm_fwd.cpp).
#pragma once

#include <memory>
#include <vector>

#include "targets/nvrtc/norm/row_norm.h"
#include "tileops/target.h"

namespace tileops::nvrtc {

// Where an op keeps the tensors and params the kernels use (indices into OpCall; -1: none).
struct RowNormSlots {
  int x, residual, weight, bias;
  int y, residual_out;
  int normalized_shape, eps;
};

struct RowNormFamily {
  using Problem = RowNormProblem;
  using Spec = RowNormSpec;
  RowNormOp op;
  RowNormSlots slots;
  bool gemma = false;  // GemmaRMSNormFwdOp, GemmaFusedAddRMSNormFwdOp: scaled by 1 + weight

  Problem problem(const OpCall& call) const;
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning& t) const { return plan_row_norm(q, dev, t); }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const;
};

// The families of the ops (their slots), as registered.
RowNormFamily rms_norm_fwd_family();
RowNormFamily fused_add_rms_norm_fwd_family();
RowNormFamily layer_norm_fwd_family();
RowNormFamily gemma_rms_norm_fwd_family();
RowNormFamily gemma_fused_add_rms_norm_fwd_family();

}  // namespace tileops::nvrtc
