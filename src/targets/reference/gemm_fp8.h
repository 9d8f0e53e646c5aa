// GemmFp8FwdOp through ATen in float32: the reference target's kernel, and what the cublaslt target
// runs for the scale modes and shapes cuBLASLt's FP8 path does not take.
#pragma once

#include "tileops/op_call.h"

namespace tileops::reference {
void gemm_fp8_fwd_aten(const OpCall& call);
}  // namespace tileops::reference
