"""RMSNorm and fused add + RMSNorm with a quantised output on the GPU (nvrtc target) against the
reference target: q bitwise (int8 and float8_e4m3fn), the per-row scales and the new residual equal,
both residual branches, scale_ub, row lengths up to the register limit and its refusal, CUDA graphs.
Skipped without a GPU (conftest)."""
import pytest
import torch

pytestmark = pytest.mark.gpu
OPS = torch.ops.tileops
FP8 = torch.float8_e4m3fn
QDTYPES = [FP8, torch.int8]
DTYPES = [torch.bfloat16, torch.float16, torch.float32]


def bits(q):
    return q.view(torch.int8) if q.dtype == FP8 else q


def assert_same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert torch.equal(bits(a), bits(b)), f"{(bits(a) != bits(b)).sum().item()} of {a.numel()} differ"


def exact_data(m, n, dtype):
    """Rows of k / 8 with |k| <= 4, some rows times 2 (residual too, so x + residual has |k| <= 16):
    every sum of squares is exact in float32 in any order, so r is the same bits on both targets and
    y, the scales and q must be too."""
    def ints(lim):
        return torch.randint(-lim, lim + 1, (m, n), device="cuda").float() / 8
    x, r = ints(4), ints(4)
    x[::3] *= 2
    r[::3] *= 2
    w = (torch.rand(n, device="cuda") + 0.5).to(dtype)
    return x.to(dtype), r.to(dtype), w


def random_data(m, n, dtype):
    x = torch.randn(m, n, device="cuda")
    x[::3] *= 20
    return x.to(dtype), torch.randn(m, n, device="cuda").to(dtype), (torch.rand(n, device="cuda") + 0.5).to(dtype)


# Bitwise: row lengths a power of two (ATen's mean multiplies by 1 / n, the kernel divides by n).
POW2 = [64, 128, 4096, 8192, 16384]
# Static scales putting y * (1 / scale) past the saturation point, in the normal range and (fp8) in
# the subnormal range.
SCALES = {torch.int8: [0.01, 0.05, 1.0], FP8: [0.002, 1.0, 256.0]}


