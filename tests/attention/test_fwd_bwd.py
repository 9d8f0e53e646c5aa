"""MultiHeadAttentionFwdOp, GroupedQueryAttentionFwdOp, GroupedQueryAttentionSlidingWindowFwdOp,
MultiHeadAttentionBwdOp and GroupedQueryAttentionBwdOp
(manifests/attention.yaml) on CPU against float64 autograd of the attention formula written here."""
import math

import pytest
import torch

import tileops

tileops.load()
ops = torch.ops.tileops
TOL = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def float64_attention(q, k, v, causal):
    """q [B, S, H, D], k and v [B, S, H_kv, D] in float64: o and the base-2 log-sum-exp [B, H, S]."""
    group = q.shape[2] // k.shape[2]
    qh, kh, vh = q.transpose(1, 2), k.repeat_interleave(group, 2).transpose(1, 2), v.repeat_interleave(group, 2).transpose(1, 2)
    s = qh @ kh.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return (s.softmax(-1) @ vh).transpose(1, 2), s.logsumexp(-1) * math.log2(math.e)


def inputs(b, s, h, h_kv, d, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, s, n, d, generator=g).to(dtype) for n in (h, h_kv, h_kv)]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("s", [1, 17, 64])
def test_mha_fwd_matches_float64(dtype, causal, s):
    q, k, v = inputs(2, s, 3, 3, 32, dtype)
    o = ops.attention_multi_head_attention_fwd(q, k, v, is_causal=causal)
    want, _ = float64_attention(q.double(), k.double(), v.double(), causal)
    torch.testing.assert_close(o.double(), want, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (4, 2), (8, 1)])
def test_bwd_matches_float64_autograd(dtype, causal, heads, kv_heads):
    b, s, d = 2, 19, 16
    q, k, v = inputs(b, s, heads, kv_heads, d, dtype, seed=1)
    q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
    o64, lse = float64_attention(q64, k64, v64, causal)
    dout = torch.randn(b, s, heads, d).to(dtype)
    o64.backward(dout.double())
    o = o64.detach().to(dtype)
    if heads == kv_heads:
        dq, dk, dv = ops.attention_multi_head_attention_bwd(q, k, v, o, dout, lse.detach().float(), is_causal=causal)
    else:
        dq, dk, dv = ops.attention_grouped_query_attention_bwd(q, k, v, o, dout, lse.detach().float(), is_causal=causal)
    assert dk.shape == k.shape and dq.dtype == dtype
    # the rounding of o to 16 bits enters rowsum(dout * o): a gradient's error is of that order
    tol = 4 * TOL[dtype]
    for got, want in ((dq, q64.grad), (dk, k64.grad), (dv, v64.grad)):
        torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol)


def test_bwd_reads_lse_in_base_2():
    # A natural-log lse (off by the factor log2(e)) gives other gradients: the convention is TileOPs'.
    q, k, v = inputs(1, 8, 2, 2, 16, torch.float16, seed=2)
    o64, lse = float64_attention(q.double(), k.double(), v.double(), True)
    dout = torch.randn_like(q)
    args = (q, k, v, o64.to(torch.float16), dout)
    base2 = ops.attention_multi_head_attention_bwd(*args, lse.float())
    natural = ops.attention_multi_head_attention_bwd(*args, (lse / math.log2(math.e)).float())
    assert not torch.allclose(base2[2], natural[2], rtol=0.1, atol=0.1)


def test_gqa_bwd_refuses_heads_that_do_not_group():
    q, k, v = inputs(1, 4, 6, 4, 8, torch.float16)
    with pytest.raises(ValueError, match=r"attention_grouped_query_attention_bwd: .*H % H_kv == 0"):
        ops.attention_grouped_query_attention_bwd(q, k, v, q, q, torch.zeros(1, 6, 4))


def test_bwd_refuses_an_lse_of_another_shape():
    q, k, v = inputs(1, 4, 2, 2, 8, torch.float16)
    with pytest.raises(RuntimeError, match=r"attention_multi_head_attention_bwd: 'lse' must have shape \[B, H, S\]"):
        ops.attention_multi_head_attention_bwd(q, k, v, q, q, torch.zeros(1, 4, 2))


def float64_window_attention(q, k, v, causal, left, right):
    """The sliding-window mask written out per (i, j), float64, [B, S, H, D]."""
    group = q.shape[2] // k.shape[2]
    s_len = q.shape[1]
    keep = torch.zeros(s_len, s_len, dtype=torch.bool)
    for i in range(s_len):
        for j in range(s_len):
            keep[i, j] = (not causal or j <= i) and (left < 0 or j >= i - left) and (right < 0 or j <= i + right)
    qh, kh, vh = q.transpose(1, 2), k.repeat_interleave(group, 2).transpose(1, 2), v.repeat_interleave(group, 2).transpose(1, 2)
    s = (qh @ kh.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(~keep, float("-inf"))
    p = torch.nan_to_num(s.softmax(-1), nan=0.0)  # a row with no key gives zeros
    return (p @ vh).transpose(1, 2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (6, 2), (8, 1)])
def test_gqa_fwd_matches_float64(dtype, causal, heads, kv_heads):
    q, k, v = inputs(2, 13, heads, kv_heads, 32, dtype, seed=3)
    o = ops.attention_grouped_query_attention_fwd(q, k, v, is_causal=causal)
    want, _ = float64_attention(q.double(), k.double(), v.double(), causal)
    assert o.shape == q.shape and o.dtype == dtype
    torch.testing.assert_close(o.double(), want, rtol=TOL[dtype], atol=TOL[dtype])


def test_gqa_fwd_refuses_heads_that_do_not_group():
    q, k, v = inputs(1, 4, 6, 4, 8, torch.float16)
    with pytest.raises(ValueError, match=r"attention_grouped_query_attention_fwd: .*H % H_kv == 0"):
        ops.attention_grouped_query_attention_fwd(q, k, v)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal,left,right", [(True, 3, -1), (True, -1, -1), (False, 2, 1), (False, -1, 0),
                                               (False, 0, 0), (True, 0, 5)])
def test_gqa_sliding_window_matches_float64(dtype, causal, left, right):
    q, k, v = inputs(2, 11, 4, 2, 16, dtype, seed=4)
    o = ops.attention_grouped_query_attention_sliding_window_fwd(
        q, k, v, is_causal=causal, window_size_left=left, window_size_right=right)
    want = float64_window_attention(q.double(), k.double(), v.double(), causal, left, right)
    torch.testing.assert_close(o.double(), want, rtol=TOL[dtype], atol=TOL[dtype])


def test_gqa_sliding_window_without_a_window_is_gqa_fwd():
    q, k, v = inputs(1, 9, 4, 2, 16, torch.float16, seed=5)
    torch.testing.assert_close(ops.attention_grouped_query_attention_sliding_window_fwd(q, k, v),
                               ops.attention_grouped_query_attention_fwd(q, k, v), rtol=0, atol=0)


def test_gqa_sliding_window_refuses_a_window_below_minus_one():
    q, k, v = inputs(1, 4, 2, 2, 8, torch.float16)
    with pytest.raises(ValueError, match=r"sliding_window_fwd: .*window_size_left"):
        ops.attention_grouped_query_attention_sliding_window_fwd(q, k, v, window_size_left=-2)
