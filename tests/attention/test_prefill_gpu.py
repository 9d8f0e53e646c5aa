"""The attention forward over whole sequences on the nvrtc target (pending: the reference serves CUDA
by default), on a CUDA GPU. MultiHeadAttentionFwdOp and GroupedQueryAttentionFwdOp against a float64
softmax(q k^T / sqrt(D)) v written here, at sequence lengths around the 64-row tiles (1, 63, 64, 65,
127, 128, 129, a prime), head dims 64 and 128, GQA ratios 1, 4 and 8, causal or not, both 16-bit
dtypes; the sliding-window op and the packed ops (GroupedQueryAttentionSlidingWindowVarlenFwdOp,
GroupedQueryAttentionPrefillFwdOp: uneven and empty requests, more keys than queries, windows,
sm_scale, softcap) against the float64 formula with the mask the manifest states; the paged prefill
(GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp: page sizes 1, 16 and 64, empty caches and chunks,
a request reading as old the page another appends to, FP8 and scaled caches, fused RoPE) against its
float64 oracle and the pools the append must leave, bit for bit; head dims the kernel does not take
go to the reference."""
import math

import pytest
import torch

import tileops
from support.decode_oracle import bottom_right
from test_prefill_extras import call_paged, expected_pool, paged_case, paged_oracle, same_bits

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


def on_gpu(c):
    return {key: (x.cuda() if torch.is_tensor(x) else x) for key, x in c.items()}


def check_paged(o, c, page_size, dtype, **kw):
    want = paged_oracle(c, page_size, **kw)
    mag = paged_oracle(dict(c, v_new=c["v_new"].abs(), v_pages=c["v_pages"].float().abs()), page_size, **kw)
    ulp = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}[dtype]
    assert ((o.double() - want).abs() <= 4 * ulp * mag + 1e-5).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("page_size", [1, 16, 64])
@pytest.mark.parametrize("new,old", [([1, 127, 129, 0], [0, 129, 3, 5]), ([300, 64], [1000, 0])])
@pytest.mark.parametrize("causal,softcap", [(True, None), (False, 20.0)])
def test_paged_prefill_matches_float64_and_appends(dtype, page_size, new, old, causal, softcap):
    c = paged_case(new, old, page_size, 8, 2, 128, dtype, seed=page_size + len(new))
    o, kp, vp = call_paged(on_gpu(c), page_size, is_causal=causal, softcap=softcap, target="nvrtc")
    check_paged(o.cpu(), c, page_size, dtype, causal=causal, softcap=softcap)
    want_k, want_v = expected_pool(c, page_size, c["k_new"])
    assert same_bits(kp.cpu(), want_k) and same_bits(vp.cpu(), want_v)


def test_paged_prefill_reads_the_pool_as_it_found_it():
    # request 1 reads as old the page request 0 appends to
    c = paged_case([2, 1], [0, 4], 4, 2, 2, 64, torch.float16, seed=7)
    c["block_table"] = torch.tensor([[0, -1, -1], [0, 1, -1]], dtype=torch.int32)
    o, kp, _ = call_paged(on_gpu(c), 4, target="nvrtc")
    check_paged(o.cpu(), c, 4, torch.float16)
    assert torch.equal(kp[:2].cpu(), c["k_new"][:2]) and torch.equal(kp[4].cpu(), c["k_new"][2])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("fp8", [True, False])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("only_k_scale", [False, True])
def test_paged_prefill_reads_the_cache_through_its_scales(dtype, fp8, d, only_k_scale):
    # an FP8 cache, or a 16-bit one with scales: old tokens as round_q(cache * scale), new ones written
    # as x / scale (clamped for FP8; one key past 448 * k_scale); an absent v_scale is 1; an empty
    # request between others
    ks, vs = 0.02, (1.0 if only_k_scale else 0.05)
    c = paged_case([1, 127, 0, 129], [0, 129, 7, 3], 16, 8, 2, d, dtype,
                   pool_dtype=torch.float8_e4m3fn if fp8 else None, seed=5, scale=0.03 if fp8 else 1.0)
    c["k_new"][0, 0, 0] = 100.0
    v_scale = None if only_k_scale else torch.tensor([vs], device="cuda")
    o, kp, vp = call_paged(on_gpu(c), 16, torch.tensor([ks], device="cuda"), v_scale, target="nvrtc")
    check_paged(o.cpu(), c, 16, dtype, ks=ks, vs=vs)
    want_k, want_v = expected_pool(c, 16, c["k_new"], ks, vs)
    assert same_bits(kp.cpu(), want_k) and same_bits(vp.cpu(), want_v)


