"""Decode attention (manifests/attention.yaml) on CPU against a float64 softmax written per request and
head (tests/support/decode_oracle.py), with paged caches gathered token by token; and the refusals."""
import pytest
import torch

import tileops
from support.decode_oracle import default_scale, float64_decode, gather_pages

tileops.load()
ops = torch.ops.tileops
TOL = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def close(o, want):
    torch.testing.assert_close(o.double(), want, rtol=TOL[o.dtype], atol=TOL[o.dtype])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("s_q,n_kv", [(1, 1), (1, 37), (3, 16), (2, 0)])
def test_mha_decode_matches_float64(dtype, s_q, n_kv):
    b, h, d = 2, 3, 16
    q = torch.randn(b, s_q, h, d, dtype=dtype)
    k, v = torch.randn(b, n_kv, h, d, dtype=dtype), torch.randn(b, n_kv, h, d, dtype=dtype)
    o = ops.attention_multi_head_attention_decode_with_kv_cache_fwd(q, k, v)
    assert o.shape == q.shape and o.dtype == dtype
    for i in range(b):
        close(o[i], float64_decode(q[i], k[i], v[i], default_scale(d)))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (8, 2), (8, 1)])
@pytest.mark.parametrize("sm_scale,softcap", [(None, None), (0.3, None), (None, 2.0)])
def test_gqa_decode_matches_float64(dtype, heads, kv_heads, sm_scale, softcap):
    b, n, d = 3, 29, 32
    q = torch.randn(b, heads, d, dtype=dtype)
    k, v = torch.randn(b, n, kv_heads, d, dtype=dtype), torch.randn(b, n, kv_heads, d, dtype=dtype)
    o = ops.attention_grouped_query_attention_decode_with_kv_cache_fwd(q, k, v, sm_scale=sm_scale, softcap=softcap)
    scale = default_scale(d) if sm_scale is None else sm_scale
    for i in range(b):
        close(o[i], float64_decode(q[i, None], k[i], v[i], scale, softcap)[0])


