// Mixture-of-experts stages on the reference target: routing tables computed on the host from the
// expert ids (read back once: each value is checked before anything is written), row gathers and
// per-expert GEMMs in ATen with float32 sums. Inside an expert, routes keep ascending flat index,
// so every output is deterministic. The oracle for kernels to come, and what serves CUDA meanwhile.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/erf.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "targets/builtin.h"
#include "targets/reference/moe.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace align = tileops::ops::moe_permute_align_fwd;
namespace nopad = tileops::ops::moe_permute_nopad_fwd;
namespace unpermute = tileops::ops::moe_unpermute_fwd;
namespace grouped = tileops::ops::moe_grouped_gemm_nopad_fwd;
namespace gate_up = tileops::ops::moe_gate_up_fwd;
namespace experts_op = tileops::ops::moe_fused_mo_e_experts_nopad_persistent3_wg_fwd;
namespace fused = tileops::ops::moe_fused_moe_fwd;

// The flattened expert ids, each checked to lie in [0, experts).
std::vector<int64_t> expert_ids_of(const char* op, const at::Tensor& topk_ids, int64_t experts) {
  std::vector<int64_t> ids = host_values(op, "topk_ids", topk_ids);
  for (size_t f = 0; f < ids.size(); ++f)
    TORCH_CHECK_VALUE(ids[f] >= 0 && ids[f] < experts, op, ": 'topk_ids' must lie in [0, num_experts = ", experts,
                      "), got ", ids[f], " at flat index ", f);
  return ids;
}

// values (int64 on the host) into `out`, whatever its dtype and device.
void write(at::Tensor out, const std::vector<int64_t>& values) {
  out.copy_(at::from_blob(const_cast<int64_t*>(values.data()), {static_cast<int64_t>(values.size())},
                          at::TensorOptions().dtype(at::kLong))
                .view(out.sizes()));
}

class PermuteAlignReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const align::View v(call);
    const int64_t experts = v.num_experts(), block = v.block_size();
    const std::vector<int64_t> ids = expert_ids_of(call.op_name, v.topk_ids(), experts);
    const int64_t routes = static_cast<int64_t>(ids.size());
    const auto per_expert = routes_by_expert(ids, experts);
    std::vector<int64_t> sorted(v.sorted_token_ids().numel(), routes), blocks(v.expert_ids().numel(), -1);
    int64_t used = 0;
    for (int64_t e = 0; e < experts; ++e) {
      const auto& mine = per_expert[e];
      for (size_t i = 0; i < mine.size(); ++i) sorted[used + i] = mine[i];
      const int64_t padded = (static_cast<int64_t>(mine.size()) + block - 1) / block * block;
      for (int64_t b = used / block; b < (used + padded) / block; ++b) blocks[b] = e;
      used += padded;
    }
    write(v.sorted_token_ids(), sorted);
    write(v.expert_ids(), blocks);
    write(v.num_tokens_post_pad(), {used});
  }
};

// Each route's local expert (-1: another rank's) through expert_map, checked to hold each local id
// once, or, without a map, its expert (then local must equal experts); topk_ids checked in range.
std::vector<int64_t> local_routes(const char* op, const at::Tensor& topk_ids, const at::Tensor* map, int64_t experts,
                                  int64_t local) {
  std::vector<int64_t> route = expert_ids_of(op, topk_ids, experts);
  if (!map) {
    TORCH_CHECK_VALUE(local == experts, op, ": without 'expert_map', num_experts_local must equal num_experts, got ",
                      local, " and ", experts);
    return route;
  }
  const std::vector<int64_t> to_local = host_values(op, "expert_map", *map);
  std::vector<int> seen(local, 0);
  for (int64_t e = 0; e < experts; ++e) {
    TORCH_CHECK_VALUE(to_local[e] < local, op, ": 'expert_map' entries must be below num_experts_local = ", local,
                      " (negative: another rank's), got ", to_local[e], " for expert ", e);
    if (to_local[e] >= 0) ++seen[to_local[e]];
  }
  for (int64_t l = 0; l < local; ++l)
    TORCH_CHECK_VALUE(seen[l] == 1, op, ": 'expert_map' must hold each local expert id exactly once, local id ", l,
                      " appears ", seen[l], " times");
  for (int64_t& e : route) e = to_local[e];
  return route;
}

class PermuteNopadReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const nopad::View v(call);
    const int64_t experts = v.num_experts(), local = v.num_experts_local();
    const std::vector<int64_t> route = local_routes(call.op_name, v.topk_ids(), v.expert_map(), experts, local);
    const int64_t routes = static_cast<int64_t>(route.size()), top_k = v.topk_ids().size(1);
    const auto per_expert = routes_by_expert(route, local);
    std::vector<int64_t> fwd(routes, -1), source(routes, 0), offsets(local + 1, 0), sizes(local);
    for (int64_t e = 0; e < local; ++e) {
      sizes[e] = static_cast<int64_t>(per_expert[e].size());
      for (int64_t i = 0; i < sizes[e]; ++i) {
        fwd[per_expert[e][i]] = offsets[e] + i;
        source[offsets[e] + i] = per_expert[e][i] / top_k;
      }
      offsets[e + 1] = offsets[e] + sizes[e];
    }
    const at::Tensor rows = at::from_blob(source.data(), {routes}, at::TensorOptions().dtype(at::kLong))
                                .to(v.hidden_states().device());
    at::Tensor perm = v.perm_h();
    if (routes > 0) perm.copy_(v.hidden_states().index_select(0, rows));
    write(v.fwd_idx(), fwd);
    write(v.true_sizes(), sizes);
    write(v.expert_first_token_offset(), offsets);
    offsets.pop_back();
    write(v.true_offsets(), offsets);
  }
};

class UnpermuteReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const unpermute::View v(call);
    const int64_t rows = v.mm2_pad().size(0);
    const std::vector<int64_t> idx = host_values(call.op_name, "fwd_idx", v.fwd_idx());
    for (size_t f = 0; f < idx.size(); ++f)
      TORCH_CHECK_VALUE(idx[f] >= -1 && idx[f] < rows, call.op_name, ": 'fwd_idx' must lie in [-1, ", rows,
                        ") (rows of mm2_pad; -1: another rank's expert), got ", idx[f], " at ", f);
    const at::Tensor fwd = v.fwd_idx().to(at::kLong);
    const at::Tensor routed = fwd >= 0;
    const int64_t tokens = v.topk_weights().size(0), top_k = v.topk_weights().size(1);
    // [T, K, hidden] float32 of each route's row (row 0 for an unrouted one, weighted by zero).
    const at::Tensor picked = v.mm2_pad().index_select(0, fwd.clamp_min(0)).to(at::kFloat).view({tokens, top_k, -1});
    at::Tensor sum = (picked * v.topk_weights().unsqueeze(-1)).masked_fill(routed.view({tokens, top_k, 1}).logical_not(), 0.0).sum(1);
    if (v.routed_scaling_factor() != 1.0) sum.mul_(v.routed_scaling_factor());
    at::Tensor out = v.output();
    out.copy_(sum);
  }
};

// a [numel, k] per expert run times b[e]^T in float32 -> [numel, n] float32, zeros where no run is.
at::Tensor grouped_products(const char* op, const at::Tensor& a, const at::Tensor& b, const at::Tensor& sizes,
                            const at::Tensor& offsets) {
  at::Tensor out = at::zeros({a.size(0), b.size(1)}, a.options().dtype(at::kFloat));
  for (const GroupRun& r : expert_runs(op, sizes, offsets, a.size(0)))
    out.narrow(0, r.first, r.rows)
        .copy_(at::matmul(a.narrow(0, r.first, r.rows).to(at::kFloat), b[r.group].to(at::kFloat).t()));
  return out;
}

class GroupedGemmReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const grouped::View v(call);
    at::Tensor c = v.c();
    c.copy_(grouped_products(call.op_name, v.a(), v.b(), v.true_sizes(), v.true_offsets()));
  }
};

class GateUpReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gate_up::View v(call);
    const at::Tensor both = grouped_products(call.op_name, v.a(), v.b(), v.true_sizes(), v.true_offsets());
    at::Tensor c = v.c();
    c.copy_(gated(both, v.activation()));
  }
};

// The routed experts of each route f (local expert local[f], -1: none) applied to hidden_states with
// the stages' rounding chain: act(gate) * up and the down product each rounded to the dtype, the
// float32 sum of weight times that over the routes, times scale, one rounding into out.
void routed_experts(const at::Tensor& hidden, const at::Tensor& w_gate_up, const at::Tensor& w_down,
                    const at::Tensor& weights, const std::vector<int64_t>& local, double scale,
                    std::string_view activation, at::Tensor out) {
  const int64_t top_k = weights.size(1);
  const at::ScalarType dtype = hidden.scalar_type();
  const at::Tensor flat_w = weights.to(at::kFloat).reshape({-1});
  std::vector<std::vector<int64_t>> routes = routes_by_expert(local, w_gate_up.size(0));
  at::Tensor acc = at::zeros({hidden.size(0), hidden.size(1)}, hidden.options().dtype(at::kFloat));
  for (size_t e = 0; e < routes.size(); ++e) {
    if (routes[e].empty()) continue;
    const at::Tensor f = at::from_blob(routes[e].data(), {static_cast<int64_t>(routes[e].size())},
                                       at::TensorOptions().dtype(at::kLong)).to(hidden.device());
    const at::Tensor token = f.div(top_k, "floor");
    const at::Tensor x = hidden.index_select(0, token).to(at::kFloat);
    const at::Tensor act = gated(at::matmul(x, w_gate_up[e].to(at::kFloat).t()), activation).to(dtype);
    const at::Tensor down = at::matmul(act.to(at::kFloat), w_down[e].to(at::kFloat).t()).to(dtype);
    acc.index_add_(0, token, down.to(at::kFloat) * flat_w.index_select(0, f).unsqueeze(1));
  }
  if (scale != 1.0) acc.mul_(scale);
  out.copy_(acc);
}

class FusedExpertsReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const experts_op::View v(call);
    const ExpertRouting r = fused_experts_routing(call);
    routed_experts(v.hidden_states(), v.w_gate_up(), v.w_down(), r.weights, r.local, v.routed_scaling_factor(),
                   v.activation(), v.output());
  }
};

class FusedMoeReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const fused::View v(call);
    const ExpertRouting r = fused_moe_routing(call);
    routed_experts(v.hidden_states(), v.w_gate_up(), v.w_down(), r.weights, r.local, v.routed_scaling_factor(),
                   v.activation(), v.output());
  }
};

