// MoeGroupedGemmNopadFwdOp's and MoeGateUpFwdOp's expert runs of rows, read on the host from
// true_sizes and true_offsets, and the gated activation: the reference target's kernels use them, and
// so do the cublaslt target's.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "targets/reference/gemm_grouped.h"

namespace tileops::reference {

// Each routed expert's run of rows [first, first + rows) (group: the expert) in row order, checked to
// lie inside a's `rows` rows and not to overlap another (size 0: no run); a host read, refused by name
// during CUDA graph capture.
std::vector<GroupRun> expert_runs(const char* op, const at::Tensor& sizes, const at::Tensor& offsets, int64_t rows);

// act(gate) * up of float32 [rows, 2 * ffn], gate first: SiLU (silu_and_mul) or the erf GELU.
at::Tensor gated(const at::Tensor& both, std::string_view activation);

}  // namespace tileops::reference
