// RMSNormFwdOp on the nvrtc target: planning (which specialisation of src/kernels/norm/rms_norm_fwd.cuh
// serves a row length) and the kernel builder.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

#include "jit/nvrtc_compiler.h"
#include "tileops/target.h"

namespace tileops::nvrtc {

struct RmsNormPlan {
  c10::ScalarType dtype;
  int n;             // row length (prod(normalized_shape))
  int vec;           // elements per access (16 bytes when the row and pointers allow)
  int tpr;           // threads per row (power of two, <= 1024)
  int rows;          // rows per CTA
  bool has_weight;
  bool cache;        // row kept in registers between the two passes
  uint32_t eps_bits; // float32 eps, bit pattern
  bool add_residual = false;  // FusedAddRMSNormFwdOp
};

// Where an op keeps the tensors and params the RMSNorm kernels use (indices into OpCall).
struct RmsNormSlots {
  int x, residual, weight;  // residual = -1 when the op has none
  int y, residual_out;
  int normalized_shape, eps;
};

// max_vec: the widest access the pointers' alignment allows (1..16/elem_size).
RmsNormPlan plan_rms_norm(c10::ScalarType dtype, int64_t n, bool has_weight, float eps, int max_vec,
                          bool add_residual = false);
std::string rms_norm_name(const RmsNormPlan& p, const std::string& arch);
jit::KernelSource rms_norm_source(const RmsNormPlan& p, const std::string& arch);
KernelBuilder rms_norm_fwd_builder();
// The builder shared by RMSNormFwdOp and FusedAddRMSNormFwdOp.
KernelBuilder make_rms_norm_builder(RmsNormSlots slots);

}  // namespace tileops::nvrtc