KernelBuilder permute_align_builder() { return stateless_builder<PermuteAlignReference>("moe_permute_align (host)"); }
KernelBuilder permute_nopad_builder() { return stateless_builder<PermuteNopadReference>("moe_permute_nopad (ATen)"); }
KernelBuilder unpermute_builder() { return stateless_builder<UnpermuteReference>("moe_unpermute (ATen)"); }
KernelBuilder grouped_gemm_builder() { return stateless_builder<GroupedGemmReference>("moe_grouped_gemm (ATen)"); }
KernelBuilder gate_up_builder() { return stateless_builder<GateUpReference>("moe_gate_up (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, MoePermuteAlignFwdOp, permute_align_builder);
TILEOPS_BUILTIN_KERNEL(reference, MoePermuteNopadFwdOp, permute_nopad_builder);
TILEOPS_BUILTIN_KERNEL(reference, MoeUnpermuteFwdOp, unpermute_builder);
TILEOPS_BUILTIN_KERNEL(reference, MoeGroupedGemmNopadFwdOp, grouped_gemm_builder);
TILEOPS_BUILTIN_KERNEL(reference, MoeGateUpFwdOp, gate_up_builder);
KernelBuilder fused_experts_builder() { return stateless_builder<FusedExpertsReference>("fused_moe_experts (ATen)"); }
KernelBuilder fused_moe_builder() { return stateless_builder<FusedMoeReference>("fused_moe (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, FusedMoEExpertsNopadPersistent3WGFwdOp, fused_experts_builder);
TILEOPS_BUILTIN_KERNEL(reference, FusedMoeFwdOp, fused_moe_builder);

}  // namespace

std::vector<GroupRun> expert_runs(const char* op, const at::Tensor& sizes, const at::Tensor& offsets, int64_t rows) {
  const std::vector<int64_t> size = host_values(op, "true_sizes", sizes), off = host_values(op, "true_offsets", offsets);
  std::vector<GroupRun> runs;
  std::vector<char> taken(rows, 0);
  for (size_t e = 0; e < size.size(); ++e) {
    TORCH_CHECK_VALUE(size[e] >= 0, op, ": 'true_sizes' must be non-negative, got ", size[e], " for expert ", e);
    if (size[e] == 0) continue;
    TORCH_CHECK_VALUE(off[e] >= 0 && off[e] + size[e] <= rows, op, ": expert ", e, "'s rows [", off[e], ", ",
                      off[e] + size[e], ") ('true_offsets', 'true_sizes') must lie inside a's ", rows, " rows");
    for (int64_t r = off[e]; r < off[e] + size[e]; ++r) {
      TORCH_CHECK_VALUE(!taken[r], op, ": expert runs must not overlap; row ", r, " is in two ('true_offsets', 'true_sizes')");
      taken[r] = 1;
    }
    runs.push_back({static_cast<int64_t>(e), off[e], size[e]});
  }
  std::sort(runs.begin(), runs.end(), [](const GroupRun& x, const GroupRun& y) { return x.first < y.first; });
  return runs;
}

ExpertRouting fused_experts_routing(const OpCall& call) {
  const experts_op::View v(call);
  const int64_t experts = v.num_experts(), local = v.w_gate_up().size(0);
  return {local_routes(call.op_name, v.topk_ids(), v.expert_map(), experts, local), v.topk_weights()};
}

ExpertRouting fused_moe_routing(const OpCall& call) {
  const fused::View v(call);
  const bool sigmoid = v.scoring_func() == "sigmoid";
  TORCH_CHECK_VALUE(!v.correction_bias() || sigmoid, call.op_name,
                    ": 'correction_bias' needs scoring_func='sigmoid' (it biases sigmoid scores), got '",
                    v.scoring_func(), "'");
  const at::Tensor logits = v.gating_output().to(at::kFloat);
  const at::Tensor scores = sigmoid ? at::sigmoid(logits) : at::softmax(logits, -1);
  at::Tensor choose = v.correction_bias() ? scores + v.correction_bias()->to(at::kFloat) : scores;
  choose = at::where(choose.isnan(), -INFINITY, choose);  // a NaN score is never picked
  // stable, descending: equal scores keep the lower expert first
  const at::Tensor ids = std::get<1>(at::sort(choose, true, -1, true)).narrow(-1, 0, v.top_k()).contiguous();
  at::Tensor w = scores.gather(-1, ids);
  if (v.renormalize()) w = w / w.sum(-1, true);
  return {host_values(call.op_name, "the routes (top-k expert ids)", ids), w};
}

std::vector<std::vector<int64_t>> routes_by_expert(const std::vector<int64_t>& expert_of, int64_t experts) {
  std::vector<std::vector<int64_t>> routes(experts);
  for (size_t f = 0; f < expert_of.size(); ++f)
    if (expert_of[f] >= 0) routes[expert_of[f]].push_back(static_cast<int64_t>(f));
  return routes;
}

at::Tensor gated(const at::Tensor& both, std::string_view activation) {
  const int64_t ffn = both.size(1) / 2;
  const at::Tensor gate = both.narrow(1, 0, ffn), up = both.narrow(1, ffn, ffn);
  const at::Tensor act = activation == "silu_and_mul" ? gate * at::sigmoid(gate) : gate * 0.5 * (1 + at::erf(gate * M_SQRT1_2));
  return act * up;
}

}  // namespace tileops::reference
