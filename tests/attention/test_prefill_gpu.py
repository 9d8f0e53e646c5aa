"""The attention forward over whole sequences on the nvrtc target (pending: the reference serves CUDA
by default), on a CUDA GPU. MultiHeadAttentionFwdOp and GroupedQueryAttentionFwdOp against a float64
softmax(q k^T / sqrt(D)) v written here, at sequence lengths around the 64-row tiles (1, 63, 64, 65,
127, 128, 129, a prime), head dims 64 and 128, GQA ratios 1, 4 and 8, causal or not, both 16-bit
dtypes; the sliding-window op and the packed ops (GroupedQueryAttentionSlidingWindowVarlenFwdOp,
GroupedQueryAttentionPrefillFwdOp: uneven and empty requests, more keys than queries, windows,
sm_scale, softcap) against the float64 formula with the mask the manifest states; head dims the
kernel does not take go to the reference."""
import math

import pytest
import torch

import tileops
from decode_oracle import bottom_right

pytestmark = [pytest.mark.gpu, pytest.mark.unverified_gpu]
tileops.load()
ops = torch.ops.tileops


def float64_attention(q, k, v, causal, left=-1, right=-1, scale=None, softcap=None):
    # q [B, S_q, H, D], k and v [B, S_kv, H_kv, D]; query i at key position i + S_kv - S_q
    b, s, h, d = q.shape
    n = k.shape[1]
    rep = h // k.shape[2]
    qd, kd, vd = (t.double().transpose(1, 2) for t in (q, k, v))
    kd, vd = kd.repeat_interleave(rep, 1), vd.repeat_interleave(rep, 1)
    scores = qd @ kd.transpose(-1, -2) * (scale if scale is not None else 1 / math.sqrt(d))
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)
    keep = bottom_right(s, n, causal, left, right)
    p = scores.masked_fill(~keep, float("-inf")).softmax(-1).nan_to_num(0.0)  # a row with no key: zeros
    return (p @ vd).transpose(1, 2), (p @ vd.abs()).transpose(1, 2)


def inputs(b, s, h, h_kv, d, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, s, n, d, generator=g).to(dtype) for n in (h, h_kv, h_kv)]


def check(o, q, k, v, causal, dtype, **mask):
    want, mag = float64_attention(q, k, v, causal, **mask)
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


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("left,right", [(256, -1), (17, 5), (-1, 0), (0, 0), (100, 63)])
def test_sliding_window_matches_float64(causal, left, right):
    q, k, v = inputs(2, 333, 4, 2, 128, torch.float16, seed=left + 3 * right)
    o = ops.attention_grouped_query_attention_sliding_window_fwd(q.cuda(), k.cuda(), v.cuda(), is_causal=causal,
                                                                  window_size_left=left, window_size_right=right,
                                                                  target="nvrtc")
    check(o.cpu(), q, k, v, causal, torch.float16, left=left, right=right)


# (query lengths, key lengths): uneven, an empty request, more keys than queries, fewer
PACKED = [([5, 0, 130, 64], [5, 0, 130, 64]), ([1, 70, 33], [200, 70, 97]), ([90, 3], [40, 3])]


def packed(lens_q, lens_kv, h, h_kv, d, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(sum(lens_q), h, d, generator=g).to(dtype)
    k, v = (torch.randn(sum(lens_kv), h_kv, d, generator=g).to(dtype) for _ in range(2))
    cu = lambda lens: torch.tensor([0] + lens, dtype=torch.int32).cumsum(0, dtype=torch.int32)  # noqa: E731
    return q, k, v, cu(lens_q), cu(lens_kv)


def check_packed(o, q, k, v, cu_q, cu_kv, causal, dtype, **mask):
    for b in range(len(cu_q) - 1):
        rq, rk = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_kv[b]), int(cu_kv[b + 1]))
        if rq.stop > rq.start:
            check(o[rq].unsqueeze(0), q[rq].unsqueeze(0), k[rk].unsqueeze(0), v[rk].unsqueeze(0), causal, dtype,
                  **mask)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("lens", PACKED)
@pytest.mark.parametrize("left,right", [(-1, -1), (31, 7)])
def test_packed_sliding_window_matches_float64(causal, lens, left, right):
    q, k, v, cu_q, cu_kv = packed(*lens, 8, 2, 64, torch.bfloat16, seed=len(lens[0]) + left)
    o = ops.attention_grouped_query_attention_sliding_window_varlen_fwd(
        q.cuda(), k.cuda(), v.cuda(), cu_q.cuda(), cu_kv.cuda(), max_seqlen_q=max(lens[0]), is_causal=causal,
        window_size_left=left, window_size_right=right, target="nvrtc")
    check_packed(o.cpu(), q, k, v, cu_q, cu_kv, causal, torch.bfloat16, left=left, right=right)


@pytest.mark.parametrize("lens", PACKED)
@pytest.mark.parametrize("scale,softcap", [(None, None), (0.125, None), (None, 30.0)])
def test_packed_prefill_matches_float64(lens, scale, softcap):
    q, k, v, cu_q, cu_kv = packed(*lens, 8, 8, 128, torch.float16, seed=7)
    o = ops.attention_grouped_query_attention_prefill_fwd(
        q.cuda(), k.cuda(), v.cuda(), cu_q.cuda(), cu_kv.cuda(), None, None, None, max_seqlen_q=max(lens[0]),
        max_seqlen_kv=max(lens[1]), sm_scale=scale, softcap=softcap, target="nvrtc")
    check_packed(o.cpu(), q, k, v, cu_q, cu_kv, True, torch.float16, scale=scale, softcap=softcap)


def test_a_request_longer_than_max_seqlen_q_is_computed_whole():
    # max_seqlen_q sizes the launch; the kernel's CTAs loop over a longer request's tiles
    q, k, v, cu_q, cu_kv = packed([200, 5], [230, 5], 4, 4, 64, torch.bfloat16, seed=11)
    o = ops.attention_grouped_query_attention_sliding_window_varlen_fwd(
        q.cuda(), k.cuda(), v.cuda(), cu_q.cuda(), cu_kv.cuda(), max_seqlen_q=64, target="nvrtc")
    check_packed(o.cpu(), q, k, v, cu_q, cu_kv, True, torch.bfloat16)
