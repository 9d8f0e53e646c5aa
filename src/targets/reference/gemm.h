// The GEMM family through ATen in float32: the reference target's kernels, and what the cublaslt and
// nvrtc targets run for the shapes and modes their own kernels do not take.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "tileops/op_call.h"

namespace tileops::reference {

// GemmFp8FwdOp through ATen in float32: the reference target's kernel, and what the cublaslt target
// runs for the scale modes and shapes cuBLASLt's FP8 path does not take.
void gemm_fp8_fwd_aten(const OpCall& call);

// GroupedGemmFwdOp's runs of rows, read on the host from batch_sizes and batch_offsets: the reference
// target's kernel loops over them, and so does the cublaslt target's.
struct GroupRun {
  int64_t group, first, rows;
};

// The groups' runs of rows [first, first + rows) in row order (size 0: no run, whatever the offset),
// each checked to be non-negative and inside a's `total` rows, no two sharing a row; refused by name
// while a CUDA graph is being captured (a host read).
std::vector<GroupRun> group_runs(const char* op, const at::Tensor& sizes, const at::Tensor& offsets, int64_t total);

// GemmW4A16FwdOp through ATen in float32: the reference target's kernel, and what the nvrtc target
// runs for the shapes its decode kernel does not take (more than 64 rows, K or group not multiples of 32).
void gemm_w4a16_fwd_aten(const OpCall& call);
// The op's 16-bit weight [N, K], (q - zero) * scale with the scale rounded to the activation's dtype
// first and the product rounded to it once: what the tensor cores read in every implementation.
at::Tensor w4a16_dequantized_weight(const OpCall& call);

}  // namespace tileops::reference
