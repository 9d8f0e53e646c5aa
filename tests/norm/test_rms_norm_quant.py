"""RMSNorm and fused add + RMSNorm with a quantised output (float8_e4m3fn or int8; a static per-tensor
scale or a dynamic per-row one) on CPU (reference target): vLLM's formulas written here in torch,
argument errors, Meta/fake tensors, opcheck."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

OPS = torch.ops.tileops
FP8 = torch.float8_e4m3fn
DTYPES = [torch.bfloat16, torch.float16, torch.float32]
QDTYPES = [FP8, torch.int8]


def vllm_normed(s, w, eps=1e-6):
    """vLLM's y: T(T(s * r) * w) in float32, r from the float32 mean of squares of the last dim."""
    sf = s.float()
    r = torch.rsqrt(sf.pow(2).mean(-1, keepdim=True) + eps)
    return ((sf * r).to(s.dtype) * w).float()


def vllm_quant(y, inv_scale, qdtype):
    v = y * inv_scale
    if qdtype == torch.int8:
        return v.round().clamp(-128, 127).to(torch.int8)  # torch.round: half to even, as cvt.rni
    return v.clamp(-448, 448).to(FP8)


def vllm_scales(y, qdtype, ub=None):
    amax = y.abs().amax(-1, keepdim=True)
    if ub is not None:
        amax = torch.minimum(amax, ub)
    qmax, floor = (127.0, torch.finfo(torch.float32).eps) if qdtype == torch.int8 else (448.0, 1 / (448 * 512))
    return (amax / qmax).clamp_min(floor)


def same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert torch.equal(a.view(torch.int8) if a.dtype == FP8 else a, b.view(torch.int8) if b.dtype == FP8 else b)


def inputs(dtype, rows=6, n=256):
    g = torch.Generator().manual_seed(rows * n)
    x = torch.randn(rows, n, generator=g).to(dtype)
    r = torch.randn(rows, n, generator=g).to(dtype)
    w = (torch.rand(n, generator=g) + 0.5).to(dtype)
    return x, r, w


# ---- static per-tensor scale -----------------------------------------------------------------------

