"""FusedMoEExpertsNopadPersistent3WGFwdOp and FusedMoeFwdOp (manifests/moe.yaml) on CPU against a
per-token float64 MoE written here, and against the four stages they fuse."""
import pytest
import torch

import tileops

tileops.load()
ops = torch.ops.tileops
TOL = {torch.float16: 2e-2, torch.bfloat16: 6e-2}


def silu(x):
    return x / (1 + torch.exp(-x))


def layer(tokens, experts, hidden, ffn, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(tokens, hidden, generator=g).to(dtype)
    w_gate_up = (torch.randn(experts, 2 * ffn, hidden, generator=g) / 4).to(dtype)
    w_down = (torch.randn(experts, hidden, ffn, generator=g) / 4).to(dtype)
    return h, w_gate_up, w_down


def float64_moe(h, w_gate_up, w_down, weights, ids, scale=1.0, local_of=None):
    ffn = w_down.shape[2]
    out = torch.zeros(h.shape, dtype=torch.float64)
    for t in range(h.shape[0]):
        for k in range(ids.shape[1]):
            e = int(ids[t, k]) if local_of is None else local_of[int(ids[t, k])]
            if e < 0:
                continue
            gu = w_gate_up[e].double() @ h[t].double()
            out[t] += float(weights[t, k]) * (w_down[e].double() @ (silu(gu[:ffn]) * gu[ffn:]))
    return out * scale


def empty(dtype):
    return torch.empty(0, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fused_experts_write_the_routed_layer_into_output(dtype):
    tokens, top_k, experts, hidden, ffn = 9, 3, 6, 16, 8
    h, w_gate_up, w_down = layer(tokens, experts, hidden, ffn, dtype, seed=0)
    ids = torch.stack([torch.randperm(experts)[:top_k] for _ in range(tokens)]).to(torch.int32)
    w = torch.rand(tokens, top_k)
    out = torch.full_like(h, float("nan"))
    ret = ops.moe_fused_mo_e_experts_nopad_persistent3_wg_fwd_writes_output(out, h, w_gate_up, w_down, w, ids, empty(dtype),
                                                              empty(dtype), None, experts, 2.0)
    assert ret is None
    torch.testing.assert_close(out.double(), float64_moe(h, w_gate_up, w_down, w, ids, 2.0),
                               rtol=TOL[dtype], atol=TOL[dtype])


def test_fused_experts_equal_the_four_stages_bit_for_bit():
    tokens, top_k, experts, hidden, ffn = 12, 2, 4, 16, 8
    h, w_gate_up, w_down = layer(tokens, experts, hidden, ffn, torch.bfloat16, seed=1)
    ids = torch.stack([torch.randperm(experts)[:top_k] for _ in range(tokens)]).to(torch.int32)
    w = torch.rand(tokens, top_k)
    out = torch.empty_like(h)
    ops.moe_fused_mo_e_experts_nopad_persistent3_wg_fwd_writes_output(out, h, w_gate_up, w_down, w, ids, empty(torch.bfloat16),
                                                        empty(torch.bfloat16), None, experts)
    perm, offsets, sizes, _, fwd = ops.moe_permute_nopad_fwd(h, ids, None, experts, experts)
    act = ops.moe_gate_up_fwd(perm, w_gate_up, sizes, offsets)
    staged = ops.moe_unpermute_fwd(ops.moe_grouped_gemm_nopad_fwd(act, w_down, sizes, offsets), fwd, w)
    # the same roundings; only the float32 order of the sum over a token's routes may differ
    torch.testing.assert_close(out, staged, rtol=8e-3, atol=1e-3)


def test_fused_experts_with_an_expert_map_sum_local_experts_only():
    tokens, top_k, experts, hidden, ffn = 8, 2, 6, 16, 8
    expert_map = torch.tensor([-1, 0, -1, 2, 1, -1], dtype=torch.int32)
    h, w_gate_up, w_down = layer(tokens, 3, hidden, ffn, torch.float16, seed=2)
    ids = torch.stack([torch.randperm(experts)[:top_k] for _ in range(tokens)]).to(torch.int32)
    w = torch.rand(tokens, top_k)
    out = torch.empty_like(h)
    ops.moe_fused_mo_e_experts_nopad_persistent3_wg_fwd_writes_output(out, h, w_gate_up, w_down, w, ids, empty(torch.float16),
                                                        empty(torch.float16), expert_map, experts)
    want = float64_moe(h, w_gate_up, w_down, w, ids, local_of=expert_map.tolist())
    torch.testing.assert_close(out.double(), want, rtol=2e-2, atol=2e-2)


def test_fused_experts_refuse_scratch_ids_out_of_range_and_a_missing_map():
    h, w_gate_up, w_down = layer(2, 3, 8, 4, torch.float16, seed=3)
    ids, w, out = torch.tensor([[0, 1], [2, 0]], dtype=torch.int32), torch.rand(2, 2), torch.empty(2, 8, dtype=torch.float16)
    name = "moe_fused_mo_e_experts_nopad_persistent3_wg_fwd_writes_output"
    with pytest.raises(ValueError, match=name + r": .*ws1 == 0"):
        ops.moe_fused_mo_e_experts_nopad_persistent3_wg_fwd_writes_output(out, h, w_gate_up, w_down, w, ids,
                                                            torch.empty(4, dtype=torch.float16), empty(torch.float16), None, 3)
    with pytest.raises(ValueError, match=name + r": 'topk_ids' must lie in \[0, num_experts = 3\)"):
        ops.moe_fused_mo_e_experts_nopad_persistent3_wg_fwd_writes_output(out, h, w_gate_up, w_down, w, ids + 1,
                                                            empty(torch.float16), empty(torch.float16), None, 3)
    with pytest.raises(ValueError, match=name + r": without 'expert_map', num_experts_local must equal"):
        ops.moe_fused_mo_e_experts_nopad_persistent3_wg_fwd_writes_output(out, h, w_gate_up, w_down, w, ids,
                                                            empty(torch.float16), empty(torch.float16), None, 4)


def float64_route(logits, top_k, scoring, renormalize, bias=None):
    """Scores, then the top_k experts one pass at a time (strictly greatest, lower index on ties)."""
    scores = logits.double().softmax(-1) if scoring == "softmax" else torch.sigmoid(logits.double())
    choose = scores + bias.double() if bias is not None else scores.clone()
    ids = torch.zeros(logits.shape[0], top_k, dtype=torch.long)
    for t in range(logits.shape[0]):
        left = choose[t].clone()
        for k in range(top_k):
            best = max(range(left.numel()), key=lambda e: (left[e].item(), -e))
            ids[t, k] = best
            left[best] = float("-inf")
    w = scores.gather(-1, ids)
    return (w / w.sum(-1, keepdim=True) if renormalize else w), ids


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("scoring,renormalize,biased,scale", [("softmax", False, False, 1.0), ("softmax", True, False, 1.0),
                                                              ("sigmoid", True, True, 2.827), ("sigmoid", False, False, 2.5)])
def test_fused_moe_routes_and_runs_the_experts(dtype, scoring, renormalize, biased, scale):
    tokens, experts, top_k, hidden, ffn = 10, 8, 3, 16, 8
    h, w_gate_up, w_down = layer(tokens, experts, hidden, ffn, dtype, seed=4)
    logits = torch.randn(tokens, experts, generator=torch.Generator().manual_seed(5))
    bias = torch.randn(experts) if biased else None
    out = ops.moe_fused_moe_fwd(h, logits, w_gate_up, w_down, bias, top_k, scoring, renormalize, scale)
    w, ids = float64_route(logits, top_k, scoring, renormalize, bias)
    torch.testing.assert_close(out.double(), float64_moe(h, w_gate_up, w_down, w, ids, scale),
                               rtol=TOL[dtype], atol=TOL[dtype])


def test_fused_moe_breaks_ties_to_the_lower_expert():
    # experts 1, 2 and 3 tie: the top 2 are 1 and 2; a route to 3 instead would change the output
    h, w_gate_up, w_down = layer(1, 4, 8, 4, torch.float16, seed=6)
    logits = torch.tensor([[0.0, 1.0, 1.0, 1.0]])
    out = ops.moe_fused_moe_fwd(h, logits, w_gate_up, w_down, None, 2)
    p = logits.double().softmax(-1)
    want = float64_moe(h, w_gate_up, w_down, p[:, [1, 2]], torch.tensor([[1, 2]]))
    torch.testing.assert_close(out.double(), want, rtol=2e-2, atol=2e-2)


def test_fused_moe_refuses_a_bias_with_softmax_and_top_k_above_the_experts():
    h, w_gate_up, w_down = layer(2, 4, 8, 4, torch.float16, seed=7)
    logits = torch.randn(2, 4)
    with pytest.raises(ValueError, match=r"moe_fused_moe_fwd: 'correction_bias' needs scoring_func='sigmoid'"):
        ops.moe_fused_moe_fwd(h, logits, w_gate_up, w_down, torch.zeros(4), 2)
    with pytest.raises(ValueError, match=r"moe_fused_moe_fwd: .*top_k <= E"):
        ops.moe_fused_moe_fwd(h, logits, w_gate_up, w_down, None, 5)
    with pytest.raises(ValueError, match=r"moe_fused_moe_fwd: .*scoring_func"):
        ops.moe_fused_moe_fwd(h, logits, w_gate_up, w_down, None, 2, "relu")
