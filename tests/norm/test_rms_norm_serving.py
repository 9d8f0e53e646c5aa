"""The serving forms of RMSNorm on CPU (reference target): a float32 weight beside a 16-bit x (also
for LayerNorm and both backward ops), the Gemma form y = x_normed * (1 + w), and the out= branch;
their checks, Meta kernels and compile."""
import pytest
import torch
import torch._dynamo
from torch._subclasses.fake_tensor import FakeTensorMode

import tileops
from support.reference import assert_close_rel, rms_norm_ref

OPS = torch.ops.tileops
F = torch.nn.functional
HALF = [torch.bfloat16, torch.float16]


def gemma_ref(x, ns, w, eps=1e-6):
    return rms_norm_ref(x, ns, 1 + w.double(), eps)


# ---- float32 weight --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_fused_add_takes_a_float32_weight_and_returns_x_dtype(dtype):
    x, r = torch.randn(6, 96, dtype=dtype), torch.randn(6, 96, dtype=dtype)
    w = torch.randn(96) * 3  # float32, most values not representable in dtype
    y, s = OPS.norm_fused_add_rms_norm_fwd(x, r, w, [96], 1e-6)
    assert y.dtype == s.dtype == dtype
    assert torch.equal(s, x + r)
    assert_close_rel(y, rms_norm_ref(x + r, [96], w, 1e-6))
    # The weight is used in float32: the same call with the weight rounded to x's dtype differs.
    y_rounded, _ = OPS.norm_fused_add_rms_norm_fwd(x, r, w.to(dtype), [96], 1e-6)
    assert not torch.equal(y, y_rounded)


def test_fused_add_float32_weight_in_place_and_eps_none():
    x, r = torch.randn(4, 64, dtype=torch.bfloat16), torch.randn(4, 64, dtype=torch.bfloat16)
    w = torch.randn(64)
    s = x + r
    y = OPS.norm_fused_add_rms_norm_fwd_writes_residual(x, r, w, [64])
    assert torch.equal(r, s)
    assert_close_rel(y, rms_norm_ref(s, [64], w))  # eps=None: finfo(float32).eps


@pytest.mark.parametrize("x_dtype,w_dtype", [(torch.bfloat16, torch.float16), (torch.float16, torch.bfloat16),
                                             (torch.float32, torch.bfloat16)])
def test_other_weight_dtype_mixes_are_refused(x_dtype, w_dtype):
    x = torch.randn(2, 8, dtype=x_dtype)
    with pytest.raises(TypeError, match=r"tileops::norm_fused_add_rms_norm_fwd: .*x, weight"):
        OPS.norm_fused_add_rms_norm_fwd(x, x.clone(), torch.randn(8, dtype=w_dtype), [8])
    with pytest.raises(TypeError, match=r"tileops::norm_gemma_rms_norm_fwd: .*x, weight"):
        OPS.norm_gemma_rms_norm_fwd(x, torch.randn(8, dtype=w_dtype), [8])


def layer_norm_ref(x, ns, w=None, b=None, eps=1e-5):
    """F.layer_norm in float64 from the same values, rounded to x's dtype."""
    y = F.layer_norm(x.double(), ns, None if w is None else w.double(), None if b is None else b.double(), eps)
    return y.to(x.dtype)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_rms_norm_takes_a_float32_weight_and_returns_x_dtype(dtype):
    x = torch.randn(5, 3, 96, dtype=dtype)
    w = torch.randn(96) * 3
    y = OPS.norm_rms_norm_fwd(x, w, [96], 1e-6)
    assert y.dtype == dtype
    assert_close_rel(y, rms_norm_ref(x, [96], w, 1e-6))
    assert not torch.equal(y, OPS.norm_rms_norm_fwd(x, w.to(dtype), [96], 1e-6))  # the weight stays float32
    out = torch.empty_like(x)
    OPS.norm_rms_norm_fwd_out(x, w, out, [96], 1e-6)
    assert torch.equal(out, y)


