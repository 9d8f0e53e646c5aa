"""DeepSeekSparseAttentionDecodeWithKVCacheFwdOp (manifests/attention.yaml) on CPU against a float64
softmax over each query's listed cache entries written here slot by slot; and its refusals."""
import math

import pytest
import torch

import tileops

tileops.load()
ops = torch.ops.tileops
DSA = ops.attention_deep_seek_sparse_attention_decode_with_kv_cache_fwd
NAME = "tileops::attention_deep_seek_sparse_attention_decode_with_kv_cache_fwd"
TOL = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def float64_sparse(q, kv, indices, dim_tail, stride_kv, q_start, causal, scale):
    """Slot by slot: slot t of (b, s, g) is read when its entry lies in [0, S_kv) and, causally, entry idx
    (tokens up to (idx + 1) * stride_kv - 1) is complete at position q_start + s."""
    b_, s_, h_, d = q.shape
    n, g_ = kv.shape[1], kv.shape[2]
    dv = d - dim_tail
    out = torch.zeros(b_, s_, h_, dv, dtype=torch.float64)
    for b in range(b_):
        for s in range(s_):
            for h in range(h_):
                g = h // (h_ // g_)
                read = [int(i) for i in indices[b, s, g]
                        if 0 <= i < n and (not causal or (int(i) + 1) * stride_kv - 1 <= q_start + s)]
                if not read:
                    continue
                rows = kv[b, read, g].double()  # a repeated slot is a row of its own
                w = torch.softmax(rows @ q[b, s, h].double() * scale, 0)
                out[b, s, h] = w @ rows[:, :dv]
    return out


def case(b, s, h, g, n, d, topk, dtype, seed=0, pad=True):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, s, h, d, generator=gen).to(dtype)
    kv = torch.randn(b, n, g, d, generator=gen).to(dtype)
    idx = torch.randint(0, n, (b, s, g, topk), generator=gen, dtype=torch.int32)
    if pad:  # -1 padding, TileOPs' tests' S_kv sentinel, an index far out, a repeated slot
        idx[..., -1] = -1
        idx[..., -2] = n
        idx[0, 0, 0, 0] = n + 7
        idx[..., 1] = idx[..., 2]
    return q, kv, idx


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("heads,groups", [(4, 1), (8, 2)])
@pytest.mark.parametrize("stride_kv,q_start,causal", [(1, 0, True), (1, 9, True), (4, 0, True), (4, 3, True),
                                                      (2, 0, False)])
def test_sparse_decode_matches_float64(dtype, heads, groups, stride_kv, q_start, causal):
    b, s, n, d, tail, topk = 2, 6, 13, 24, 8, 7
    q, kv, idx = case(b, s, heads, groups, n, d, topk, dtype)
    o = DSA(q, kv, idx, tail, topk, stride_kv, q_start, is_causal=causal)
    assert o.shape == (b, s, heads, d - tail) and o.dtype == dtype
    want = float64_sparse(q, kv, idx, tail, stride_kv, q_start, causal, 1 / math.sqrt(d))
    torch.testing.assert_close(o.double(), want, rtol=TOL[dtype], atol=TOL[dtype])


def test_sm_scale_and_a_query_with_nothing_to_read():
    q, kv, idx = case(1, 5, 4, 1, 9, 16, 4, torch.float16, seed=1, pad=False)
    o = DSA(q, kv, idx, 0, 4, 4, 0, sm_scale=0.05)  # entries complete at positions 3, 7, ...: queries 0-2 see none
    assert torch.equal(o[:, :3], torch.zeros_like(o[:, :3]))
    want = float64_sparse(q, kv, idx, 0, 4, 0, True, 0.05)
    torch.testing.assert_close(o.double(), want, rtol=2e-3, atol=2e-3)
    idx.fill_(-1)
    assert torch.equal(DSA(q, kv, idx, 0, 4, 1, 100), torch.zeros_like(o))  # only padding: zeros


def test_the_tail_is_scored_but_not_read():
    q, kv, idx = case(1, 2, 2, 1, 5, 8, 3, torch.float16, seed=2, pad=False)
    bumped = kv.clone()
    bumped[..., 6:] = torch.randn(bumped[..., 6:].shape, generator=torch.Generator().manual_seed(3)).half()
    # a new tail changes the scores (per entry: a constant shift would cancel in the softmax)...
    a, b = DSA(q, kv, idx, 2, 3, 1, 10), DSA(q, bumped, idx, 2, 3, 1, 10)
    assert a.shape[-1] == 6 and not torch.allclose(a, b)
    q0 = q.clone()
    q0[..., 6:] = 0  # ... and with a zero query tail, not at all
    assert torch.equal(DSA(q0, kv, idx, 2, 3, 1, 10), DSA(q0, bumped, idx, 2, 3, 1, 10))


def test_sparse_decode_refusals_name_the_op_the_argument_and_the_rule():
    q, kv, idx = case(1, 2, 4, 2, 5, 8, 3, torch.float16)
    with pytest.raises(ValueError, match=rf"{NAME}: .*D - dim_tail > 0"):
        DSA(q, kv, idx, 8, 3, 1, 0)
    with pytest.raises(ValueError, match=rf"{NAME}: .*stride_kv > 0"):
        DSA(q, kv, idx, 2, 3, 0, 0)
    with pytest.raises(ValueError, match=rf"{NAME}: .*q_start_index_s >= 0"):
        DSA(q, kv, idx, 2, 3, 1, -1)
    with pytest.raises(RuntimeError, match=rf"{NAME}: 'indices' must have shape \[B, S, H_kv, topk\]"):
        DSA(q, kv, idx, 2, 4, 1, 0)  # topk is indices' last dim
    with pytest.raises(TypeError, match=rf"{NAME}: 'indices' must have dtype int32"):
        DSA(q, kv, idx.long(), 2, 3, 1, 0)
    with pytest.raises(ValueError, match=rf"{NAME}: .*H % H_kv == 0"):
        DSA(torch.randn(1, 2, 3, 8).half(), kv, idx, 2, 3, 1, 0)