@pytest.mark.parametrize("qdtype", QDTYPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", POW2)
@pytest.mark.parametrize("m", [1, 7, 300])
def test_static_bitwise(m, n, dtype, qdtype):
    x, r, w = exact_data(m, n, dtype)
    for sv in SCALES[qdtype]:
        scale = torch.tensor([sv], device="cuda")
        q = OPS.norm_rms_norm_static_quant_fwd(x, w, scale, [n], 1e-6, qdtype)
        assert_same(q, OPS.norm_rms_norm_static_quant_fwd(x, w, scale, [n], 1e-6, qdtype, target="reference"))
        q, s = OPS.norm_fused_add_rms_norm_static_quant_fwd(x, r, w, scale, [n], 1e-6, qdtype)
        q_ref, s_ref = OPS.norm_fused_add_rms_norm_static_quant_fwd(x, r, w, scale, [n], 1e-6, qdtype,
                                                                    target="reference")
        assert torch.equal(s, s_ref) and torch.equal(s, x + r)
        assert_same(q, q_ref)
        r2 = r.clone()
        q2 = OPS.norm_fused_add_rms_norm_static_quant_fwd_writes_residual(x, r2, w, scale, [n], 1e-6, qdtype)
        assert torch.equal(r2, s)
        assert_same(q2, q)


@pytest.mark.parametrize("ub", [None, 0.5], ids=["no_ub", "ub"])
@pytest.mark.parametrize("qdtype", QDTYPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", POW2)
@pytest.mark.parametrize("m", [1, 7, 300])
def test_dynamic_bitwise(m, n, dtype, qdtype, ub):
    x, r, w = exact_data(m, n, dtype)
    x[1 % m] = 0  # an all-zero row: the floor scale
    scale_ub = None if ub is None else torch.tensor([ub], device="cuda")
    q, sc = OPS.norm_rms_norm_dynamic_quant_fwd(x, w, scale_ub, [n], 1e-6, qdtype)
    q_ref, sc_ref = OPS.norm_rms_norm_dynamic_quant_fwd(x, w, scale_ub, [n], 1e-6, qdtype, target="reference")
    assert torch.equal(sc, sc_ref)
    assert_same(q, q_ref)
    q, sc, s = OPS.norm_fused_add_rms_norm_dynamic_quant_fwd(x, r, w, scale_ub, [n], 1e-6, qdtype)
    q_ref, sc_ref, s_ref = OPS.norm_fused_add_rms_norm_dynamic_quant_fwd(x, r, w, scale_ub, [n], 1e-6, qdtype,
                                                                         target="reference")
    assert torch.equal(s, s_ref) and torch.equal(sc, sc_ref)
    assert_same(q, q_ref)
    r2 = r.clone()
    q2, sc2 = OPS.norm_fused_add_rms_norm_dynamic_quant_fwd_writes_residual(x, r2, w, scale_ub, [n], 1e-6, qdtype)
    assert torch.equal(r2, s) and torch.equal(sc2, sc)
    assert_same(q2, q)


@pytest.mark.parametrize("qdtype", QDTYPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1000, 4096, 5120])
def test_random_rows_within_one_step(n, dtype, qdtype):
    # Random rows: the sums of squares round in another order, r may differ in its last bit, and a
    # value on a rounding boundary may move by one step of q (or of the dynamic scale's y).
    x, r, w = random_data(300, n, dtype)
    q, sc, s = OPS.norm_fused_add_rms_norm_dynamic_quant_fwd(x, r, w, None, [n], 1e-6, qdtype)
    q_ref, sc_ref, s_ref = OPS.norm_fused_add_rms_norm_dynamic_quant_fwd(x, r, w, None, [n], 1e-6, qdtype,
                                                                         target="reference")
    assert torch.equal(s, s_ref)
    torch.testing.assert_close(sc, sc_ref, rtol=1e-2, atol=0)
    deq, deq_ref = q.float() * sc, q_ref.float() * sc_ref
    step = sc_ref * (1.0 if qdtype == torch.int8 else 1.0 / 8 * q_ref.float().abs().clamp_min(2.0 ** -6))
    assert ((deq - deq_ref).abs() <= 1.1 * step + 1e-2 * deq_ref.abs()).all()
    assert (bits(q) != bits(q_ref)).float().mean() < 1e-2


def test_rows_longer_than_registers_are_refused():
    x = torch.randn(2, 65536, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(65536, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"tileops::norm_rms_norm_dynamic_quant_fwd: shape rule 'prod"):
        OPS.norm_rms_norm_dynamic_quant_fwd(x, w, None, [65536])
    q, _ = OPS.norm_rms_norm_dynamic_quant_fwd(x[:, :32768], w[:32768], None, [32768])  # the longest row served
    q_ref, _ = OPS.norm_rms_norm_dynamic_quant_fwd(x[:, :32768], w[:32768], None, [32768], target="reference")
    assert (bits(q) != bits(q_ref)).float().mean() < 1e-2


def test_cuda_graph_replay():
    x, r, w = random_data(64, 4096, torch.bfloat16)
    OPS.norm_fused_add_rms_norm_dynamic_quant_fwd(x, r, w, None, [4096])  # build outside the capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        q, sc, s = OPS.norm_fused_add_rms_norm_dynamic_quant_fwd(x, r, w, None, [4096])
    x.copy_(torch.randn_like(x))
    g.replay()
    q_ref, sc_ref, s_ref = OPS.norm_fused_add_rms_norm_dynamic_quant_fwd(x, r, w, None, [4096], target="reference")
    assert torch.equal(sc, sc_ref) and torch.equal(s, s_ref)
    assert_same(q, q_ref)