@pytest.mark.parametrize("weight,bias", [(True, True), (True, False), (False, True)], ids=["wb", "w", "b"])
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_layer_norm_takes_float32_weight_and_bias(dtype, weight, bias):
    x = torch.randn(4, 7, 80, dtype=dtype) + 2
    w = torch.randn(80) * 3 if weight else None
    b = torch.randn(80) * 3 if bias else None
    y = OPS.norm_layer_norm_fwd(x, w, b, [80], 1e-5)
    assert y.dtype == dtype
    assert_close_rel(y, layer_norm_ref(x, [80], w, b))
    rounded = OPS.norm_layer_norm_fwd(x, None if w is None else w.to(dtype), None if b is None else b.to(dtype),
                                      [80], 1e-5)
    assert not torch.equal(y, rounded)


@pytest.mark.parametrize("x_dtype,w_dtype", [(torch.bfloat16, torch.float16), (torch.float32, torch.bfloat16)])
def test_rms_and_layer_norm_refuse_other_weight_mixes(x_dtype, w_dtype):
    x = torch.randn(2, 8, dtype=x_dtype)
    with pytest.raises(TypeError, match=r"tileops::norm_rms_norm_fwd: .*x, weight"):
        OPS.norm_rms_norm_fwd(x, torch.randn(8, dtype=w_dtype), [8])
    with pytest.raises(TypeError, match=r"tileops::norm_layer_norm_fwd: .*x, weight, bias"):
        OPS.norm_layer_norm_fwd(x, torch.randn(8, dtype=w_dtype), None, [8])
    # weight and bias both float32 or both x's dtype, as torch's mixed-type LayerNorm takes them
    with pytest.raises(TypeError, match=r"tileops::norm_layer_norm_fwd: .*x, weight, bias"):
        OPS.norm_layer_norm_fwd(torch.randn(2, 8, dtype=torch.bfloat16), torch.randn(8),
                                torch.randn(8, dtype=torch.bfloat16), [8])


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_backward_ops_take_a_float32_weight_and_give_float32_weight_grads(dtype):
    x, dy = torch.randn(6, 64, dtype=dtype), torch.randn(6, 64, dtype=dtype)
    w = torch.randn(64) + 1
    dx, dw = OPS.norm_rms_norm_bwd(dy, x, w, [64])
    assert dx.dtype == dtype and dw.dtype == torch.float32
    xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
    want_dx, want_dw = torch.autograd.grad(F.rms_norm(xd, [64], wd, torch.finfo(torch.float32).eps), (xd, wd),
                                           dy.double())
    assert_close_rel(dx, want_dx.to(dtype))
    torch.testing.assert_close(dw, want_dw.float(), rtol=1e-5, atol=1e-5 * want_dw.abs().max().item())
    dx, dw, db = OPS.norm_layer_norm_bwd(dy, x, w, [64], 1e-5)
    assert dx.dtype == dtype and dw.dtype == db.dtype == torch.float32
    bd = torch.zeros(64, dtype=torch.float64, requires_grad=True)
    want = torch.autograd.grad(F.layer_norm(xd, [64], wd, bd, 1e-5), (xd, wd, bd), dy.double())
    assert_close_rel(dx, want[0].to(dtype))
    for got, ref in zip((dw, db), want[1:]):
        torch.testing.assert_close(got, ref.float(), rtol=1e-5, atol=1e-5 * ref.abs().max().item())
    # without a weight the gradients are dy's dtype, as before
    assert OPS.norm_layer_norm_bwd(dy, x, None, [64], 1e-5)[2].dtype == dtype


def test_meta_gives_float32_weight_grads_and_x_dtype_outputs():
    x = torch.empty(4, 64, device="meta", dtype=torch.bfloat16)
    w = torch.empty(64, device="meta")
    assert OPS.norm_rms_norm_fwd(x, w, [64]).dtype == torch.bfloat16
    assert OPS.norm_layer_norm_fwd(x, w, w, [64]).dtype == torch.bfloat16
    assert [t.dtype for t in OPS.norm_rms_norm_bwd(x, x, w, [64])] == [torch.bfloat16, torch.float32]
    assert [t.dtype for t in OPS.norm_layer_norm_bwd(x, x, w, [64])] == [torch.bfloat16, torch.float32, torch.float32]
    assert [t.dtype for t in OPS.norm_layer_norm_bwd(x, x, None, [64])] == [torch.bfloat16] * 3


