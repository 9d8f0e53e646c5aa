"""Position family on the GPU (nvrtc target): RoPE (both styles, every allowed cache dtype; int32
positions, key=None, the flat [t, heads * head_size] form with per-token offsets) against
independent float64 formulas and the reference target, access-width paths, write-back, out-of-range
tokens, CUDA graph replay; the sinusoidal table and ALiBi slopes against their formulas; the
composite in both styles. Skipped without a GPU (conftest)."""
import math
import os
import subprocess
import sys

import pytest
import torch
import torch._dynamo

import tileops
from position.rope_formulas import CACHE_COMBOS, REFUSED_COMBOS, assert_rope_close, make_cache, rope_ref
from tileops.position import QKNormRopeFwdOp, RopeNeoxCachedFlatFwdOp, RopeNeoxCachedFwdOp

pytestmark = pytest.mark.gpu
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPS = {True: torch.ops.tileops.position_rope_neox_cached_fwd_writes_k_writes_q,
       False: torch.ops.tileops.position_rope_non_neox_cached_fwd_writes_k_writes_q}
FLAT = {True: torch.ops.tileops.position_rope_neox_cached_flat_fwd_writes_k_writes_q,
        False: torch.ops.tileops.position_rope_non_neox_cached_flat_fwd_writes_k_writes_q}
STYLES = [True, False]
STYLE_IDS = ["neox", "gptj"]
DTYPES = [torch.float16, torch.bfloat16, torch.float32]


def inputs(t, hq, hk, d, rot, dtype, max_pos=4096):
    positions = torch.randint(0, max_pos, (t,), device="cuda")
    q = torch.randn(t, hq, d, device="cuda", dtype=dtype)
    k = torch.randn(t, hk, d, device="cuda", dtype=dtype)
    return positions, q, k, make_cache(max_pos, rot).cuda()


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("t,hq,hk,d,rot", [(1, 32, 8, 128, 128), (1000, 32, 32, 128, 128), (37, 16, 2, 80, 32),
                                           (5, 3, 1, 65, 64), (9, 2, 1, 256, 64), (300, 1, 1, 64, 2),
                                           (4, 1, 1, 512, 512), (3, 2, 2, 4096, 4096), (11, 4, 2, 128, 24)])
def test_matches_formula_and_reference(neox, dtype, t, hq, hk, d, rot):
    positions, q, k, cache = inputs(t, hq, hk, d, rot, dtype)
    q_ref, k_ref = rope_ref(positions, q, cache, neox), rope_ref(positions, k, cache, neox)
    q_r, k_r = q.clone(), k.clone()
    q0, k0 = q.clone(), k.clone()
    OPS[neox](positions, q, k, cache)
    OPS[neox](positions, q_r, k_r, cache, target="reference")
    assert_rope_close(q, q_ref)
    assert_rope_close(k, k_ref)
    assert torch.equal(q[..., rot:], q0[..., rot:]) and torch.equal(k[..., rot:], k0[..., rot:])
    tol = torch.finfo(dtype).eps * 2  # FMA contraction may move a rounding by one ulp
    torch.testing.assert_close(q, q_r, rtol=tol, atol=tol)
    torch.testing.assert_close(k, k_r, rtol=tol, atol=tol)


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_misaligned_and_non_contiguous(neox, dtype, counters):
    positions, q_c, k_c, cache = inputs(64, 8, 4, 128, 128, dtype)
    q_ref, k_ref = rope_ref(positions, q_c, cache, neox), rope_ref(positions, k_c, cache, neox)
    # A contiguous q whose storage starts one element off a 16-byte boundary: narrow accesses.
    flat = torch.empty(1 + q_c.numel(), device="cuda", dtype=dtype)
    q = flat[1:].view_as(q_c)
    q.copy_(q_c)
    k_pad = torch.zeros(64, 4, 136, device="cuda", dtype=dtype)
    k = k_pad[..., :128]
    k.copy_(k_c)
    assert q.data_ptr() % 16 != 0 and not k.is_contiguous()
    # The cache itself off a 16-byte boundary too.
    cache_off = torch.empty(cache.numel() + 1, device="cuda")[1:].view_as(cache)
    cache_off.copy_(cache)
    OPS[neox](positions, q, k, cache_off)
    assert_rope_close(q, q_ref)
    assert_rope_close(k, k_ref)
    assert torch.equal(k_pad[..., 128:], torch.zeros(64, 4, 8, device="cuda", dtype=dtype))


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
@pytest.mark.parametrize("dtype,cache_dtype", CACHE_COMBOS, ids=str)
@pytest.mark.parametrize("t,hq,hk,d,rot", [(1000, 32, 8, 128, 128), (37, 16, 2, 80, 32), (5, 3, 1, 65, 64),
                                           (300, 1, 1, 64, 2), (4, 1, 1, 512, 512)])
