"""GroupedQueryAttentionPrefillFwdOp and GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp
(manifests/attention.yaml) on CPU against the float64 oracle of tests/support/decode_oracle.py, with the masks, FP8
dequantisation, RoPE and the cache append written out here per request; and their refusals."""
import itertools
import math

import pytest
import torch

import tileops
from support.decode_oracle import bottom_right, default_scale, float64_decode, gather_pages

tileops.load()
ops = torch.ops.tileops
PREFILL = ops.attention_grouped_query_attention_prefill_fwd
PREFILL_NAME = "tileops::attention_grouped_query_attention_prefill_fwd"
PAGED = ops.attention_grouped_query_attention_prefill_paged_with_kv_cache_fwd_writes_k_pages_writes_v_pages
PAGED_NAME = "tileops::attention_grouped_query_attention_prefill_paged_with_kv_cache_fwd_writes_k_pages_writes_v_pages"
ROPE = ops.position_rope_neox_position_ids_fwd
FP8 = torch.float8_e4m3fn
TOL = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def cu(lens):
    return torch.tensor([0, *itertools.accumulate(lens)], dtype=torch.int32)


def close(got, want):
    torch.testing.assert_close(got.double(), want, rtol=TOL[got.dtype], atol=TOL[got.dtype])


# ---- GroupedQueryAttentionPrefillFwdOp ------------------------------------------------------------

LENS_Q, LENS_K = [1, 127, 129, 0], [1, 129, 129, 2]  # one token, fewer queries than keys, as many, none


def packed(lens_q, lens_k, heads, kv_heads, d, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(sum(lens_q), heads, d, generator=g).to(dtype)
    k, v = (torch.randn(sum(lens_k), kv_heads, d, generator=g).to(dtype) for _ in range(2))
    return q, k, v, cu(lens_q), cu(lens_k)


def prefill_oracle(q, k, v, lens_q, lens_k, scale, softcap=None, causal=True, left=-1, right=-1, scales=None):
    """float64 per request; scales (q_scale, k_scale, v_scale) [B, H_kv] multiply the operands (q's by group)."""
    heads, kv_heads = q.shape[1], k.shape[1]
    out = torch.zeros(q.shape, dtype=torch.float64)
    cq, ck = cu(lens_q), cu(lens_k)
    for b, (nq, nk) in enumerate(zip(lens_q, lens_k)):
        if nq == 0:
            continue
        sq, sk = slice(int(cq[b]), int(cq[b + 1])), slice(int(ck[b]), int(ck[b + 1]))
        qb, kb, vb = q[sq].double(), k[sk].double(), v[sk].double()
        if scales is not None:
            qs, ks, vs = (s.double() for s in scales)
            qb = qb * qs[b].repeat_interleave(heads // kv_heads)[None, :, None]
            kb, vb = kb * ks[b][None, :, None], vb * vs[b][None, :, None]
        out[sq] = float64_decode(qb, kb, vb, scale, softcap, bottom_right(nq, nk, causal, left, right))
    return out


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (8, 2)])  # GQA ratios 1 and 4
@pytest.mark.parametrize("causal,sm_scale,softcap", [(True, None, None), (False, 0.3, None), (True, None, 2.0)])
def test_prefill_matches_float64(dtype, heads, kv_heads, causal, sm_scale, softcap):
    d = 16
    q, k, v, cu_q, cu_k = packed(LENS_Q, LENS_K, heads, kv_heads, d, dtype)
    o = PREFILL(q, k, v, cu_q, cu_k, None, None, None, max(LENS_Q), max(LENS_K), is_causal=causal,
                sm_scale=sm_scale, softcap=softcap)
    assert o.shape == q.shape and o.dtype == dtype
    scale = default_scale(d) if sm_scale is None else sm_scale
    close(o, prefill_oracle(q, k, v, LENS_Q, LENS_K, scale, softcap, causal))