# ---- Gemma form ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,w_dtype", [(torch.bfloat16, torch.float32), (torch.bfloat16, torch.bfloat16),
                                           (torch.float16, torch.float32), (torch.float32, torch.float32)])
def test_gemma_scales_by_one_plus_weight(dtype, w_dtype):
    x = torch.randn(3, 5, 128, dtype=dtype)
    w = (torch.randn(128) * 0.5).to(w_dtype)
    y = OPS.norm_gemma_rms_norm_fwd(x, w, [128])
    assert y.dtype == dtype
    assert_close_rel(y, gemma_ref(x, [128], w))
    # A zero Gemma weight is the plain norm.
    z = OPS.norm_gemma_rms_norm_fwd(x, torch.zeros(128, dtype=w_dtype), [128], 1e-6)
    torch.testing.assert_close(z, F.rms_norm(x, [128], None, 1e-6), rtol=0, atol=0)


def test_gemma_one_plus_weight_is_formed_in_float32():
    # bfloat16 cannot hold 1 + 2^-8: had 1 + w been rounded to x's dtype, y would be the plain norm.
    x = torch.randn(8, 64, dtype=torch.bfloat16)
    w = torch.full((64,), 2.0 ** -8, dtype=torch.bfloat16)
    y = OPS.norm_gemma_rms_norm_fwd(x, w, [64])
    xf = x.float()
    normed = xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + 1e-6)
    assert torch.equal(y, (normed * (w.float() + 1.0)).to(torch.bfloat16))
    assert not torch.equal(y, normed.to(torch.bfloat16))


@pytest.mark.parametrize("dtype", HALF + [torch.float32], ids=str)
def test_gemma_fused_add_both_branches(dtype):
    x, r = torch.randn(4, 3, 48, dtype=dtype), torch.randn(4, 3, 48, dtype=dtype)
    w = torch.randn(48) * 0.3
    s = x + r
    y, r_new = OPS.norm_gemma_fused_add_rms_norm_fwd(x, r, w, [48])
    assert torch.equal(r_new, s)
    assert_close_rel(y, gemma_ref(s, [48], w))  # the rounded sum is normalised
    y2 = OPS.norm_gemma_fused_add_rms_norm_fwd_writes_residual(x, r, w, [48])
    assert torch.equal(r, s) and torch.equal(y2, y)


def test_gemma_weight_is_required():
    with pytest.raises((RuntimeError, TypeError), match=r"weight"):
        OPS.norm_gemma_rms_norm_fwd(torch.randn(2, 8), None, [8])


# ---- out= ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", HALF + [torch.float32], ids=str)
def test_rms_norm_out_buffer_gets_the_result(dtype):
    x, w = torch.randn(5, 64, dtype=dtype), torch.randn(64, dtype=dtype)
    out = torch.full((5, 64), 7.0, dtype=dtype)
    ptr = out.data_ptr()
    assert OPS.norm_rms_norm_fwd_out(x, w, out, [64], 1e-5) is None
    assert out.data_ptr() == ptr
    assert torch.equal(out, OPS.norm_rms_norm_fwd(x, w, [64], 1e-5))


def test_rms_norm_non_contiguous_out():
    x = torch.randn(6, 32)
    storage = torch.full((32, 12), 7.0)
    out = storage.t()[::2]
    assert not out.is_contiguous()
    OPS.norm_rms_norm_fwd_out(x, None, out, [32])
    assert torch.equal(out, F.rms_norm(x, [32]))
    assert torch.equal(storage.t()[1::2], torch.full((6, 32), 7.0))


def test_rms_norm_wrong_out_is_a_clear_error():
    prefix = r"tileops::norm_rms_norm_fwd_out: 'out' must "
    x = torch.randn(6, 32)
    with pytest.raises(RuntimeError, match=prefix + r"have shape \[6, 32\], got \[6, 31\]"):
        OPS.norm_rms_norm_fwd_out(x, None, torch.empty(6, 31), [32])
    with pytest.raises(TypeError, match=prefix + r"have dtype float32, got bfloat16"):
        OPS.norm_rms_norm_fwd_out(x, None, torch.empty(6, 32, dtype=torch.bfloat16), [32])