def test_cache_dtypes_match_formula_and_reference(neox, dtype, cache_dtype, t, hq, hk, d, rot):
    positions, q, k, _ = inputs(t, hq, hk, d, rot, dtype)
    cache = make_cache(4096, rot, dtype=cache_dtype).cuda()  # the formula uses these rounded values
    q_ref, k_ref = rope_ref(positions, q, cache, neox), rope_ref(positions, k, cache, neox)
    q_r, k_r = q.clone(), k.clone()
    OPS[neox](positions, q, k, cache)
    OPS[neox](positions, q_r, k_r, cache, target="reference")
    assert_rope_close(q, q_ref)
    assert_rope_close(k, k_ref)
    tol = torch.finfo(dtype).eps * 2
    torch.testing.assert_close(q, q_r, rtol=tol, atol=tol)
    torch.testing.assert_close(k, k_r, rtol=tol, atol=tol)


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("cache_offset", [1, 2, 4], ids=lambda o: f"cache+{o}")
def test_misaligned_half_cache_narrows_the_access(neox, dtype, cache_offset):
    # A q-dtype cache 2, 4 or 8 bytes off a 16-byte boundary: cache loads (and so the step) narrow.
    positions, q, k, _ = inputs(64, 8, 4, 128, 128, dtype)
    cache = make_cache(4096, 128, dtype=dtype).cuda()
    q_ref, k_ref = rope_ref(positions, q, cache, neox), rope_ref(positions, k, cache, neox)
    off = torch.empty(cache.numel() + cache_offset, device="cuda", dtype=dtype)[cache_offset:].view_as(cache)
    off.copy_(cache)
    OPS[neox](positions, q, k, off)
    assert_rope_close(q, q_ref)
    assert_rope_close(k, k_ref)


def test_cache_dtype_is_part_of_the_build_identity(counters):
    tileops.clear_kernel_caches()
    positions, q, k, cache = inputs(16, 8, 2, 128, 128, torch.bfloat16)
    OPS[True](positions, q, k, cache)
    OPS[True](positions, q, k, cache.bfloat16())
    OPS[True](positions, q, k, cache.bfloat16())
    c = counters()
    assert c["kernel_builds"] == 2 and c["kernel_hits"] == 1


@pytest.mark.parametrize("dtype,cache_dtype", REFUSED_COMBOS, ids=str)
def test_refused_cache_dtype_on_the_gpu(dtype, cache_dtype, counters):
    positions, q, k, _ = inputs(4, 2, 2, 64, 64, dtype)
    q0 = q.clone()
    with pytest.raises(TypeError, match=r"must be one of the combinations"):
        OPS[True](positions, q, k, make_cache(4096, 64, dtype=cache_dtype).cuda())
    assert torch.equal(q, q0) and counters()["kernel_builds"] == 0


def test_out_of_range_tokens_are_left_unchanged_on_the_gpu():
    # Documented in the manifest: the kernel cannot raise without a host sync; it never reads
    # outside the cache and leaves those tokens as they were.
    positions, q, k, cache = inputs(8, 4, 2, 64, 64, torch.bfloat16, max_pos=16)
    positions[3], positions[5] = 16, -2
    q0, k0 = q.clone(), k.clone()
    OPS[True](positions, q, k, cache)
    torch.cuda.synchronize()
    for i in (3, 5):
        assert torch.equal(q[i], q0[i]) and torch.equal(k[i], k0[i])
    assert not torch.equal(q[4], q0[4]) or positions[4].item() == 0


