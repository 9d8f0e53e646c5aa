"""RMSNormBwdOp and LayerNormBwdOp on CPU (reference target): every branch against torch autograd of
F.rms_norm / F.layer_norm in float64, argument errors, Meta/fake shapes, opcheck."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from tileops.norm import LayerNormBwdOp, RMSNormBwdOp

F = torch.nn.functional
RMS = torch.ops.tileops.norm_rms_norm_bwd
LN = torch.ops.tileops.norm_layer_norm_bwd

# Branch -> gradients it returns, in order.
RMS_BRANCHES = {"norm_rms_norm_bwd": ("dx", "dweight"), "norm_rms_norm_bwd_without_dweight": ("dx",)}
LN_BRANCHES = {
    "norm_layer_norm_bwd": ("dx", "dweight", "dbias"),
    "norm_layer_norm_bwd_without_dbias": ("dx", "dweight"),
    "norm_layer_norm_bwd_without_dweight": ("dx", "dbias"),
    "norm_layer_norm_bwd_without_dbias_without_dweight": ("dx",),
}
# Relative to the largest reference magnitude: one rounding to the dtype plus float32 arithmetic.
TOL = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
SHAPES = [((0, 33), [33]), ((1, 33), [33]), ((5, 3, 33), [33]), ((6, 4, 7), [4, 7])]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def truth(kind, dy, x, w, ns, eps):
    """torch.autograd.grad of the torch functional in float64: {'dx', 'dweight', 'dbias'}."""
    xd = x.double().requires_grad_()
    wd = (w.double() if w is not None else torch.ones(ns, dtype=torch.float64)).requires_grad_()
    bd = torch.zeros(ns, dtype=torch.float64, requires_grad=True)
    if kind == "rms":
        y = F.rms_norm(xd, ns, wd, torch.finfo(torch.float32).eps if eps is None else eps)
        dx, dw = torch.autograd.grad(y, (xd, wd), dy.double())
        return {"dx": dx, "dweight": dw}
    y = F.layer_norm(xd, ns, wd, bd, eps)
    dx, dw, db = torch.autograd.grad(y, (xd, wd, bd), dy.double())
    return {"dx": dx, "dweight": dw, "dbias": db}


def check(got, ref, dtype):
    assert got.shape == ref.shape and got.dtype == dtype and got.is_contiguous()
    if ref.numel() == 0:
        return
    assert torch.isfinite(got).all()
    tol = TOL[dtype]
    torch.testing.assert_close(got.double(), ref, rtol=tol, atol=tol * max(ref.abs().max().item(), 1e-6))


def make(shape, ns, dtype, weight, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(dtype)
    dy = torch.randn(shape, generator=g).to(dtype)
    w = (torch.randn(ns, generator=g) + 1).to(dtype) if weight else None
    return dy, x, w


@pytest.mark.parametrize("branch", sorted(RMS_BRANCHES))
@pytest.mark.parametrize("weight", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,ns", SHAPES)
def test_rms_norm_bwd_matches_autograd(branch, weight, dtype, shape, ns):
    dy, x, w = make(shape, ns, dtype, weight)
    out = getattr(torch.ops.tileops, branch)(dy, x, w, ns, None)
    out = out if isinstance(out, tuple) else (out,)
    ref = truth("rms", dy, x, w, ns, None)
    assert len(out) == len(RMS_BRANCHES[branch])
    for name, got in zip(RMS_BRANCHES[branch], out):
        check(got, ref[name], dtype)


@pytest.mark.parametrize("branch", sorted(LN_BRANCHES))
@pytest.mark.parametrize("weight", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,ns", SHAPES)
def test_layer_norm_bwd_matches_autograd(branch, weight, dtype, shape, ns):
    dy, x, w = make(shape, ns, dtype, weight)
    out = getattr(torch.ops.tileops, branch)(dy, x, w, ns, 1e-5)
    out = out if isinstance(out, tuple) else (out,)
    ref = truth("ln", dy, x, w, ns, 1e-5)
    assert len(out) == len(LN_BRANCHES[branch])
    for name, got in zip(LN_BRANCHES[branch], out):
        check(got, ref[name], dtype)


@pytest.mark.parametrize("eps", [None, 1e-6, 0.5])
def test_rms_norm_bwd_eps(eps):
    # Tiny inputs make eps matter; None is finfo(float32).eps, as F.rms_norm.
    dy, x, w = make((4, 64), [64], torch.float32, True)
    x = x * 1e-3
    dx, dw = RMSNormBwdOp((64,), eps=eps)(dy, x, w)
    ref = truth("rms", dy, x, w, [64], eps)
    check(dx, ref["dx"], torch.float32)
    check(dw, ref["dweight"], torch.float32)


@pytest.mark.parametrize("eps", [1e-5, 0.25])
def test_layer_norm_bwd_eps_and_default(eps):
    assert LN.default._schema.arguments[4].default_value == pytest.approx(1e-5)
    dy, x, w = make((4, 64), [64], torch.float32, True)
    dx, dw, db = LayerNormBwdOp((64,), eps=eps)(dy, x, w)
    ref = truth("ln", dy, x, w, [64], eps)
    for got, name in ((dx, "dx"), (dw, "dweight"), (db, "dbias")):
        check(got, ref[name], torch.float32)


@pytest.mark.parametrize("kind", ["rms", "ln"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_non_contiguous_inputs(kind, dtype):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(33, 10, generator=g).to(dtype).t()          # (10, 33), transposed
    dy = torch.randn(10, 66, generator=g).to(dtype)[:, ::2]      # (10, 33), strided
    w = (torch.randn(66, generator=g) + 1).to(dtype)[1::2]
    assert not (x.is_contiguous() or dy.is_contiguous() or w.is_contiguous())
    op = RMS if kind == "rms" else LN
    eps = None if kind == "rms" else 1e-5
    dx, dw = op(dy, x, w, [33], eps)[:2]
    ref = truth(kind, dy, x, w, [33], eps)
    check(dx, ref["dx"], dtype)
    check(dw, ref["dweight"], dtype)
    # Same numbers as from contiguous copies.
    dx2, dw2 = op(dy.contiguous(), x.contiguous(), w.contiguous(), [33], eps)[:2]
    assert torch.equal(dx, dx2) and torch.equal(dw, dw2)


def test_weight_none_dweight_is_the_grad_a_ones_weight_would_get():
    dy, x, _ = make((7, 16), [16], torch.float32, False)
    for op, eps in ((RMS, None), (LN, 1e-5)):
        no_w = op(dy, x, None, [16], eps)
        ones = op(dy, x, torch.ones(16), [16], eps)
        for a, b in zip(no_w, ones):
            torch.testing.assert_close(a, b)


def test_bitwise_equal_run_to_run():
    dy, x, w = make((64, 256), [256], torch.bfloat16, True)
    for op, eps in ((RMS, None), (LN, 1e-5)):
        a, b = op(dy, x, w, [256], eps), op(dy, x, w, [256], eps)
        assert all(torch.equal(p, q) for p, q in zip(a, b))


def test_op_classes_call_the_full_branch():
    assert RMSNormBwdOp.compile_op_names == ("tileops::norm_rms_norm_bwd", "tileops::norm_rms_norm_bwd_without_dweight")
    assert len(LayerNormBwdOp.compile_op_names) == 4
    dy, x, w = make((3, 8), [8], torch.float32, True)
    assert len(RMSNormBwdOp(8)(dy, x, w)) == 2
    assert len(LayerNormBwdOp(8)(dy, x)) == 3


def test_schemas():
    assert str(RMS.default._schema) == (
        "tileops::norm_rms_norm_bwd(Tensor dy, Tensor x, Tensor? weight, SymInt[] normalized_shape, float? eps=None, "
        "*, str? target=None) -> (Tensor, Tensor)")
    assert str(torch.ops.tileops.norm_layer_norm_bwd_without_dbias_without_dweight.default._schema) == (
        "tileops::norm_layer_norm_bwd_without_dbias_without_dweight(Tensor dy, Tensor x, Tensor? weight, "
        "SymInt[] normalized_shape, float eps=1.0000000000000001e-05, *, str? target=None) -> Tensor")


# ---- argument errors: each names the operator, the argument and the rule --------------------------

@pytest.mark.parametrize("op,name", [(RMS, "tileops::norm_rms_norm_bwd"), (LN, "tileops::norm_layer_norm_bwd")])
def test_mismatched_dy_x_shapes(op, name):
    with pytest.raises(RuntimeError, match=rf"{name}: 'x' must have the shape of 'dy' \[4, 8\], got \[4, 9\]"):
        op(torch.randn(4, 8), torch.randn(4, 9), None, [8])


@pytest.mark.parametrize("op,name", [(RMS, "tileops::norm_rms_norm_bwd"), (LN, "tileops::norm_layer_norm_bwd")])
def test_weight_shape(op, name):
    with pytest.raises(RuntimeError, match=rf"{name}: 'weight' must have shape \[\*normalized_shape\] "
                                           r"\(normalized_shape=\[8\]\), got \[9\]"):
        op(torch.randn(4, 8), torch.randn(4, 8), torch.randn(9), [8])


def test_dy_trailing_dims_and_dtypes():
    with pytest.raises(RuntimeError, match=r"tileops::norm_rms_norm_bwd: 'dy' must have shape \[\.\.\., "
                                           r"\*normalized_shape\] \(normalized_shape=\[8\]\), got \[4, 6\]"):
        RMS(torch.randn(4, 6), torch.randn(4, 6), None, [8])
    with pytest.raises(TypeError, match=r"tileops::norm_layer_norm_bwd: 'x' must have the dtype of 'dy'"):
        LN(torch.randn(4, 8), torch.randn(4, 8, dtype=torch.float16), None, [8])
    with pytest.raises(TypeError, match=r"tileops::norm_rms_norm_bwd: 'dy' must have dtype float16 \| bfloat16 \| "
                                        r"float32, got float64"):
        RMS(torch.randn(4, 8, dtype=torch.float64), torch.randn(4, 8, dtype=torch.float64), None, [8])
    with pytest.raises(ValueError, match=r"tileops::norm_layer_norm_bwd_without_dweight: shape rule "
                                         r"'len\(normalized_shape\) >= 1' is violated"):
        torch.ops.tileops.norm_layer_norm_bwd_without_dweight(torch.randn(4, 8), torch.randn(4, 8), None, [])


# ---- Meta / fake ----------------------------------------------------------------------------------

def test_meta_shapes_every_branch():
    dy = torch.empty(5, 4, 7, device="meta", dtype=torch.bfloat16)
    w = torch.empty(4, 7, device="meta", dtype=torch.bfloat16)
    for branches, eps in ((RMS_BRANCHES, None), (LN_BRANCHES, 1e-5)):
        for branch, names in branches.items():
            out = getattr(torch.ops.tileops, branch)(dy, dy, w, [4, 7], eps)
            out = out if isinstance(out, tuple) else (out,)
            assert len(out) == len(names)
            for name, t in zip(names, out):
                assert t.device.type == "meta" and t.dtype == torch.bfloat16
                assert t.shape == ((5, 4, 7) if name == "dx" else (4, 7))


def test_fake_outputs_are_contiguous_for_strided_inputs():
    with FakeTensorMode():
        x = torch.empty(33, 10).t()
        dy = torch.empty(10, 33)
        dx, dw, db = LN(dy, x, None, [33])
        assert dx.shape == (10, 33) and dx.is_contiguous() and dw.shape == (33,) and db.shape == (33,)


# ---- opcheck --------------------------------------------------------------------------------------

@pytest.mark.parametrize("branch", sorted(RMS_BRANCHES) + sorted(LN_BRANCHES))
@pytest.mark.parametrize("shape,ns,weight", [((4, 16), [16], True), ((2, 3, 8), [3, 8], False), ((0, 16), [16], True)])
def test_opcheck(branch, shape, ns, weight):
    dy, x, w = make(shape, ns, torch.float32, weight)
    eps = None if branch.startswith("norm_rms") else 1e-5
    torch.library.opcheck(getattr(torch.ops.tileops, branch).default, (dy, x, w, ns, eps))
