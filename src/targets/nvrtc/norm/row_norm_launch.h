// Row norm forward on the nvrtc target: reading a call's problem and launching a spec's kernel, for
// the ops of row_norm_ops.cpp (RMSNorm, fused add, LayerNorm, Gemma and the quantised rows).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <memory>
#include <optional>
#include <vector>

#include "targets/nvrtc/norm/row_norm.h"
#include "tileops/target.h"

namespace tileops::nvrtc {

// The tensors and params the kernels use, read from one call through the op's view (nullptr: the
// op has no such argument, or the call leaves it out).
struct RowNormArgs {
  const at::Tensor& x;
  const at::Tensor& y;
  const at::Tensor* weight = nullptr;
  const at::Tensor* bias = nullptr;
  const at::Tensor* residual = nullptr;
  const at::Tensor* residual_out = nullptr;
  c10::IntArrayRef normalized_shape;
  std::optional<double> eps;
  // The quantised ops: y is q; scale is the static scale or scale_ub; scales the per-row scales.
  const at::Tensor* scale = nullptr;
  const at::Tensor* scales = nullptr;
};
using RowNormArgsOf = RowNormArgs (*)(const OpCall& call);

struct RowNormFamily {
  using Problem = RowNormProblem;
  using Spec = RowNormSpec;
  RowNormOp op;
  RowNormArgsOf args;
  bool gemma = false;  // GemmaRMSNormFwdOp, GemmaFusedAddRMSNormFwdOp: scaled by 1 + weight
  RowNormQuant quant = RowNormQuant::kNone;  // RMSNorm*QuantFwdOp

  Problem problem(const OpCall& call) const;
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning& t) const { return plan_row_norm(q, dev, t); }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const;
};

// The families of the ops (their argument readers), as registered.
RowNormFamily rms_norm_fwd_family();
RowNormFamily fused_add_rms_norm_fwd_family();
RowNormFamily layer_norm_fwd_family();
RowNormFamily gemma_rms_norm_fwd_family();
RowNormFamily gemma_fused_add_rms_norm_fwd_family();
RowNormFamily rms_norm_static_quant_fwd_family();
RowNormFamily fused_add_rms_norm_static_quant_fwd_family();
RowNormFamily rms_norm_dynamic_quant_fwd_family();
RowNormFamily fused_add_rms_norm_dynamic_quant_fwd_family();

}  // namespace tileops::nvrtc