@pytest.mark.parametrize("qdtype", QDTYPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_static_matches_vllm_formula(dtype, qdtype):
    x, _, w = inputs(dtype)
    scale = torch.tensor([0.02 if qdtype == torch.int8 else 0.005])  # small: many values saturate
    q = OPS.norm_rms_norm_static_quant_fwd(x, w, scale, [256], 1e-6, qdtype)
    same(q, vllm_quant(vllm_normed(x, w), 1 / scale, qdtype))
    sat = 127 if qdtype == torch.int8 else 448
    assert (q.float().abs() == sat).any() and (q.float().abs() < sat).any()


@pytest.mark.parametrize("qdtype", QDTYPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_static_fused_add_both_branches(dtype, qdtype):
    x, r, w = inputs(dtype, 5, 128)
    scale = torch.tensor([0.05])
    s = x + r
    q, r_new = OPS.norm_fused_add_rms_norm_static_quant_fwd(x, r, w, scale, [128], 1e-6, qdtype)
    assert torch.equal(r_new, s)
    same(q, vllm_quant(vllm_normed(s, w), 1 / scale, qdtype))  # the rounded sum is normalised
    q2 = OPS.norm_fused_add_rms_norm_static_quant_fwd_writes_residual(x, r, w, scale, [128], 1e-6, qdtype)
    assert torch.equal(r, s)
    same(q2, q)


def test_y_is_rounded_to_x_dtype_twice_as_vllm_does():
    # int8 steps of 1 on values near 100 resolve bfloat16's rounding (spacing 0.5 there).
    x, _, w = inputs(torch.bfloat16, 16, 512)
    scale = torch.tensor([0.03])
    q = OPS.norm_rms_norm_static_quant_fwd(x, w, scale, [512], 1e-6, torch.int8)
    xf = x.float()
    once = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    assert not torch.equal(q, vllm_quant(once, 1 / scale, torch.int8))
    assert not torch.equal(q, vllm_quant(once.to(torch.bfloat16).float(), 1 / scale, torch.int8))
    same(q, vllm_quant(vllm_normed(x, w), 1 / scale, torch.int8))


def test_scale_multiplies_by_the_float32_reciprocal():
    # y / 3 and y * float32(1 / 3) differ in the last bit for some y; vLLM multiplies.
    x, _, w = inputs(torch.float32, 64, 256)
    scale = torch.tensor([3.0 / 448 / 8])
    q = OPS.norm_rms_norm_static_quant_fwd(x, w, scale, [256], 1e-6, FP8)
    same(q, vllm_quant(vllm_normed(x, w), 1 / scale, FP8))


def test_multi_dim_normalized_shape_and_leading_dims():
    x = torch.randn(2, 3, 4, 32, dtype=torch.bfloat16)
    w = torch.rand(4, 32, dtype=torch.bfloat16) + 0.5
    scale = torch.tensor([0.01])
    q = OPS.norm_rms_norm_static_quant_fwd(x, w, scale, [4, 32], 1e-6, torch.int8)
    flat = vllm_quant(vllm_normed(x.reshape(6, 128), w.reshape(128)), 1 / scale, torch.int8)
    same(q, flat.reshape(2, 3, 4, 32))


# ---- dynamic per-row scales ------------------------------------------------------------------------

@pytest.mark.parametrize("qdtype", QDTYPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dynamic_matches_vllm_formula(dtype, qdtype):
    x, _, w = inputs(dtype, 7, 384)
    x[3] *= 50  # rows of different ranges get different scales
    q, scales = OPS.norm_rms_norm_dynamic_quant_fwd(x, w, None, [384], 1e-6, qdtype)
    y = vllm_normed(x, w)
    ref_scales = vllm_scales(y, qdtype)
    assert scales.shape == (7, 1) and scales.dtype == torch.float32
    assert torch.equal(scales, ref_scales)
    same(q, vllm_quant(y, 1 / ref_scales, qdtype))
    # Each row's largest magnitude lands on qmax.
    qmax = 127 if qdtype == torch.int8 else 448
    assert torch.equal(q.float().abs().amax(-1), torch.full((7,), float(qmax)))


@pytest.mark.parametrize("qdtype", QDTYPES, ids=str)
def test_dynamic_scale_ub_and_the_scale_floor(qdtype):
    x, _, w = inputs(torch.bfloat16, 4, 64)
    x[1] = 0  # an all-zero row takes the floor scale
    ub = torch.tensor([0.5])
    q, scales = OPS.norm_rms_norm_dynamic_quant_fwd(x, w, ub, [64], 1e-6, qdtype)
    y = vllm_normed(x, w)
    ref = vllm_scales(y, qdtype, ub)
    assert torch.equal(scales, ref)
    floor = torch.finfo(torch.float32).eps if qdtype == torch.int8 else 1 / (448 * 512)
    assert scales[1].item() == pytest.approx(floor, rel=1e-7) and not q[1].float().any()
    assert (scales[[0, 2, 3]] == 0.5 / (127 if qdtype == torch.int8 else 448)).all()  # clipped by ub
    same(q, vllm_quant(y, 1 / ref, qdtype))


@pytest.mark.parametrize("qdtype", QDTYPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dynamic_fused_add_both_branches(dtype, qdtype):
    x, r, w = inputs(dtype, 3, 192)
    s = x + r
    q, scales, r_new = OPS.norm_fused_add_rms_norm_dynamic_quant_fwd(x, r, w, None, [192], 1e-6, qdtype)
    assert torch.equal(r_new, s)
    y = vllm_normed(s, w)
    assert torch.equal(scales, vllm_scales(y, qdtype))
    same(q, vllm_quant(y, 1 / scales, qdtype))
    q2, scales2 = OPS.norm_fused_add_rms_norm_dynamic_quant_fwd_writes_residual(x, r, w, None, [192], 1e-6, qdtype)
    assert torch.equal(r, s)
    same(q2, q)
    assert torch.equal(scales2, scales)


# ---- argument errors -------------------------------------------------------------------------------

def test_quant_dtype_must_be_fp8_or_int8():
    x, _, w = inputs(torch.bfloat16)
    with pytest.raises((RuntimeError, TypeError, ValueError),
                       match=r"tileops::norm_rms_norm_static_quant_fwd: .*quant_dtype"):
        OPS.norm_rms_norm_static_quant_fwd(x, w, torch.ones(1), [256], 1e-6, torch.float16)


def test_scale_must_be_one_float32():
    x, _, w = inputs(torch.bfloat16)
    with pytest.raises(RuntimeError, match=r"tileops::norm_rms_norm_static_quant_fwd: .*scale"):
        OPS.norm_rms_norm_static_quant_fwd(x, w, torch.ones(2), [256])
    with pytest.raises(TypeError, match=r"tileops::norm_rms_norm_static_quant_fwd: .*scale"):
        OPS.norm_rms_norm_static_quant_fwd(x, w, torch.ones(1, dtype=torch.float16), [256])


def test_weight_must_be_x_dtype():
    x, _, w = inputs(torch.bfloat16)
    with pytest.raises(TypeError, match=r"tileops::norm_rms_norm_dynamic_quant_fwd: .*weight"):
        OPS.norm_rms_norm_dynamic_quant_fwd(x, w.float(), None, [256])


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("dtype,n", [(torch.bfloat16, 32769), (torch.float32, 16385)], ids=["bf16", "f32"])
def test_rows_over_64_kb_are_refused_on_every_target(dtype, n, device):
    # The nvrtc kernel keeps a row in registers; the rule is the op's, so the reference and Meta agree.
    x = torch.ones(2, n, dtype=dtype, device=device)
    w = torch.ones(n, dtype=dtype, device=device)
    rule = r"shape rule 'prod\(normalized_shape\) \* elem_size\(x\) <= 65536' is violated"
    with pytest.raises(ValueError, match=r"tileops::norm_rms_norm_dynamic_quant_fwd: " + rule):
        OPS.norm_rms_norm_dynamic_quant_fwd(x, w, None, [n])
    with pytest.raises(ValueError, match=r"tileops::norm_fused_add_rms_norm_static_quant_fwd: " + rule):
        OPS.norm_fused_add_rms_norm_static_quant_fwd(x, x.clone(), w, torch.ones(1, device=device), [n])
    q, scales = OPS.norm_rms_norm_dynamic_quant_fwd(x[:, :n - 1], w[:n - 1], None, [n - 1])  # 64 KB is served
    assert q.shape == (2, n - 1) and scales.shape == (2, 1)


# ---- Meta, fake, opcheck ---------------------------------------------------------------------------

@pytest.mark.parametrize("qdtype", QDTYPES, ids=str)
def test_meta_and_fake_shapes_and_dtypes(qdtype, counters):
    x = torch.empty(2, 5, 64, device="meta", dtype=torch.bfloat16)
    w = torch.empty(64, device="meta", dtype=torch.bfloat16)
    one = torch.empty(1, device="meta")
    q = OPS.norm_rms_norm_static_quant_fwd(x, w, one, [64], 1e-6, qdtype)
    assert q.dtype == qdtype and q.shape == x.shape
    q, scales, r = OPS.norm_fused_add_rms_norm_dynamic_quant_fwd(x, x, w, None, [64], 1e-6, qdtype)
    assert q.dtype == qdtype and scales.shape == (2, 5, 1) and scales.dtype == torch.float32
    assert r.dtype == torch.bfloat16
    with FakeTensorMode():
        fx = torch.empty(3, 64, dtype=torch.float16)
        q, scales = OPS.norm_rms_norm_dynamic_quant_fwd(fx, torch.empty(64, dtype=torch.float16), None, [64], 1e-6,
                                                        qdtype)
        assert q.dtype == qdtype and scales.shape == (3, 1)
    assert counters()["kernel_builds"] == 0


@pytest.mark.parametrize("qdtype", QDTYPES, ids=str)
def test_opcheck(qdtype):
    x, r, w = inputs(torch.bfloat16, 4, 64)
    scale = torch.tensor([0.05])
    torch.library.opcheck(OPS.norm_rms_norm_static_quant_fwd.default, (x, w, scale, [64], 1e-6, qdtype))
    torch.library.opcheck(OPS.norm_fused_add_rms_norm_static_quant_fwd.default, (x, r, w, scale, [64], 1e-6, qdtype))
    torch.library.opcheck(OPS.norm_fused_add_rms_norm_static_quant_fwd_writes_residual.default,
                          (x, r.clone(), w, scale, [64], 1e-6, qdtype))
    torch.library.opcheck(OPS.norm_rms_norm_dynamic_quant_fwd.default, (x, w, scale, [64], 1e-6, qdtype))
    torch.library.opcheck(OPS.norm_fused_add_rms_norm_dynamic_quant_fwd.default, (x, r, w, None, [64], 1e-6, qdtype))
    torch.library.opcheck(OPS.norm_fused_add_rms_norm_dynamic_quant_fwd_writes_residual.default,
                          (x, r.clone(), w, None, [64], 1e-6, qdtype))


def test_compile_one_node():
    x, r, w = inputs(torch.bfloat16, 4, 64)

    def f(x, r, w):
        return OPS.norm_fused_add_rms_norm_dynamic_quant_fwd(x, r, w, None, [64], 1e-6, FP8)

    torch._dynamo.reset()
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(x, r, w)
    want = f(x, r, w)
    same(got[0], want[0])
    assert torch.equal(got[1], want[1]) and torch.equal(got[2], want[2])
