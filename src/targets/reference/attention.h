// Attention through ATen that other targets run for the shapes their kernels do not take.
#pragma once

#include "tileops/op_call.h"

namespace tileops::reference {
// MultiHeadLatentAttentionDecodeWithKVCacheFwdOp: [q, q_pe] . [k, k_pe] scores, softmax, times k.
void mla_decode_aten(const OpCall& call);
}  // namespace tileops::reference
