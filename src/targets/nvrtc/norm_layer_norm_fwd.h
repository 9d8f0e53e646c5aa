// LayerNormFwdOp on the nvrtc target (planning shared with RMSNorm).
#pragma once

#include <string>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/norm_rms_norm_fwd.h"

namespace tileops::nvrtc {
jit::KernelSource layer_norm_source(const RmsNormPlan& p, bool has_bias, const std::string& arch);
// Rows of 8 KB and more (TILEOPS_STAGED_MIN_ROW_BYTES overrides) take the staged kernel where
// staged_row_applies (sm_90+, 16-byte accesses, up to 64 KB): 8 vectors a thread below 16 KB rows,
// 4 from 16 KB. H200 sweeps (docs/PERF.md), bf16, one CTA a row: 8 a thread 10.4 / 23.9 / 73.5 us
// for 2048x4096 / 2048x8192 / 4096x16384, 4 a thread 10.6 / 20.9 / 71.5.
constexpr int kLayerNormStagedMinRowBytes = 8192;
int layer_norm_staged_per_thread(c10::ScalarType dtype, int64_t n);
// Mean and variance of a staged bfloat16 row of up to 16384 elements from one pass of sums shifted
// by the row's first element (TILEOPS_LN_ONE_PASS=0 turns it off). When that element is far from the
// mean, E[d^2] - E[d]^2 loses about log2(n) bits: half a bfloat16 ulp of variance at n = 32768 by an
// emulation of the kernel's sums (review), more than float16's tolerance there; so float16, float32
// and longer rows keep two exact passes. H200 sweeps (docs/PERF.md), bf16: 2048x4096 10.0 / 10.1 us
// vs 10.4 / 10.5 for two passes, 4096x16384 69.6 / 69.4 vs 72.0 / 72.4 (weight and bias cached);
// 2048x8192 one pass 20.0 / 20.1 uncached, 22.1 / 22.2 cached, two passes 21.1 / 21.2 cached
// (two passes uncached not measured).
bool layer_norm_one_pass(c10::ScalarType dtype, int64_t n);
// Staged rows read weight and bias in the output pass (TILEOPS_LN_CACHE_AFFINE=1 keeps them in
// registers: up to 32 more a thread, e.g. 83 vs 38 for 16384 at 512 threads, one CTA an SM instead
// of three). H200 sweep, bf16, two runs each: 2048x8192 20.0 / 20.1 us vs 21.9 / 21.9 cached,
// 4096x16384 68.4 / 68.4 vs 68.9 / 68.9, 2048x4096 10.1 / 10.1 vs 10.2 / 10.0.
bool layer_norm_cache_affine();
bool layer_norm_staged(c10::ScalarType dtype, int64_t n, int max_vec, int cc_major);
}  // namespace tileops::nvrtc