def test_schemas():
    assert "Tensor(z!) out" in str(OPS.norm_rms_norm_fwd_out.default._schema)
    entry = next(e for e in tileops.op_table() if e["class"] == "RMSNormFwdOp")
    assert "tileops::norm_rms_norm_fwd_out" in entry["compile_op_names"]
    s = str(OPS.norm_gemma_fused_add_rms_norm_fwd_writes_residual.default._schema)
    assert "Tensor(a!) residual" in s and "Tensor weight," in s and "float eps=" in s


# ---- Meta, opcheck, compile ------------------------------------------------------------------------

def test_meta_and_fake_keep_x_dtype_with_a_float32_weight(counters):
    x = torch.empty(4, 64, device="meta", dtype=torch.bfloat16)
    w = torch.empty(64, device="meta", dtype=torch.float32)
    y, s = OPS.norm_fused_add_rms_norm_fwd(x, x, w, [64])
    assert y.dtype == s.dtype == torch.bfloat16
    assert OPS.norm_gemma_rms_norm_fwd(x, w, [64]).dtype == torch.bfloat16
    with FakeTensorMode():
        fx = torch.empty(4, 64, dtype=torch.float16)
        assert OPS.norm_gemma_fused_add_rms_norm_fwd(fx, fx, torch.empty(64), [64])[0].dtype == torch.float16
        assert OPS.norm_rms_norm_fwd_out(fx, None, torch.empty(4, 64, dtype=torch.float16), [64]) is None
    assert counters()["kernel_builds"] == 0


def _opcheck_cases():
    bf = torch.bfloat16

    def xw(m=3, n=16):
        return torch.randn(m, n, dtype=bf), torch.randn(m, n, dtype=bf), torch.randn(n)
    return [
        ("fused_f32w", OPS.norm_fused_add_rms_norm_fwd, lambda: (*xw(), [16], None)),
        ("fused_f32w_writes", OPS.norm_fused_add_rms_norm_fwd_writes_residual, lambda: (*xw(), [16], None)),
        ("gemma", OPS.norm_gemma_rms_norm_fwd, lambda: (xw()[0], xw()[2], [16], 1e-6)),
        ("gemma_fused", OPS.norm_gemma_fused_add_rms_norm_fwd, lambda: (*xw(), [16], 1e-6)),
        ("gemma_fused_writes", OPS.norm_gemma_fused_add_rms_norm_fwd_writes_residual, lambda: (*xw(), [16], 1e-6)),
        ("rms_out", OPS.norm_rms_norm_fwd_out,
         lambda: (torch.randn(3, 16), torch.randn(16), torch.empty(3, 16), [16], None)),
        ("rms_f32w", OPS.norm_rms_norm_fwd, lambda: (xw()[0], xw()[2], [16], None)),
        ("layer_f32wb", OPS.norm_layer_norm_fwd, lambda: (xw()[0], xw()[2], xw()[2], [16], 1e-5)),
        ("rms_bwd_f32w", OPS.norm_rms_norm_bwd, lambda: (xw()[0], xw()[1], xw()[2], [16], None)),
        ("layer_bwd_f32w", OPS.norm_layer_norm_bwd, lambda: (xw()[0], xw()[1], xw()[2], [16], 1e-5)),
    ]


@pytest.mark.parametrize("name,op,make", _opcheck_cases(), ids=[c[0] for c in _opcheck_cases()])
def test_opcheck(name, op, make):
    torch.library.opcheck(op.default, make())


def test_gemma_fused_in_place_and_out_branch_under_compile_match_eager():
    torch._dynamo.reset()

    def block(x, r, w, out):
        y = OPS.norm_gemma_fused_add_rms_norm_fwd_writes_residual(x, r, w, [32])
        OPS.norm_rms_norm_fwd_out(y, None, out, [32])
        return out * 2

    x, w = torch.randn(4, 32, dtype=torch.bfloat16), torch.randn(32)
    r_eager = torch.randn(4, 32, dtype=torch.bfloat16)
    r_comp = r_eager.clone()
    o_eager, o_comp = torch.empty(4, 32, dtype=torch.bfloat16), torch.empty(4, 32, dtype=torch.bfloat16)
    expected = block(x, r_eager, w, o_eager)
    got = torch.compile(block, fullgraph=True)(x, r_comp, w, o_comp)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(r_comp, r_eager)
    torch.testing.assert_close(o_comp, o_eager)