def test_build_once_then_hit(counters):
    tileops.clear_kernel_caches()
    positions, q, k, cache = inputs(16, 8, 2, 128, 128, torch.bfloat16)
    OPS[True](positions, q, k, cache)
    OPS[True](*inputs(33, 4, 4, 128, 128, torch.bfloat16))  # other t/heads: same kernel
    c = counters()
    assert c["kernel_builds"] == 1 and c["kernel_hits"] == 1
    OPS[False](positions, q, k, cache)  # other style: another kernel
    assert counters()["kernel_builds"] == 2


def test_cuda_graph_replay_after_warm_up():
    positions, q, k, cache = inputs(64, 8, 8, 128, 128, torch.bfloat16)
    OPS[True](positions, q.clone(), k.clone(), cache)  # warm-up builds
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        OPS[True](positions, q, k, cache)
    for _ in range(2):
        q.copy_(torch.randn_like(q))
        k.copy_(torch.randn_like(k))
        q_ref, k_ref = rope_ref(positions, q, cache, True), rope_ref(positions, k, cache, True)
        g.replay()
        torch.cuda.synchronize()
        assert_rope_close(q, q_ref)
        assert_rope_close(k, k_ref)


def test_compile_with_inductor_keeps_one_node_and_mutates():
    torch._dynamo.reset()
    op = RopeNeoxCachedFwdOp()
    positions, q, k, cache = inputs(128, 8, 2, 128, 128, torch.bfloat16)
    q2, k2 = q.clone(), k.clone()

    def fn(positions, q, k, cache):
        op(positions, q, k, cache)
        return q.float().sum()

    torch.compile(fn, fullgraph=True)(positions, q, k, cache)
    op(positions, q2, k2, cache)
    assert torch.equal(q, q2) and torch.equal(k, k2)


def sinusoidal_ref(n, dim, base=10000.0):
    p = torch.arange(n, dtype=torch.float64)[:, None]
    angle = p / base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    return torch.stack([angle.sin(), angle.cos()], -1).view(n, dim)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n,dim", [(1, 2), (512, 768), (8192, 4096), (7, 6), (100000, 16)])
def test_sinusoidal_matches_formula(dtype, n, dim):
    t = torch.ops.tileops.position_sinusoidal_fwd(n, dim, "cuda", 10000.0, dtype)
    assert t.is_cuda and t.shape == (n, dim) and t.dtype == dtype
    ref = sinusoidal_ref(n, dim).to(dtype)
    # float64 angle, float32 sin/cos: one rounding to dtype plus a couple of float32 ulps.
    torch.testing.assert_close(t.cpu(), ref, rtol=0, atol=max(torch.finfo(dtype).eps, 4e-7))
    ref_target = torch.ops.tileops.position_sinusoidal_fwd(n, dim, "cpu", 10000.0, dtype)
    torch.testing.assert_close(t.cpu(), ref_target, rtol=0, atol=max(torch.finfo(dtype).eps, 4e-7))


@pytest.mark.parametrize("num_heads", [1, 8, 12, 112])
def test_alibi_matches_formula(num_heads):
    n = 2 ** math.floor(math.log2(num_heads))
    ref = [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)] + [2.0 ** (-4.0 * (2 * j + 1) / n)
                                                             for j in range(num_heads - n)]
    s = torch.ops.tileops.position_alibi_fwd(num_heads, "cuda")
    assert s.is_cuda and s.dtype == torch.float32
    torch.testing.assert_close(s.cpu(), torch.tensor(ref, dtype=torch.float64).float(), rtol=5e-7, atol=0)  # exp2f: <= 2 ulp


def test_a_factory_op_may_be_the_first_cuda_call_of_a_process():
    # its output is allocated on an indexed device before anything else has initialised CUDA
    run = subprocess.run([sys.executable, "-c", "import torch, tileops; tileops.load(); "
                          "s = torch.ops.tileops.position_alibi_fwd(8, torch.device('cuda:0')); "
                          "print(s.device, s.cpu().tolist())"],
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))
    assert run.returncode == 0, run.stderr[-3000:]
    device, values = run.stdout.strip().splitlines()[-1].split(" ", 1)
    assert device == "cuda:0"
    assert eval(values) == pytest.approx([2.0 ** (-(i + 1)) for i in range(8)], rel=5e-7)