@pytest.mark.parametrize("left,right", [(3, -1), (0, 0), (5, 2), (-1, 1)])
def test_prefill_windows_are_placed_at_the_end_of_the_keys(left, right):
    q, k, v, cu_q, cu_k = packed(LENS_Q, LENS_K, 8, 2, 16, torch.float16, seed=1)
    for causal in (True, False):
        o = PREFILL(q, k, v, cu_q, cu_k, None, None, None, max_seqlen_q=129, max_seqlen_kv=129, is_causal=causal,
                    window_size_left=left, window_size_right=right)
        close(o, prefill_oracle(q, k, v, LENS_Q, LENS_K, default_scale(16), None, causal, left, right))


def test_a_causal_query_before_every_key_gets_zeros():
    q, k, v, cu_q, cu_k = packed([4], [2], 2, 2, 8, torch.float16)  # queries 0 and 1 sit before key 0
    o = PREFILL(q, k, v, cu_q, cu_k, None, None, None, max_seqlen_q=4, max_seqlen_kv=2)
    assert torch.equal(o[:2], torch.zeros_like(o[:2]))
    close(o, prefill_oracle(q, k, v, [4], [2], default_scale(8)))


def quantise(x, kv_heads, by_group):
    """x [T, heads, D] float -> (float8 values, [1, H_kv] scales): one scale per KV head (q: per group of
    query heads), FA3's descale convention, as TileOPs' tests make them."""
    t, heads, d = x.shape
    grouped = x.view(t, kv_heads, heads // kv_heads, d) if by_group else x.view(t, kv_heads, 1, d)
    scale = grouped.abs().amax(dim=(0, 2, 3)).clamp(min=1e-4) / 448.0
    q8 = (grouped / scale[None, :, None, None]).clamp(-448, 448).to(FP8).view(t, heads, d)
    return q8, scale[None].float()


@pytest.mark.parametrize("out_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (8, 2)])
@pytest.mark.parametrize("causal,softcap", [(False, None), (True, 3.0)])
def test_fp8_prefill_dequantises_by_request_and_kv_head_scales(out_dtype, heads, kv_heads, causal, softcap):
    lens = [129]  # TileOPs' scales are per (request, KV head): one request here, three below
    g = torch.Generator().manual_seed(2)
    q8, qs = quantise(torch.randn(129, heads, 16, generator=g) * 0.5, kv_heads, True)
    k8, ks = quantise(torch.randn(129, kv_heads, 16, generator=g) * 2, kv_heads, False)
    v8, vs = quantise(torch.randn(129, kv_heads, 16, generator=g), kv_heads, False)
    o = PREFILL(q8, k8, v8, cu(lens), cu(lens), qs, ks, vs, 129, 129, is_causal=causal, softcap=softcap,
                dtype=out_dtype)
    assert o.dtype == out_dtype
    close(o, prefill_oracle(q8, k8, v8, lens, lens, default_scale(16), softcap, causal, scales=(qs, ks, vs)))


def test_scales_differ_per_request_and_apply_to_16_bit_inputs_too():
    q, k, v, cu_q, cu_k = packed(LENS_Q, LENS_K, 8, 2, 16, torch.bfloat16, seed=3)
    g = torch.Generator().manual_seed(4)
    qs, ks, vs = (torch.rand(4, 2, generator=g) + 0.5 for _ in range(3))
    o = PREFILL(q, k, v, cu_q, cu_k, qs, ks, vs, 129, 129)
    close(o, prefill_oracle(q, k, v, LENS_Q, LENS_K, default_scale(16), scales=(qs, ks, vs)))
    only_v = PREFILL(q, k, v, cu_q, cu_k, None, None, vs, 129, 129)  # an absent scale is 1
    close(only_v, prefill_oracle(q, k, v, LENS_Q, LENS_K, default_scale(16), scales=(torch.ones(4, 2),) * 2 + (vs,)))


def test_dtype_sets_the_output_dtype_of_16_bit_inputs_too():
    q, k, v, cu_q, cu_k = packed([3], [3], 2, 2, 8, torch.float16)
    o = PREFILL(q, k, v, cu_q, cu_k, None, None, None, max_seqlen_q=3, max_seqlen_kv=3, dtype=torch.bfloat16)
    assert o.dtype == torch.bfloat16
    close(o, prefill_oracle(q, k, v, [3], [3], default_scale(8)))


def test_prefill_refusals_name_the_op_the_argument_and_the_rule():
    q, k, v, cu_q, cu_k = packed([2, 3], [2, 3], 4, 2, 8, torch.float16)
    ones = torch.ones(2, 2)
    with pytest.raises(TypeError, match=rf"{PREFILL_NAME}: output 'o' would have dtype [Ff]loat8_e4m3fn, but its rule "
                                        r"dtype_or\(dtype, q\) in float16 \| bfloat16"):
        PREFILL(q.to(FP8), k.to(FP8), v.to(FP8), cu_q, cu_k, ones, ones, ones, 3, 3)
    with pytest.raises(ValueError, match=rf"{PREFILL_NAME}: 'dtype' must be one of float16 \| bfloat16, got float32"):
        PREFILL(q, k, v, cu_q, cu_k, None, None, None, 3, 3, dtype=torch.float32)
    with pytest.raises(RuntimeError, match=rf"{PREFILL_NAME}: 'k_scale' must have shape \[B1 - 1, H_kv\]"):
        PREFILL(q, k, v, cu_q, cu_k, None, torch.ones(3, 2), None, 3, 3)
    with pytest.raises(TypeError, match=rf"{PREFILL_NAME}: 'q_scale' must have dtype float32"):
        PREFILL(q, k, v, cu_q, cu_k, ones.half(), None, None, 3, 3)
    with pytest.raises(ValueError, match=rf"{PREFILL_NAME}: 'cu_seqlens_kv' must end at the packed length 5, got 4"):
        PREFILL(q, k, v, cu_q, torch.tensor([0, 2, 4], dtype=torch.int32), None, None, None, 3, 3)
    with pytest.raises(ValueError, match=rf"{PREFILL_NAME}: request 1 has 3 keys, more than max_seqlen_kv = 2"):
        PREFILL(q, k, v, cu_q, cu_k, None, None, None, 3, 2)
    with pytest.raises(ValueError, match=rf"{PREFILL_NAME}: request 1 has 3 queries, more than max_seqlen_q = 2"):
        PREFILL(q, k, v, cu_q, cu_k, None, None, None, 2, 3)
    with pytest.raises(ValueError, match=rf"{PREFILL_NAME}: .*not given\(softcap\) or softcap > 0"):
        PREFILL(q, k, v, cu_q, cu_k, None, None, None, 3, 3, softcap=0.0)
    with pytest.raises(ValueError, match=rf"{PREFILL_NAME}: .*window_size_right \+ 1 >= 0"):
        PREFILL(q, k, v, cu_q, cu_k, None, None, None, 3, 3, window_size_right=-2)
    with pytest.raises(ValueError, match=rf"{PREFILL_NAME}: .*H % H_kv == 0"):
        PREFILL(torch.randn(5, 3, 8).half(), k, v, cu_q, cu_k, None, None, None, 3, 3)


# ---- GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp --------------------------------------------

def paged_case(lens_new, lens_old, page_size, heads, kv_heads, d, dtype, pool_dtype=None, seed=0, scale=1.0):
    """A pool with a spare page, each request's pages scattered through it (entries it never reaches -1),
    its old tokens written at their rows (quantised by `scale` for an FP8 pool)."""
    pool_dtype = pool_dtype or dtype
    g = torch.Generator().manual_seed(seed)
    per_req = max((n + m + page_size - 1) // page_size for n, m in zip(lens_new, lens_old)) + 1
    b = len(lens_new)
    pool_pages = b * per_req + 1
    table = torch.randperm(pool_pages, generator=g)[: b * per_req].view(b, per_req).to(torch.int32)
    for i, (n, m) in enumerate(zip(lens_new, lens_old)):
        table[i, (n + m + page_size - 1) // page_size:] = -1
    k_pages = (torch.randn(pool_pages * page_size, kv_heads, d, generator=g) / scale).clamp(-448, 448).to(pool_dtype)
    v_pages = (torch.randn(pool_pages * page_size, kv_heads, d, generator=g) / scale).clamp(-448, 448).to(pool_dtype)
    q = torch.randn(sum(lens_new), heads, d, generator=g).to(dtype)
    k_new, v_new = (torch.randn(sum(lens_new), kv_heads, d, generator=g).to(dtype) for _ in range(2))
    return dict(q=q, k_new=k_new, v_new=v_new, k_pages=k_pages, v_pages=v_pages, cu_seqlens_q=cu(lens_new),
                cache_seqlens=torch.tensor(lens_old, dtype=torch.int32), block_table=table, per_req=per_req)


def call_paged(c, page_size, k_scale=None, v_scale=None, **kw):
    """The op on copies of the pools; returns (o, k_pages after, v_pages after)."""
    kp, vp = c["k_pages"].clone(), c["v_pages"].clone()
    o = PAGED(c["q"], c["k_new"], c["v_new"], kp, vp, k_scale, v_scale, c["cu_seqlens_q"], c["cache_seqlens"],
              c["block_table"], c["per_req"], page_size, max(int(x) for x in c["cu_seqlens_q"].diff()), **kw)
    return o, kp, vp


def rope_positions(c):
    return torch.cat([torch.arange(int(n), int(n) + int(m)) for n, m in
                      zip(c["cache_seqlens"], c["cu_seqlens_q"].diff())]).to(torch.int32)


def paged_oracle(c, page_size, ks=1.0, vs=1.0, causal=True, softcap=None, sm_scale=None, q=None, k_new=None):
    """float64 per request: old tokens as round_q(pool * scale), new ones as given."""
    q = c["q"] if q is None else q
    k_new = c["k_new"] if k_new is None else k_new
    dtype, d = q.dtype, q.shape[-1]
    out = torch.zeros(q.shape, dtype=torch.float64)
    cq = c["cu_seqlens_q"]
    for b, n in enumerate(int(x) for x in c["cache_seqlens"]):
        s = slice(int(cq[b]), int(cq[b + 1]))
        m = s.stop - s.start
        if m == 0:
            continue
        k_old = (gather_pages(c["k_pages"], c["block_table"][b], n, page_size).float() * ks).to(dtype)
        v_old = (gather_pages(c["v_pages"], c["block_table"][b], n, page_size).float() * vs).to(dtype)
        keys, values = torch.cat([k_old, k_new[s]]), torch.cat([v_old, c["v_new"][s]])
        scale = default_scale(d) if sm_scale is None else sm_scale
        out[s] = float64_decode(q[s], keys, values, scale, softcap, bottom_right(m, n + m, causal))
    return out


def expected_pool(c, page_size, k_new, ks=1.0, vs=1.0):
    """The pools after the append: new token i of request b at its row, divided by the scale."""
    kp, vp = c["k_pages"].clone(), c["v_pages"].clone()
    cq = c["cu_seqlens_q"]
    fp8 = kp.dtype == FP8
    for b, n in enumerate(int(x) for x in c["cache_seqlens"]):
        for i in range(int(cq[b]), int(cq[b + 1])):
            p = n + i - int(cq[b])
            row = int(c["block_table"][b, p // page_size]) * page_size + p % page_size
            for pool, x, sc in ((kp, k_new[i], ks), (vp, c["v_new"][i], vs)):
                f = x.float() / sc
                pool[row] = (f.clamp(-448, 448) if fp8 else f).to(pool.dtype)
    return kp, vp


def same_bits(a, b):
    return torch.equal(a.view(torch.uint8), b.view(torch.uint8)) if a.dtype == FP8 else torch.equal(a, b)


NEW, OLD = [1, 127, 129, 0], [0, 129, 3, 5]  # a first chunk, long caches, a request with nothing new


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (8, 2)])
@pytest.mark.parametrize("causal,softcap", [(True, None), (False, 2.0)])
def test_paged_prefill_attends_cache_and_chunk_and_appends(dtype, page_size, heads, kv_heads, causal, softcap):
    c = paged_case(NEW, OLD, page_size, heads, kv_heads, 16, dtype)
    o, kp, vp = call_paged(c, page_size, is_causal=causal, softcap=softcap)
    assert o.shape == c["q"].shape and o.dtype == dtype
    close(o, paged_oracle(c, page_size, causal=causal, softcap=softcap))
    want_k, want_v = expected_pool(c, page_size, c["k_new"])
    assert same_bits(kp, want_k) and same_bits(vp, want_v)  # the new rows written, every other row as it was


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("page_size", [1, 16])
def test_fp8_pool_is_dequantised_when_read_and_quantised_when_written(dtype, page_size):
    ks, vs = 0.02, 0.05
    c = paged_case(NEW, OLD, page_size, 8, 2, 16, dtype, pool_dtype=FP8, seed=5, scale=0.03)
    c["k_new"][0, 0, 0] = 100.0  # beyond 448 * k_scale: clamped into the pool, attended as given
    o, kp, vp = call_paged(c, page_size, torch.tensor([ks]), torch.tensor([vs]))
    close(o, paged_oracle(c, page_size, ks, vs))
    want_k, want_v = expected_pool(c, page_size, c["k_new"], ks, vs)
    assert same_bits(kp, want_k) and same_bits(vp, want_v)


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("rotary_dim", [None, 8])
def test_fused_rope_rotates_q_and_the_new_keys_as_the_rope_op_does(page_size, rotary_dim):
    c = paged_case(NEW, OLD, page_size, 8, 2, 16, torch.float16, seed=6)
    max_position = 300
    o, kp, vp = call_paged(c, page_size, fuse_rope=True, max_position=max_position, rotary_dim=rotary_dim,
                           rope_base=500.0)
    pos = rope_positions(c)
    q_rot = ROPE(c["q"], pos, max_position, 500.0, rotary_dim)
    k_rot = ROPE(c["k_new"], pos, max_position, 500.0, rotary_dim)
    close(o, paged_oracle(c, page_size, q=q_rot, k_new=k_rot))
    want_k, want_v = expected_pool(c, page_size, k_rot)
    assert same_bits(kp, want_k) and same_bits(vp, want_v)  # the cache holds rotated keys, values as given
    # the rotation itself, in float64: Neox pairs (x[i], x[i + rot/2]) turned by p * 500^(-i / (rot/2))
    rot = rotary_dim or 16
    f = 500.0 ** (-torch.arange(rot // 2, dtype=torch.float64) / (rot // 2))
    ang = pos.double()[:, None] * f[None]
    x = c["k_new"].double()
    x1, x2 = x[..., : rot // 2], x[..., rot // 2: rot]
    want = torch.cat([x1 * ang.cos()[:, None] - x2 * ang.sin()[:, None],
                      x2 * ang.cos()[:, None] + x1 * ang.sin()[:, None], x[..., rot:]], -1)
    torch.testing.assert_close(k_rot.double(), want, rtol=4e-3, atol=4e-3)


def test_reads_see_the_pool_as_the_call_found_it_and_each_new_token_needs_a_row():
    page_size = 4
    # Request 1 reads (as old) the page request 0 appends to: it attends the rows from before the call.
    c = paged_case([2, 1], [0, 4], page_size, 2, 2, 8, torch.float16, seed=7)
    c["block_table"] = torch.tensor([[0, -1, -1], [0, 1, -1]], dtype=torch.int32)
    o, kp, _ = call_paged(c, page_size)
    close(o, paged_oracle(c, page_size))  # the oracle reads the pools as they were
    assert torch.equal(kp[:2], c["k_new"][:2]) and torch.equal(kp[4], c["k_new"][2])
    # Two requests appending to one page write its rows twice: refused, whichever would win.
    c = paged_case([2, 3], [0, 0], page_size, 2, 2, 8, torch.float16, seed=7)
    c["block_table"] = torch.tensor([[0, -1], [0, -1]], dtype=torch.int32)
    with pytest.raises(ValueError, match=rf"{PAGED_NAME}: 'block_table' places two new tokens at pool row 0"):
        call_paged(c, page_size)


def test_paged_prefill_refusals_name_the_op_the_argument_and_the_rule():
    c = paged_case([2, 3], [4, 0], 4, 4, 2, 8, torch.float16)
    name = PAGED_NAME

    def run(page_size=4, **kw):
        return call_paged(c, page_size, **kw)

    with pytest.raises(ValueError, match=rf"{name}: .*page_size > 0"):
        run(0)
    with pytest.raises(ValueError, match=rf"{name}: .*N_pool % page_size == 0"):
        run(3)
    with pytest.raises(ValueError, match=rf"{name}: .*fuse_rope or not given\(rotary_dim\)"):
        run(rotary_dim=4)
    with pytest.raises(ValueError, match=rf"{name}: .*not fuse_rope or given\(max_position\)"):
        run(fuse_rope=True)
    with pytest.raises(ValueError, match=rf"{name}: request 0 reaches position 5, past max_position = 5"):
        run(fuse_rope=True, max_position=5)
    with pytest.raises(ValueError, match=rf"{name}: 'k_scale' must be finite and positive, got 0"):
        run(k_scale=torch.zeros(1))
    with pytest.raises(ValueError, match=rf"{name}: 'v_scale' must be finite and positive, got nan"):
        run(v_scale=torch.full((1,), float("nan")))
    with pytest.raises(TypeError, match=rf"{name}: the dtypes of \(q, k_pages\) must be one of the combinations"):
        PAGED(c["q"].bfloat16(), c["k_new"].bfloat16(), c["v_new"].bfloat16(), c["k_pages"].clone(),
              c["v_pages"].clone(), None, None, c["cu_seqlens_q"], c["cache_seqlens"], c["block_table"], c["per_req"], 4, 3)
    with pytest.raises(ValueError, match=rf"{name}: shape rule 'B1 == B \+ 1' is violated"):
        PAGED(c["q"], c["k_new"], c["v_new"], c["k_pages"].clone(), c["v_pages"].clone(), None, None,
              cu([2, 3, 0]), c["cache_seqlens"], c["block_table"], c["per_req"], 4, 3)
    bad = dict(c, cache_seqlens=torch.tensor([-1, 0], dtype=torch.int32))
    with pytest.raises(ValueError, match=rf"{name}: 'cache_seqlens' must be >= 0, got cache_seqlens\[0\] = -1"):
        call_paged(bad, 4)
    bad = dict(c, cache_seqlens=torch.tensor([4, 10], dtype=torch.int32))
    with pytest.raises(ValueError, match=rf"{name}: request 1 would hold cache_seqlens\[1\] \+ 3 = 13 tokens, more "
                                         r"than max_pages_per_req \* page_size = 12"):
        call_paged(bad, 4)
    table = c["block_table"].clone()
    table[0, 1] = -1  # request 0 writes its two new tokens on its second page
    with pytest.raises(ValueError, match=rf"{name}: 'block_table' entries a request reads or writes must be pages "
                                         r".*block_table\[0, 1\] is -1 and request 0 holds 6 tokens"):
        call_paged(dict(c, block_table=table), 4)


def test_paged_prefill_needs_no_table_entry_past_the_tokens_it_holds():
    c = paged_case([2, 1], [1, 0], 4, 2, 2, 8, torch.float16)
    c["block_table"][:, 1:] = -1  # 3 and 1 tokens: one page each
    o, _, _ = call_paged(c, 4)
    close(o, paged_oracle(c, 4))
