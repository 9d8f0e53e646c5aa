// LayerNormFwdOp on the nvrtc target (planning shared with RMSNorm).
#pragma once

#include <string>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/norm_rms_norm_fwd.h"

namespace tileops::nvrtc {
jit::KernelSource layer_norm_source(const RmsNormPlan& p, bool has_bias, const std::string& arch);
// Rows of 8 KB and more (TILEOPS_STAGED_MIN_ROW_BYTES overrides) take the staged kernel where
// staged_row_applies (sm_90+, 16-byte accesses, up to 64 KB), 8 vectors a thread. H200 sweep
// (docs/PERF.md), bf16: 2048x4096 10.1 us vs 11.0 in registers, 2048x8192 22.8 vs 25.9, 4096x16384
// 72.7 vs 72.4; 4 vectors a thread: 10.9, 21.9, 76.7.
constexpr int kLayerNormStagedMinRowBytes = 8192;
constexpr int kLayerNormStagedPerThread = 8;
bool layer_norm_staged(c10::ScalarType dtype, int64_t n, int max_vec, int cc_major);
}  // namespace tileops::nvrtc