@pytest.mark.parametrize("dtype,cache_dtype", [(torch.bfloat16, torch.float32), (torch.float32, torch.float32),
                                               (torch.bfloat16, torch.bfloat16), (torch.float16, torch.float16)], ids=str)
def test_qk_norm_rope_composite_on_gpu(dtype, cache_dtype):
    positions, q, k, cache = inputs(256, 16, 4, 128, 128, dtype)
    cache = cache.to(cache_dtype)
    qw = torch.rand(128, device="cuda", dtype=dtype) + 0.5
    kw = torch.rand(128, device="cuda", dtype=dtype) + 0.5
    qn, kn = (torch.ops.tileops.norm_rms_norm_fwd(x, w, [128], 1e-6) for x, w in ((q, qw), (k, kw)))
    OPS[True](positions, qn, kn, cache)
    QKNormRopeFwdOp(eps=1e-6)(positions, q, k, qw, kw, cache)
    assert torch.equal(q, qn) and torch.equal(k, kn)  # the composite is exactly its sub-ops


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_qk_norm_rope_gptj_composite_on_gpu(dtype):
    positions, q, k, cache = inputs(256, 16, 4, 128, 64, dtype)
    qw = torch.rand(128, device="cuda", dtype=dtype) + 0.5
    kw = torch.rand(128, device="cuda", dtype=dtype) + 0.5
    qn, kn = (torch.ops.tileops.norm_rms_norm_fwd(x, w, [128], 1e-6) for x, w in ((q, qw), (k, kw)))
    q_ref, k_ref = rope_ref(positions, qn, cache, False), rope_ref(positions, kn, cache, False)
    OPS[False](positions, qn, kn, cache)
    QKNormRopeFwdOp(eps=1e-6, is_neox=False)(positions.int(), q, k, qw, kw, cache)
    assert torch.equal(q, qn) and torch.equal(k, kn)
    assert_rope_close(q, q_ref)
    assert_rope_close(k, k_ref)


# ---- int32 positions, key=None, the flat form with offsets ------------------------------------------

@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("t,hq,hk,d,rot", [(1, 32, 8, 128, 128), (1000, 32, 8, 128, 128), (37, 16, 2, 80, 32),
                                           (5, 3, 1, 65, 64), (300, 1, 1, 64, 2)])
def test_int32_positions_and_key_none(neox, dtype, t, hq, hk, d, rot):
    positions, q, k, cache = inputs(t, hq, hk, d, rot, dtype)
    q64, k64 = q.clone(), k.clone()
    OPS[neox](positions, q64, k64, cache)
    q32, k32 = q.clone(), k.clone()
    OPS[neox](positions.int(), q32, k32, cache)
    assert torch.equal(q32, q64) and torch.equal(k32, k64)  # the same math, another index type
    q_only = q.clone()
    OPS[neox](positions, q_only, None, cache)
    assert torch.equal(q_only, q64)  # q alone: the rows the call with a key gives
    assert_rope_close(q_only, rope_ref(positions, q, cache, neox))


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("index", [torch.int64, torch.int32], ids=str)
@pytest.mark.parametrize("t,hq,hk,d,rot", [(1, 32, 8, 128, 128), (1000, 32, 8, 128, 128), (37, 16, 2, 80, 32),
                                           (5, 3, 1, 65, 64), (11, 4, 2, 128, 24)])
