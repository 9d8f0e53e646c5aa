// MoE's routing and runs as the reference target reads them on the host, and the gated activation:
// the reference target's kernels use them, and so do the cublaslt target's.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "targets/reference/gemm.h"
#include "tileops/op_call.h"

namespace tileops::reference {

// Each routed expert's run of rows [first, first + rows) (group: the expert) in row order, checked to
// lie inside a's `rows` rows and not to overlap another (size 0: no run); a host read, refused by name
// during CUDA graph capture.
std::vector<GroupRun> expert_runs(const char* op, const at::Tensor& sizes, const at::Tensor& offsets, int64_t rows);

// The routed experts' routes: each route f = t * top_k + k's local expert (-1: another rank's) and
// the routes' weights [T, top_k].
struct ExpertRouting {
  std::vector<int64_t> local;
  at::Tensor weights;
};
// FusedMoEExpertsNopadPersistent3WGFwdOp's: topk_ids through expert_map, checked; topk_weights.
ExpertRouting fused_experts_routing(const OpCall& call);
// FusedMoeFwdOp's: softmax or sigmoid scores (+ correction_bias to choose), the top_k by a stable
// descending sort, the chosen scores as weights (renormalized when asked).
ExpertRouting fused_moe_routing(const OpCall& call);
// The routes f of each expert in ascending order, from each route's expert (negative: none here).
std::vector<std::vector<int64_t>> routes_by_expert(const std::vector<int64_t>& expert_of, int64_t experts);

// act(gate) * up of float32 [rows, 2 * ffn], gate first: SiLU (silu_and_mul) or the erf GELU.
at::Tensor gated(const at::Tensor& both, std::string_view activation);

}  // namespace tileops::reference
