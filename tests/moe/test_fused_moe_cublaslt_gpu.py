"""FusedMoEExpertsNopadPersistent3WGFwdOp and FusedMoeFwdOp on the cublaslt target (pending: the
reference's routing, then gate-up and down as one cuBLASLt GEMM an expert's run each), on a CUDA GPU:
against the float64 layer of tests/moe/test_fused_moe.py, with an expert map, every scoring mode, and
against the reference target on a DeepSeek-shaped decode step."""
import pytest
import torch

import tileops
from moe.test_fused_moe import TOL, float64_moe, float64_route, layer

pytestmark = [pytest.mark.gpu, pytest.mark.unverified_gpu]
tileops.load()
ops = torch.ops.tileops


def experts_call(out, h, w_gate_up, w_down, w, ids, expert_map, experts, scale=1.0, target="cublaslt"):
    none = torch.empty(0, dtype=h.dtype, device=h.device)
    ops.moe_fused_mo_e_experts_nopad_persistent3_wg_fwd_writes_output(out, h, w_gate_up, w_down, w, ids, none, none,
                                                                      expert_map, experts, scale, target=target)
    return out


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mapped", [False, True])
def test_fused_experts_match_the_float64_layer(dtype, mapped):
    tokens, top_k, experts, hidden, ffn = 33, 3, 6, 64, 40
    expert_map = torch.tensor([-1, 0, -1, 2, 1, -1], dtype=torch.int32) if mapped else None
    h, w_gate_up, w_down = layer(tokens, 3 if mapped else experts, hidden, ffn, dtype, seed=8)
    g = torch.Generator().manual_seed(9)
    ids = torch.stack([torch.randperm(experts, generator=g)[:top_k] for _ in range(tokens)]).to(torch.int32)
    w = torch.rand(tokens, top_k, generator=g)
    out = experts_call(torch.empty_like(h).cuda(), h.cuda(), w_gate_up.cuda(), w_down.cuda(), w.cuda(), ids.cuda(),
                       None if expert_map is None else expert_map.cuda(), experts, 1.5)
    want = float64_moe(h, w_gate_up, w_down, w, ids, 1.5, None if expert_map is None else expert_map.tolist())
    torch.testing.assert_close(out.cpu().double(), want, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("scoring,renormalize,biased", [("softmax", False, False), ("sigmoid", True, True)])
def test_fused_moe_routes_and_runs_the_experts(scoring, renormalize, biased):
    tokens, experts, top_k, hidden, ffn = 21, 8, 3, 64, 24
    h, w_gate_up, w_down = layer(tokens, experts, hidden, ffn, torch.bfloat16, seed=10)
    logits = torch.randn(tokens, experts, generator=torch.Generator().manual_seed(11))
    bias = torch.randn(experts) if biased else None
    out = ops.moe_fused_moe_fwd(h.cuda(), logits.cuda(), w_gate_up.cuda(), w_down.cuda(),
                                None if bias is None else bias.cuda(), top_k, scoring, renormalize, 2.0,
                                target="cublaslt")
    w, ids = float64_route(logits, top_k, scoring, renormalize, bias)
    torch.testing.assert_close(out.cpu().double(), float64_moe(h, w_gate_up, w_down, w, ids, 2.0),
                               rtol=TOL[torch.bfloat16], atol=TOL[torch.bfloat16])


def test_cublaslt_and_the_reference_agree_on_a_decode_step():
    # 64 tokens, top 8 of 64 experts, 2048 hidden, 512 ffn (a DeepSeek-V3 layer, fewer experts)
    tokens, experts, top_k, hidden, ffn = 64, 64, 8, 2048, 512
    g = torch.Generator().manual_seed(12)
    h = torch.randn(tokens, hidden, generator=g).bfloat16().cuda()
    logits = torch.randn(tokens, experts, generator=g).cuda()
    w_gate_up = (torch.randn(experts, 2 * ffn, hidden, generator=g) / 45).bfloat16().cuda()
    w_down = (torch.randn(experts, hidden, ffn, generator=g) / 22).bfloat16().cuda()
    args = (h, logits, w_gate_up, w_down, None, top_k, "softmax", True, 2.5)
    got = ops.moe_fused_moe_fwd(*args, target="cublaslt").float()
    ref = ops.moe_fused_moe_fwd(*args, target="reference").float()
    # the same roundings; cuBLASLt's float32 sums may round an activation or a down product differently
    torch.testing.assert_close(got, ref, rtol=2e-2, atol=2e-2 * ref.abs().max().item())