def test_flat_form_with_offsets_matches_formula_and_reference(neox, dtype, index, t, hq, hk, d, rot):
    positions = torch.randint(0, 2048, (t,), device="cuda", dtype=index)
    offsets = torch.randint(0, 2048, (t,), device="cuda", dtype=index)
    q = torch.randn(t, hq * d, device="cuda", dtype=dtype)
    k = torch.randn(t, hk * d, device="cuda", dtype=dtype)
    cache = make_cache(4096, rot).cuda()
    rows = positions.long() + offsets.long()
    q_ref = rope_ref(rows, q.view(t, hq, d), cache, neox).flatten(1)
    k_ref = rope_ref(rows, k.view(t, hk, d), cache, neox).flatten(1)
    q_r, k_r = q.clone(), k.clone()
    FLAT[neox](positions, q, k, cache, offsets, d)
    FLAT[neox](positions, q_r, k_r, cache, offsets, d, target="reference")
    assert_rope_close(q, q_ref)
    assert_rope_close(k, k_ref)
    tol = torch.finfo(dtype).eps * 2
    torch.testing.assert_close(q, q_r, rtol=tol, atol=tol)
    torch.testing.assert_close(k, k_r, rtol=tol, atol=tol)
    q_only = torch.randn(t, hq * d, device="cuda", dtype=dtype)  # key=None, no offsets
    q_only_ref = rope_ref(positions.long(), q_only.view(t, hq, d), cache, neox).flatten(1)
    FLAT[neox](positions, q_only, None, cache, None, d)
    assert_rope_close(q_only, q_only_ref)


def test_flat_out_of_range_rows_are_left_unchanged_on_the_gpu():
    positions, q, k, cache = inputs(8, 4, 2, 64, 64, torch.bfloat16, max_pos=16)
    q, k = q.flatten(1), k.flatten(1)
    offsets = torch.zeros(8, dtype=torch.long, device="cuda")
    positions[3], offsets[3] = 10, 6  # row 16 of a 16-row cache
    positions[5], offsets[5] = 3, -4  # row -1
    q0, k0 = q.clone(), k.clone()
    FLAT[True](positions, q, k, cache, offsets, 64)
    torch.cuda.synchronize()
    for i in (3, 5):
        assert torch.equal(q[i], q0[i]) and torch.equal(k[i], k0[i])


def test_index_type_and_offsets_are_part_of_the_build_identity(counters):
    def cubins():
        c = counters()
        return c["nvrtc_compiles"] + c["disk_cache_hits"]

    tileops.clear_kernel_caches()
    positions, q, k, cache = inputs(16, 8, 2, 128, 128, torch.bfloat16)
    OPS[True](positions, q, k, cache)
    OPS[True](positions, q, None, cache)  # key=None: the same kernel (no k heads)
    assert counters()["kernel_builds"] == 1 and cubins() == 1
    OPS[True](positions.int(), q, k, cache)  # int32 positions: rope_indexed_fwd
    assert counters()["kernel_builds"] == 2 and cubins() == 2
    qf, kf = q.flatten(1), k.flatten(1)
    FLAT[True](positions, qf, kf, cache, None, 128)  # the flat op without offsets: the 3-D op's CUBIN
    assert counters()["kernel_builds"] == 3 and cubins() == 2
    FLAT[True](positions, qf, kf, cache, positions, 128)
    FLAT[True](positions.int(), qf, kf, cache, positions.int(), 128)
    assert counters()["kernel_builds"] == 5 and cubins() == 4


def test_flat_form_cuda_graph_and_compile():
    positions = torch.randint(0, 2048, (64,), device="cuda", dtype=torch.int32)
    offsets = torch.randint(0, 2048, (64,), device="cuda", dtype=torch.int32)
    q = torch.randn(64, 8 * 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(64, 2 * 128, device="cuda", dtype=torch.bfloat16)
    cache = make_cache(4096, 128).cuda()
    op = RopeNeoxCachedFlatFwdOp(head_size=128)
    op(positions, q.clone(), k.clone(), cache, offsets)  # warm-up builds
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        op(positions, q, k, cache, offsets)
    q.copy_(torch.randn_like(q))
    q_ref = rope_ref(positions.long() + offsets.long(), q.view(64, 8, 128), cache, True).flatten(1)
    g.replay()
    torch.cuda.synchronize()
    assert_rope_close(q, q_ref)
    torch._dynamo.reset()
    q2 = torch.randn_like(q)
    q3 = q2.clone()

    def fn(positions, q, cache, offsets):
        op(positions, q, None, cache, offsets)
        return q.float().sum()

    torch.compile(fn, fullgraph=True)(positions, q2, cache, offsets)
    op(positions, q3, None, cache, offsets)
    assert torch.equal(q2, q3)
