// GemmW4A16FwdOp through ATen in float32: the reference target's kernel, and what the nvrtc target
// runs for the shapes its decode kernel does not take (more than 64 rows, K or group not multiples of 32).
#pragma once

#include <ATen/core/Tensor.h>

#include "tileops/op_call.h"

namespace tileops::reference {
void gemm_w4a16_fwd_aten(const OpCall& call);
// The op's 16-bit weight [N, K], (q - zero) * scale with the scale rounded to the activation's dtype
// first and the product rounded to it once: what the tensor cores read in every implementation.
at::Tensor w4a16_dequantized_weight(const OpCall& call);
}  // namespace tileops::reference