def paged_cache(b, lengths, pages_per_request, page_size, kv_heads, d, dtype, seed=0):
    """A shuffled pool with a spare page, each request's pages scattered through it; entries past a
    request's length are -1 (never read)."""
    g = torch.Generator().manual_seed(seed)
    pool_pages = b * pages_per_request + 1
    perm = torch.randperm(pool_pages, generator=g)
    table = perm[: b * pages_per_request].view(b, pages_per_request).to(torch.int32)
    for i, n in enumerate(lengths):
        table[i, (n + page_size - 1) // page_size:] = -1
    k = torch.randn(pool_pages * page_size, kv_heads, d, generator=g).to(dtype)
    v = torch.randn(pool_pages * page_size, kv_heads, d, generator=g).to(dtype)
    return k, v, torch.tensor(lengths, dtype=torch.int32), table


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("page_size", [1, 16, 64])
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (8, 2)])
def test_gqa_decode_paged_matches_float64(dtype, page_size, heads, kv_heads):
    d, pages = 16, 3
    lengths = [page_size * pages, 1, 0, page_size + 3 if page_size > 1 else 2]  # full, one token, empty, partial page
    k, v, real, table = paged_cache(len(lengths), lengths, pages, page_size, kv_heads, d, dtype)
    q = torch.randn(len(lengths), heads, d, dtype=dtype)
    o = ops.attention_grouped_query_attention_decode_paged_with_kv_cache_fwd(q, k, v, real, table, page_size=page_size,
                                                                            softcap=5.0)
    for i, n in enumerate(lengths):
        want = float64_decode(q[i, None], gather_pages(k, table[i], n, page_size), gather_pages(v, table[i], n, page_size),
                              default_scale(d), 5.0)[0]
        close(o[i], want)
    assert torch.equal(o[2], torch.zeros_like(o[2]))  # the empty request


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("page_size", [1, 4])
def test_mha_decode_paged_matches_float64(is_causal, page_size):
    h, d, s_q, pages = 2, 8, 3, 4
    lengths = [2, page_size * pages, page_size * pages - 1]  # 2 < S_q: causally, the first query sees none
    k, v, real, table = paged_cache(len(lengths), lengths, pages, page_size, h, d, torch.float16, seed=1)
    q = torch.randn(len(lengths), s_q, h, d, dtype=torch.float16)
    o = ops.attention_multi_head_attention_decode_paged_with_kv_cache_fwd(q, k, v, real, table, page_size=page_size,
                                                                         is_causal=is_causal)
    for i, n in enumerate(lengths):
        j, row = torch.arange(n), torch.arange(s_q)[:, None]
        valid = (j <= n - s_q + row) if is_causal else None  # the new tokens are the cache's last
        want = float64_decode(q[i], gather_pages(k, table[i], n, page_size), gather_pages(v, table[i], n, page_size),
                              default_scale(d), valid=valid)
        close(o[i], want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_mla_decode_scores_latent_and_rope_parts_and_reads_the_latent_as_value(dtype):
    b, h, n, d, pe = 2, 4, 19, 32, 8
    q, q_pe = torch.randn(b, h, d, dtype=dtype), torch.randn(b, h, pe, dtype=dtype)
    k, k_pe = torch.randn(b, n, 1, d, dtype=dtype), torch.randn(b, n, 1, pe, dtype=dtype)
    o = ops.attention_multi_head_latent_attention_decode_with_kv_cache_fwd(q, q_pe, k, k_pe, pe_dim=pe)
    for i in range(b):
        want = float64_decode(torch.cat([q[i], q_pe[i]], -1)[None], torch.cat([k[i], k_pe[i]], -1), k[i],
                              default_scale(d + pe))[0]
        close(o[i], want)


def test_paged_decode_refuses_lengths_and_pages_out_of_range():
    k, v, real, table = paged_cache(2, [4, 4], 2, 2, 2, 8, torch.float16)
    q = torch.randn(2, 2, 8, dtype=torch.float16)
    op = ops.attention_grouped_query_attention_decode_paged_with_kv_cache_fwd
    name = "tileops::attention_grouped_query_attention_decode_paged_with_kv_cache_fwd"
    with pytest.raises(ValueError, match=rf"{name}: 'real_seqlen_kv' must lie in \[0, num_pages \* page_size\] = \[0, 4\].*got 5"):
        op(q, k, v, torch.tensor([4, 5], dtype=torch.int32), table, page_size=2)
    bad = table.clone()
    bad[1, 1] = 5  # the pool has 5 pages: 0..4
    with pytest.raises(ValueError, match=rf"{name}: 'block_table' entries .* \[0, 5\); block_table\[1, 1\] is 5"):
        op(q, k, v, real, bad, page_size=2)
    bad[1, 1] = -1  # an entry past the request's length is never read: -1 is fine there
    op(q, k, v, torch.tensor([4, 2], dtype=torch.int32), bad, page_size=2)


@pytest.mark.parametrize("kwargs,match", [
    (dict(page_size=0), r"page_size > 0"),
    (dict(page_size=3), r"N_kv % page_size == 0"),
    (dict(page_size=2, softcap=0.0), r"not given\(softcap\) or softcap > 0"),
    (dict(page_size=2, softcap=float("nan")), r"not given\(softcap\) or softcap > 0"),
])
def test_paged_decode_refuses_bad_params_by_name(kwargs, match):
    k, v, real, table = paged_cache(2, [4, 4], 2, 2, 2, 8, torch.float16)
    with pytest.raises(ValueError, match=rf"attention_grouped_query_attention_decode_paged_with_kv_cache_fwd: .*{match}"):
        ops.attention_grouped_query_attention_decode_paged_with_kv_cache_fwd(torch.randn(2, 2, 8, dtype=torch.float16),
                                                                            k, v, real, table, **kwargs)


def test_gqa_decode_refuses_heads_that_do_not_group():
    with pytest.raises(ValueError, match=r"attention_grouped_query_attention_decode_with_kv_cache_fwd: .*H % H_kv == 0"):
        ops.attention_grouped_query_attention_decode_with_kv_cache_fwd(
            torch.randn(1, 6, 8).half(), torch.randn(1, 3, 4, 8).half(), torch.randn(1, 3, 4, 8).half())
    with pytest.raises(ValueError, match=r"H_kv > 0"):
        ops.attention_grouped_query_attention_decode_with_kv_cache_fwd(
            torch.randn(1, 6, 8).half(), torch.randn(1, 3, 0, 8).half(), torch.randn(1, 3, 0, 8).half())


def test_mla_decode_refuses_a_second_latent_head():
    with pytest.raises(RuntimeError, match=r"'k' must have shape \[B, N_kv, 1, D\]"):
        ops.attention_multi_head_latent_attention_decode_with_kv_cache_fwd(
            torch.randn(1, 4, 8).half(), torch.randn(1, 4, 2).half(), torch.randn(1, 3, 2, 8).half(),
            torch.randn(1, 3, 2, 2).half(), pe_dim=2)
