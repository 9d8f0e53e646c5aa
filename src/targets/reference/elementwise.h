// The elementwise family through ATen (each entry's ref_api): the reference target's kernel, and what
// the nvrtc target runs for an entry's cases that leave optional inputs out until their kernels are
// verified on a GPU.
#pragma once

#include "tileops/op_call.h"

namespace tileops::reference {
void elementwise_aten(const OpCall& call);
}  // namespace tileops::reference
