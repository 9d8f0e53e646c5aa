"""Attention on a CUDA GPU through what serves it there (nvrtc's decode kernels, the reference's ATen
calls for the rest) and through the nvrtc target by name: paged and contiguous caches against the
float64 oracle, CUDA results against the CPU's."""
import pytest
import torch

import tileops
from support.decode_oracle import default_scale, float64_decode, gather_pages

pytestmark = pytest.mark.gpu
tileops.load()
ops = torch.ops.tileops


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("page_size", [1, 16, 64])
@pytest.mark.parametrize("heads,kv_heads", [(8, 8), (32, 8), (8, 1)])
def test_gqa_decode_paged_on_cuda_matches_float64(dtype, page_size, heads, kv_heads):
    d, pages = 128, 5
    full = page_size * pages  # 5, 80, 320 tokens: lengths 127, 129 where they fit, one token, none
    lengths = [full, min(127, full - 1), 0, 1, min(129, full)]
    b = len(lengths)
    perm = torch.randperm(b * pages + 2)
    table = perm[: b * pages].view(b, pages).to(torch.int32)
    k = torch.randn((b * pages + 2) * page_size, kv_heads, d, dtype=dtype)
    v = torch.randn((b * pages + 2) * page_size, kv_heads, d, dtype=dtype)
    q = torch.randn(b, heads, d, dtype=dtype)
    real = torch.tensor(lengths, dtype=torch.int32)
    o = ops.attention_grouped_query_attention_decode_paged_with_kv_cache_fwd(
        q.cuda(), k.cuda(), v.cuda(), real.cuda(), table.cuda(), page_size=page_size, softcap=30.0)
    assert o.is_cuda and o.dtype == dtype
    for i, n in enumerate(lengths):
        want = float64_decode(q[i, None], gather_pages(k, table[i], n, page_size), gather_pages(v, table[i], n, page_size),
                              default_scale(d), 30.0)[0]
        tol = 2e-3 if dtype == torch.float16 else 1.6e-2
        torch.testing.assert_close(o[i].cpu().double(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("cls", ["MultiHeadAttentionDecodeWithKVCacheFwdOp", "MultiHeadAttentionDecodePagedWithKVCacheFwdOp",
                                 "GroupedQueryAttentionDecodeWithKVCacheFwdOp",
                                 "GroupedQueryAttentionDecodePagedWithKVCacheFwdOp",
                                 "MultiHeadLatentAttentionDecodeWithKVCacheFwdOp", "MultiHeadAttentionFwdOp",
                                 "MultiHeadAttentionBwdOp", "GroupedQueryAttentionBwdOp"])
def test_on_cuda_equals_the_cpu_reference(cls):
    from compile_contract import CONTRACT
    torch.manual_seed(0)
    op, inputs = CONTRACT[cls]("cpu")
    want = op(*inputs)
    got = op(*[t.cuda() if isinstance(t, torch.Tensor) else t for t in inputs])
    for g, w in zip(*((r,) if isinstance(r, torch.Tensor) else r for r in (got, want))):
        assert g.is_cuda
        torch.testing.assert_close(g.cpu().float(), w.float(), rtol=1e-2, atol=1e-2)


def nvrtc_or_skip():
    if "nvrtc" not in tileops.target_names():
        pytest.skip("no nvrtc target")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("dim", [64, 128, 256])
@pytest.mark.parametrize("heads,kv_heads", [(8, 8), (32, 8), (32, 4)])
@pytest.mark.parametrize("n_kv", [1, 127, 4099])  # 4099 tokens of one request: split across CTAs
def test_nvrtc_gqa_decode_matches_float64(dtype, dim, heads, kv_heads, n_kv):
    nvrtc_or_skip()
    b = 1 if n_kv > 1000 else 3
    q = torch.randn(b, heads, dim, dtype=dtype, device="cuda")
    k, v = (torch.randn(b, n_kv, kv_heads, dim, dtype=dtype, device="cuda") for _ in range(2))
    o = ops.attention_grouped_query_attention_decode_with_kv_cache_fwd(q, k, v, softcap=20.0, target="nvrtc")
    tol = 2e-3 if dtype == torch.float16 else 1.6e-2
    for i in range(b):
        want = float64_decode(q[i, None].cpu(), k[i].cpu(), v[i].cpu(), default_scale(dim), 20.0)[0]
        torch.testing.assert_close(o[i].cpu().double(), want, rtol=tol, atol=tol)


# Heads of 96 and 80 (and a cache sliced off 16-byte alignment) take the CUDA-core kernel; groups of
# 32 and 16 three KV heads take two and one 16-row tensor-core tiles.
@pytest.mark.parametrize("dim,heads,kv_heads,misaligned", [(96, 32, 8, False), (80, 8, 8, False),
                                                           (128, 32, 8, True), (128, 64, 2, False),
                                                           (64, 48, 3, False)])
def test_nvrtc_gqa_decode_other_shapes_match_float64(dim, heads, kv_heads, misaligned):
    nvrtc_or_skip()
    b, n_kv = 2, 1000
    q = torch.randn(b, heads, dim, dtype=torch.float16, device="cuda")
    kv = torch.randn(2 * b * n_kv * kv_heads * dim + 1, dtype=torch.float16, device="cuda")
    start = 1 if misaligned else 0  # 2 bytes past the allocation's alignment
    k, v = (kv[start + i * b * n_kv * kv_heads * dim:][: b * n_kv * kv_heads * dim].view(b, n_kv, kv_heads, dim)
            for i in range(2))
    o = ops.attention_grouped_query_attention_decode_with_kv_cache_fwd(q, k, v, target="nvrtc")
    for i in range(b):
        want = float64_decode(q[i, None].cpu(), k[i].cpu(), v[i].cpu(), default_scale(dim))[0]
        torch.testing.assert_close(o[i].cpu().double(), want, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("page_size", [1, 16, 64])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_nvrtc_gqa_decode_paged_matches_float64(page_size, dtype):
    nvrtc_or_skip()
    heads, kv_heads, d, pages = 32, 8, 128, 4096 // page_size
    lengths = [4096, 0, 1, 129, 2000]  # a full table, an empty request, one token, odd lengths
    b = len(lengths)
    perm = torch.randperm(b * pages + 3)
    table = perm[: b * pages].view(b, pages).to(torch.int32)
    for i, n in enumerate(lengths):
        table[i, (n + page_size - 1) // page_size:] = -1  # never read
    k = torch.randn((b * pages + 3) * page_size, kv_heads, d, dtype=dtype)
    v = torch.randn_like(k)
    q = torch.randn(b, heads, d, dtype=dtype)
    real = torch.tensor(lengths, dtype=torch.int32)
    o = ops.attention_grouped_query_attention_decode_paged_with_kv_cache_fwd(
        q.cuda(), k.cuda(), v.cuda(), real.cuda(), table.cuda(), page_size=page_size, sm_scale=0.1, target="nvrtc")
    tol = 2e-3 if dtype == torch.float16 else 1.6e-2
    for i, n in enumerate(lengths):
        want = float64_decode(q[i, None], gather_pages(k, table[i], n, page_size), gather_pages(v, table[i], n, page_size),
                              0.1)[0]
        torch.testing.assert_close(o[i].cpu().double(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("s_q,n_kv", [(1, 4096), (4, 300), (16, 33)])
def test_nvrtc_mha_decode_matches_float64(s_q, n_kv):
    nvrtc_or_skip()
    b, h, d = 2, 8, 128
    q = torch.randn(b, s_q, h, d, dtype=torch.float16, device="cuda")
    k, v = (torch.randn(b, n_kv, h, d, dtype=torch.float16, device="cuda") for _ in range(2))
    o = ops.attention_multi_head_attention_decode_with_kv_cache_fwd(q, k, v, target="nvrtc")
    for i in range(b):
        want = float64_decode(q[i].cpu(), k[i].cpu(), v[i].cpu(), default_scale(d))
        torch.testing.assert_close(o[i].cpu().double(), want, rtol=2e-3, atol=2e-3)


def test_nvrtc_gqa_decode_replays_in_a_cuda_graph():
    nvrtc_or_skip()
    q = torch.randn(1, 32, 128, dtype=torch.bfloat16, device="cuda")
    k, v = (torch.randn(1, 8192, 8, 128, dtype=torch.bfloat16, device="cuda") for _ in range(2))
    call = lambda: ops.attention_grouped_query_attention_decode_with_kv_cache_fwd(q, k, v, target="nvrtc")  # noqa: E731
    want = call()  # builds the kernel: a capture may only hit the cache
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = call()
    q.copy_(torch.randn_like(q))
    g.replay()
    torch.testing.assert_close(out, call(), rtol=0, atol=0)
    assert not torch.equal(out, want)
