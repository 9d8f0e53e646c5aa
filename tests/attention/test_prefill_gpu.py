"""MultiHeadAttentionFwdOp and GroupedQueryAttentionFwdOp on the nvrtc target (pending: the reference
serves CUDA by default), on a CUDA GPU: against a float64 softmax(q k^T / sqrt(D)) v written here, at
sequence lengths around the 64-row tiles (1, 63, 64, 65, 127, 128, 129, a prime), head dims 64 and
128, GQA ratios 1, 4 and 8, causal or not, both 16-bit dtypes; head dims the kernel does not take go
to the reference."""
import math

import pytest
import torch

import tileops

pytestmark = [pytest.mark.gpu, pytest.mark.unverified_gpu]
tileops.load()
ops = torch.ops.tileops


def float64_attention(q, k, v, causal):
    # q [B, S, H, D], k and v [B, S, H_kv, D]
    b, s, h, d = q.shape
    rep = h // k.shape[2]
    qd, kd, vd = (t.double().transpose(1, 2) for t in (q, k, v))
    kd, vd = kd.repeat_interleave(rep, 1), vd.repeat_interleave(rep, 1)
    scores = qd @ kd.transpose(-1, -2) / math.sqrt(d)
    if causal:
        scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    p = scores.softmax(-1)
    return (p @ vd).transpose(1, 2), (p @ vd.abs()).transpose(1, 2)


def inputs(b, s, h, h_kv, d, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, s, n, d, generator=g).to(dtype) for n in (h, h_kv, h_kv)]


def check(o, q, k, v, causal, dtype):
    want, mag = float64_attention(q, k, v, causal)
    # P rounded to the dtype (FlashAttention's choice) and one rounding of o: a few ulps of the
    # magnitude the weighted sum carries
    ulp = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}[dtype]
    assert ((o.double() - want).abs() <= 4 * ulp * mag + 1e-5).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("s", [1, 63, 64, 65, 127, 128, 129, 211])
def test_mha_matches_float64(dtype, causal, d, s):
    q, k, v = inputs(2, s, 3, 3, d, dtype, seed=s + d)
    o = ops.attention_multi_head_attention_fwd(q.cuda(), k.cuda(), v.cuda(), is_causal=causal, target="nvrtc")
    check(o.cpu(), q, k, v, causal, dtype)


@pytest.mark.parametrize("ratio", [1, 4, 8])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("s", [65, 200])
def test_gqa_matches_float64(ratio, causal, s):
    q, k, v = inputs(2, s, 8, 8 // ratio, 128, torch.bfloat16, seed=ratio * 7 + s)
    o = ops.attention_grouped_query_attention_fwd(q.cuda(), k.cuda(), v.cuda(), is_causal=causal, target="nvrtc")
    check(o.cpu(), q, k, v, causal, torch.bfloat16)


def test_llama_sized_gqa_agrees_with_the_reference():
    q, k, v = (t.cuda() for t in inputs(1, 2048, 32, 8, 128, torch.bfloat16, seed=1))
    got = ops.attention_grouped_query_attention_fwd(q, k, v, is_causal=True, target="nvrtc").float()
    ref = ops.attention_grouped_query_attention_fwd(q, k, v, is_causal=True, target="reference").float()
    assert ((got - ref).abs() <= 2.0 ** -6 * ref.abs() + 2e-3).all()


def test_other_head_dims_go_to_the_reference():
    q, k, v = (t.cuda() for t in inputs(1, 70, 2, 2, 96, torch.bfloat16, seed=2))
    got = ops.attention_multi_head_attention_fwd(q, k, v, target="nvrtc")
    assert torch.equal(got, ops.attention_multi_head_attention_fwd(q, k, v, target="reference"))
