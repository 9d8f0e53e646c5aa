"""The LayerNorm composites (FusedAddLayerNormFwdOp, AdaLayerNormFwdOp, AdaLayerNormZeroFwdOp): eager
results equal their documented expressions (in x's dtype, step by step) bit for bit on the reference
target, tracing decomposes them into the sub-ops' operators, and their checks come from the manifest."""
import pytest
import torch
import torch._dynamo
from torch._dynamo.backends.common import aot_autograd

from support.reference import assert_close_rel
from tileops.norm import AdaLayerNormFwdOp, AdaLayerNormZeroFwdOp, FusedAddLayerNormFwdOp

OPS = torch.ops.tileops
F = torch.nn.functional
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def rand(*shape, dtype=torch.float32, seed=0, scale=1.0, shift=0.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale + shift).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("affine", ["same", "float32", "none", "weight"])
def test_fused_add_layer_norm_normalises_the_rounded_sum(dtype, affine):
    x, r = rand(3, 5, 96, dtype=dtype, seed=1, shift=2), rand(3, 5, 96, dtype=dtype, seed=2)
    wd = dtype if affine == "same" else torch.float32
    w = None if affine == "none" else rand(96, dtype=wd, seed=3) + 1
    b = None if affine in ("none", "weight") else rand(96, dtype=wd, seed=4)
    y, s = OPS.norm_fused_add_layer_norm_fwd(x, r, w, b, 1e-5)
    assert s.dtype == y.dtype == dtype
    assert torch.equal(s, x + r)  # the new residual: the eager sum in x's dtype
    assert torch.equal(y, OPS.norm_layer_norm_fwd(s, w, b, [96], 1e-5))  # bit for bit the sub-op
    ref = F.layer_norm(s.double(), [96], None if w is None else w.double(), None if b is None else b.double(), 1e-5)
    assert_close_rel(y, ref.to(dtype))
    y2, s2 = FusedAddLayerNormFwdOp(eps=1e-5)(x, r, w, b)
    assert torch.equal(y2, y) and torch.equal(s2, s)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_ada_layer_norm_is_the_eager_expression(dtype):
    x = rand(4, 7, 80, dtype=dtype, seed=1, scale=3, shift=1)
    scale, shift, gate = (rand(4, 7, 80, dtype=dtype, seed=s) for s in (2, 3, 4))
    want = F.layer_norm(x, [80], eps=1e-6) * scale + shift  # torch eager in x's dtype
    y = OPS.norm_ada_layer_norm_fwd(x, scale, shift, 1e-6)
    assert y.dtype == dtype and torch.equal(y, want)
    assert torch.equal(AdaLayerNormFwdOp(eps=1e-6)(x, scale, shift), want)
    assert torch.equal(OPS.norm_ada_layer_norm_zero_fwd(x, scale, shift, gate, 1e-6), gate * want)
    assert torch.equal(AdaLayerNormZeroFwdOp(eps=1e-6)(x, scale, shift, gate), gate * want)
    # close to the exact value too (three roundings in x's dtype)
    exact = gate.double() * (F.layer_norm(x.double(), [80], eps=1e-6) * scale.double() + shift.double())
    tol = {torch.float32: 1e-5, torch.bfloat16: 3e-2, torch.float16: 4e-3}[dtype]
    torch.testing.assert_close(OPS.norm_ada_layer_norm_zero_fwd(x, scale, shift, gate, 1e-6).double(), exact,
                               rtol=tol, atol=tol)


def test_eps_default_and_empty():
    x = rand(2, 64, seed=5)
    one = torch.ones_like(x)
    assert torch.equal(OPS.norm_ada_layer_norm_fwd(x, one, torch.zeros_like(x)), F.layer_norm(x, [64], eps=1e-5))
    e = torch.empty(0, 64)
    assert OPS.norm_ada_layer_norm_zero_fwd(e, e, e, e).shape == (0, 64)
    y, s = OPS.norm_fused_add_layer_norm_fwd(e, e, None, None)
    assert y.shape == s.shape == (0, 64)


def _targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("name,make,subs", [
    ("fused_add", lambda: (FusedAddLayerNormFwdOp(), (rand(8, 64, seed=1), rand(8, 64, seed=2), rand(64, seed=3),
                                                      rand(64, seed=4))),
     [OPS.elementwise_add_fwd.default, OPS.norm_layer_norm_fwd.default]),
    ("ada", lambda: (AdaLayerNormFwdOp(), tuple(rand(8, 64, seed=s) for s in range(3))),
     [OPS.norm_layer_norm_fwd.default, OPS.elementwise_mul_fwd.default, OPS.elementwise_add_fwd.default]),
    ("ada_zero", lambda: (AdaLayerNormZeroFwdOp(), tuple(rand(8, 64, seed=s) for s in range(4))),
     [OPS.norm_layer_norm_fwd.default, OPS.elementwise_mul_fwd.default, OPS.elementwise_add_fwd.default]),
])
def test_tracing_decomposes_into_the_sub_ops(name, make, subs):
    torch._dynamo.reset()
    graphs = []

    def fw_compiler(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    op, args = make()
    fn = torch.compile(lambda *a: op(*a), fullgraph=True, dynamic=True, backend=aot_autograd(fw_compiler=fw_compiler))
    got, want = fn(*args), op(*args)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert torch.equal(g, w)
    targets = _targets(graphs[0])
    for sub in subs:
        assert sub in targets, targets
    assert not any("fused_add_layer_norm" in str(t) or "ada_layer_norm" in str(t) for t in targets), targets
    assert op.compile_op_names == ()


def test_export_runs_and_decomposes_into_the_sub_ops():
    class M(torch.nn.Module):
        def forward(self, x, scale, shift, gate):
            return OPS.norm_ada_layer_norm_zero_fwd(x, scale, shift, gate, 1e-6)

    args = tuple(rand(4, 32, seed=s) for s in range(4))
    ep = torch.export.export(M(), args)
    assert torch.equal(ep.module()(*args), M()(*args))
    # export's training IR may keep the composite (CompositeImplicitAutograd); decomposed, the sub-ops remain
    names = [str(n.target) for n in ep.run_decompositions().graph.nodes if n.op == "call_function"]
    assert "tileops.norm_layer_norm_fwd.default" in names and not any("ada_layer_norm" in n for n in names), names


def test_checks_name_the_composite():
    x = rand(4, 32)
    with pytest.raises(RuntimeError, match=r"tileops::norm_ada_layer_norm_fwd: 'scale' must have the shape of 'x'"):
        OPS.norm_ada_layer_norm_fwd(x, x[:, :16], x)
    with pytest.raises(TypeError, match=r"tileops::norm_ada_layer_norm_zero_fwd: 'gate' must have the dtype of 'x'"):
        OPS.norm_ada_layer_norm_zero_fwd(x, x, x, x.double())
    with pytest.raises(RuntimeError, match=r"tileops::norm_fused_add_layer_norm_fwd: 'weight' must have shape \[n\]"):
        OPS.norm_fused_add_layer_norm_fwd(x, x, torch.ones(31), None)
    with pytest.raises(TypeError, match=r"tileops::norm_fused_add_layer_norm_fwd: the dtypes of \(x, weight, bias\)"):
        OPS.norm_fused_add_layer_norm_fwd(x.bfloat16(), x.bfloat16(), torch.ones(32), torch.ones(32).bfloat16())
