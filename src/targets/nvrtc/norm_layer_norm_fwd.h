// LayerNormFwdOp on the nvrtc target (planning shared with RMSNorm).
#pragma once

#include <string>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/norm_rms_norm_fwd.h"

namespace tileops::nvrtc {
jit::KernelSource layer_norm_source(const RmsNormPlan& p, bool has_bias, const std::string& arch);
// Rows of 8 KB and more (TILEOPS_STAGED_MIN_ROW_BYTES overrides) take the staged kernel where
// staged_row_applies (sm_90+, 16-byte accesses, up to 64 KB): 8 vectors a thread below 16 KB rows,
// 4 from 16 KB. H200 sweeps (docs/PERF.md), bf16, persistent walk: 8 a thread 10.4 / 23.9 / 73.5 us
// for 2048x4096 / 2048x8192 / 4096x16384, 4 a thread 10.6 / 20.9 / 71.5.
constexpr int kLayerNormStagedMinRowBytes = 8192;
int layer_norm_staged_per_thread(c10::ScalarType dtype, int64_t n);
// Mean and variance of a staged 16-bit row from one pass of shifted sums (TILEOPS_LN_ONE_PASS=1;
// float32 keeps the exact two passes).
bool layer_norm_one_pass(c10::ScalarType dtype);
bool layer_norm_staged(c10::ScalarType dtype, int64_t n, int max_vec, int cc_major);
}  // namespace tileops::nvrtc
