"""GroupedQueryAttentionSlidingWindowVarlenFwdOp (manifests/attention.yaml) on CPU against the float64
oracle of tests/support/decode_oracle.py with the mask written here per request; and its refusals."""
import pytest
import torch

import tileops
from support.decode_oracle import bottom_right, default_scale, float64_decode

tileops.load()
ops = torch.ops.tileops
OP = ops.attention_grouped_query_attention_sliding_window_varlen_fwd
NAME = "tileops::attention_grouped_query_attention_sliding_window_varlen_fwd"


def packed(lens_q, lens_k, heads, kv_heads, d, dtype=torch.float16):
    cu = lambda lens: torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32)  # noqa: E731
    q = torch.randn(sum(lens_q), heads, d).to(dtype)
    k, v = (torch.randn(sum(lens_k), kv_heads, d).to(dtype) for _ in range(2))
    return q, k, v, cu(lens_q), cu(lens_k)


@pytest.mark.parametrize("causal,left,right", [(True, -1, -1), (True, 3, -1), (False, 2, 1), (False, -1, -1),
                                               (True, 0, -1)])
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (8, 2)])
def test_sliding_window_varlen_matches_float64(causal, left, right, heads, kv_heads):
    lens_q, lens_k = [5, 1, 0, 7], [9, 1, 3, 7]  # queries the last tokens: fewer than keys, none, as many
    q, k, v, cu_q, cu_k = packed(lens_q, lens_k, heads, kv_heads, 16)
    o = OP(q, k, v, cu_q, cu_k, max_seqlen_q=7, is_causal=causal, window_size_left=left, window_size_right=right)
    for b, (nq, nk) in enumerate(zip(lens_q, lens_k)):
        if nq == 0:
            continue
        valid = bottom_right(nq, nk, causal, left, right)
        sq, sk = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_k[b]), int(cu_k[b + 1]))
        want = float64_decode(q[sq], k[sk], v[sk], default_scale(16), valid=valid)
        torch.testing.assert_close(o[sq].double(), want, rtol=2e-3, atol=2e-3)


def test_a_query_with_no_key_in_its_window_gets_zeros():
    q, k, v, cu_q, cu_k = packed([3], [3], 2, 2, 8)
    o = OP(q, k, v, cu_q, cu_k, max_seqlen_q=3, is_causal=False, window_size_left=0, window_size_right=0)
    assert o.abs().sum() > 0  # each query sees its own key
    q, k, v, cu_q, cu_k = packed([2], [5], 2, 2, 8)
    o = OP(q, k, v, cu_q, cu_k, max_seqlen_q=2, is_causal=True, window_size_left=0)
    want = float64_decode(q, k, v, default_scale(8), valid=torch.tensor([[0, 0, 0, 1, 0], [0, 0, 0, 0, 1]]).bool())
    torch.testing.assert_close(o.double(), want, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("cu_q,match", [
    ([1, 3, 5], r"'cu_seqlens_q' must start at 0, got 1"),
    ([0, 4, 3], r"'cu_seqlens_q' must never decrease, got 4 then 3 at 2"),
    ([0, 2, 4], r"'cu_seqlens_q' must end at the packed length 5, got 4"),
    ([0, 1, 5], r"request 1 has 4 queries, more than max_seqlen_q = 3"),
])
def test_refuses_offsets_that_do_not_describe_the_packing(cu_q, match):
    q, k, v, _, cu_k = packed([2, 3], [2, 3], 2, 2, 8)
    with pytest.raises(ValueError, match=rf"{NAME}: {match}"):
        OP(q, k, v, torch.tensor(cu_q, dtype=torch.int32), cu_k, max_seqlen_q=3)


def test_refuses_a_window_below_minus_one():
    q, k, v, cu_q, cu_k = packed([2], [2], 2, 2, 8)
    with pytest.raises(ValueError, match=rf"{NAME}: .*window_size_left \+ 1 >= 0"):
        OP(q, k, v, cu_q, cu_k, max_seqlen_q=2, window_size_left=-2)
