// LayerNormFwdOp on the nvrtc target (planning shared with RMSNorm).
#pragma once

#include <string>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/norm_rms_norm_fwd.h"

namespace tileops::nvrtc {
jit::KernelSource layer_norm_source(const RmsNormPlan& p, bool has_bias, const std::string& arch);
}  // namespace tileops::nvrtc
