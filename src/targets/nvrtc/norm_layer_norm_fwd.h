// LayerNormFwdOp on the nvrtc target (planning shared with RMSNorm).
#pragma once

#include <string>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/norm_rms_norm_fwd.h"

namespace tileops::nvrtc {
jit::KernelSource layer_norm_source(const RmsNormPlan& p, bool has_bias, const std::string& arch);
// Rows of 8 KB and more (TILEOPS_STAGED_MIN_ROW_BYTES overrides) take the staged kernel where
// staged_row_applies (sm_90+, 16-byte accesses, up to 64 KB).
constexpr int kLayerNormStagedMinRowBytes = 8192;
bool layer_norm_staged(c10::ScalarType dtype, int64_t n, int max_vec, int cc_major);
}  // namespace tileops::nvrtc