def test_paged_prefill_decodes_every_fp8_value():
    # One old token a request, its value row 64 of the 254 non-NaN e4m3fn bytes (subnormals, zeros of
    # both signs, 448); the new key scores -800, so o is that row, exact in bf16.
    fp8 = torch.float8_e4m3fn
    bytes_ = torch.tensor([x for x in range(256) if x not in (0x7F, 0xFF)] + [0, 0x80], dtype=torch.uint8)
    v_pages = torch.cat([bytes_.view(fp8).view(4, 1, 64), torch.zeros(4, 1, 64, dtype=fp8)])  # pages 4..7: the new rows
    k_pages = torch.zeros(8, 1, 64, dtype=fp8)
    q = torch.ones(4, 1, 64, dtype=torch.bfloat16)
    k_new, v_new = torch.full((4, 1, 64), -100.0, dtype=torch.bfloat16), torch.zeros(4, 1, 64, dtype=torch.bfloat16)
    cu = torch.arange(5, dtype=torch.int32)
    table = torch.tensor([[0, 4], [1, 5], [2, 6], [3, 7]], dtype=torch.int32)
    o = ops.attention_grouped_query_attention_prefill_paged_with_kv_cache_fwd_writes_k_pages_writes_v_pages(
        *(x.cuda() for x in (q, k_new, v_new, k_pages, v_pages)), None, None, cu.cuda(),
        torch.ones(4, dtype=torch.int32, device="cuda"), table.cuda(), 2, 1, 1, target="nvrtc")
    assert torch.equal(o.cpu(), v_pages[:4].float().to(torch.bfloat16))


@pytest.mark.parametrize("rotary_dim", [None, 64])
@pytest.mark.parametrize("page_size", [1, 64])
def test_paged_prefill_rotates_as_the_rope_op_does(rotary_dim, page_size):
    c = paged_case([1, 127, 129, 0], [0, 129, 3, 5], page_size, 8, 2, 128, torch.bfloat16, seed=6)
    g = on_gpu(c)
    o, kp, vp = call_paged(g, page_size, fuse_rope=True, max_position=300, rotary_dim=rotary_dim, rope_base=500.0,
                           target="nvrtc")
    pos = torch.cat([torch.arange(int(n), int(n) + int(m)) for n, m in
                     zip(c["cache_seqlens"], c["cu_seqlens_q"].diff())]).to(torch.int32).cuda()
    rope = ops.position_rope_neox_position_ids_fwd
    q_rot = rope(g["q"], pos, 300, 500.0, rotary_dim, target="reference").cpu()
    k_rot = rope(g["k_new"], pos, 300, 500.0, rotary_dim, target="reference").cpu()
    check_paged(o.cpu(), c, page_size, torch.bfloat16, q=q_rot, k_new=k_rot)
    want_k, want_v = expected_pool(c, page_size, k_rot)
    # the cache holds the rotated keys (the same float32 steps as the rope op: at most an ulp of the
    # dtype apart, where a device's cos differs in its last bit) and the values as given
    torch.testing.assert_close(kp.cpu().float(), want_k.float(), rtol=2.0 ** -7, atol=0.0)
    assert same_bits(vp.cpu(), want_v)


def test_paged_prefill_head_dims_the_kernel_does_not_take_go_to_the_reference():
    c = on_gpu(paged_case([5, 70], [3, 40], 16, 4, 2, 96, torch.bfloat16))
    got = call_paged(c, 16, target="nvrtc")
    want = call_paged(c, 16, target="reference")
    assert all(torch.equal(a, b) for a, b in zip(got, want))
