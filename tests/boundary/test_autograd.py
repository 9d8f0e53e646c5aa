"""Autograd through boundary ops.

Off (the default): grad-requiring inputs under grad mode are a clear error (no silent graph drop).
On (tileops.enable_autograd): a forward whose manifest entry names a backward op (RMSNormFwdOp ->
RMSNormBwdOp, LayerNormFwdOp -> LayerNormBwdOp) records a graph whose backward is that op.
"""
import os
import subprocess
import sys

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import AotEagerAndRecordGraphs
from torch.utils._python_dispatch import TorchDispatchMode

import tileops
from tileops.norm import LayerNormFwdOp, RMSNormFwdOp

OP = torch.ops.tileops.norm_rms_norm_fwd
LN = torch.ops.tileops.norm_layer_norm_fwd
F = torch.nn.functional


@pytest.fixture
def pairing():
    prev = tileops.enable_autograd(True)
    yield
    tileops.enable_autograd(prev)


@pytest.fixture
def no_pairing():
    prev = tileops.enable_autograd(False)
    yield
    tileops.enable_autograd(prev)


class Calls(TorchDispatchMode):
    """Records the tileops operators that reach the Python dispatch key (forward and backward)."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "tileops":
            self.seen.append((func.__name__.split(".")[0], dict(kwargs or {})))
        return func(*args, **(kwargs or {}))


def leaf(*shape, dtype=torch.float32, requires_grad=True, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g).to(dtype).requires_grad_(requires_grad)


# ---- off ------------------------------------------------------------------------------------------

@pytest.mark.skipif(os.environ.get("TILEOPS_AUTOGRAD") == "1", reason="pairing switched on from the environment")
def test_off_by_default():
    assert tileops.autograd_enabled() is False


def test_requires_grad_under_grad_mode_is_an_error(no_pairing):
    w = torch.randn(8, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"tileops::norm_rms_norm_fwd: an input requires grad, but this op has "
                                           r"no autograd formula"):
        OP(torch.randn(2, 8), w, [8])


def test_the_error_of_a_paired_op_says_how_to_switch_it_on(no_pairing):
    with pytest.raises(RuntimeError, match=r"pairing with tileops::norm_layer_norm_bwd: tileops.enable_autograd"):
        LN(torch.randn(2, 8, requires_grad=True), None, None, [8])


def test_unpaired_op_keeps_the_plain_error(pairing):
    with pytest.raises(RuntimeError, match=r"tileops::activation_relu_fwd: an input requires grad, but this op has "
                                           r"no autograd formula") as e:
        torch.ops.tileops.activation_relu_fwd(torch.randn(4, requires_grad=True))
    assert "enable_autograd" not in str(e.value)


def test_no_grad_and_inference_mode_work():
    w = torch.randn(8, requires_grad=True)
    x = torch.randn(2, 8)
    with torch.no_grad():
        y = OP(x, w, [8])
    assert not y.requires_grad
    with torch.inference_mode():
        torch.testing.assert_close(OP(x, w, [8]), torch.nn.functional.rms_norm(x, [8], w))


def test_environment_variable_switches_it_on_at_load():
    code = "import tileops; tileops.load(); print(tileops.autograd_enabled())"
    env = dict(os.environ, TILEOPS_AUTOGRAD="1", PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.stdout.strip() == "True", out.stderr


# ---- on: eager ------------------------------------------------------------------------------------

def grads_of(fn, inputs, dy):
    live = [t for t in inputs if t is not None and t.requires_grad]
    return torch.autograd.grad(fn(*inputs), live, dy)


def assert_grads_close(got, want, tol=1e-5):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        scale = w.abs().max().item() if w.numel() else 1.0
        torch.testing.assert_close(g, w, rtol=tol, atol=tol * max(scale, 1.0))


@pytest.mark.parametrize("shape,ns", [((4, 16), [16]), ((2, 3, 5, 7), [5, 7]), ((1, 33), [33]), ((0, 8), [8])])
@pytest.mark.parametrize("weight", [True, False])
def test_rms_norm_grads_match_torch(pairing, shape, ns, weight):
    x = leaf(*shape)
    w = leaf(*ns) if weight else None
    dy = torch.randn(shape)
    got = grads_of(lambda x, w: OP(x, w, ns), (x, w), dy)
    want = grads_of(lambda x, w: F.rms_norm(x, ns, w), (x, w), dy)
    assert_grads_close(got, want)


@pytest.mark.parametrize("weight,bias", [(True, True), (True, False), (False, True), (False, False)])
def test_layer_norm_grads_match_torch(pairing, weight, bias):
    x, dy = leaf(3, 5, 24), torch.randn(3, 5, 24)
    w = leaf(24, seed=1) if weight else None
    b = leaf(24, seed=2) if bias else None
    got = grads_of(lambda x, w, b: LN(x, w, b, [24], 1e-5), (x, w, b), dy)
    want = grads_of(lambda x, w, b: F.layer_norm(x, [24], w, b, 1e-5), (x, w, b), dy)
    assert_grads_close(got, want)


def test_backward_and_op_classes(pairing):
    x, w, b = leaf(6, 32), leaf(32, seed=1), leaf(32, seed=2)
    (LayerNormFwdOp((32,), eps=1e-3)(x, w, b).square().sum() + RMSNormFwdOp(32)(x, w).sum()).backward()
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    (F.layer_norm(xr, (32,), wr, br, 1e-3).square().sum() + F.rms_norm(xr, (32,), wr).sum()).backward()
    assert_grads_close((x.grad, w.grad, b.grad), (xr.grad, wr.grad, br.grad))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_grads(pairing, dtype):
    x, w = leaf(8, 64, dtype=dtype), leaf(64, dtype=dtype, seed=1)
    dy = torch.randn(8, 64).to(dtype)
    got = grads_of(lambda x, w: OP(x, w, [64]), (x, w), dy)
    # torch autograd of F.rms_norm in float32 on the same values, rounded once.
    want = [g.to(dtype) for g in grads_of(lambda x, w: F.rms_norm(x, [64], w),
                                         (x.detach().float().requires_grad_(), w.detach().float().requires_grad_()),
                                         dy.float())]
    assert_grads_close(got, want, tol=2e-3 if dtype == torch.float16 else 1.6e-2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_float32_weight_and_bias_grads_are_float32(pairing, dtype):
    x, dy = leaf(8, 64, dtype=dtype), torch.randn(8, 64).to(dtype)
    w, b = leaf(64, seed=1), leaf(64, seed=2)  # float32
    got = grads_of(lambda x, w, b: LN(x, w, b, [64], 1e-5), (x, w, b), dy)
    assert [g.dtype for g in got] == [dtype, torch.float32, torch.float32]
    f32 = [t.detach().float().requires_grad_() for t in (x, w, b)]
    want = grads_of(lambda x, w, b: F.layer_norm(x, [64], w, b, 1e-5), f32, dy.float())
    assert_grads_close([got[0].float(), got[1], got[2]], [want[0].to(dtype).float(), want[1], want[2]],
                       tol=2e-3 if dtype == torch.float16 else 1.6e-2)
    got = grads_of(lambda x, w: OP(x, w, [64]), (x, w), dy)
    assert [g.dtype for g in got] == [dtype, torch.float32]
    want = grads_of(lambda x, w: F.rms_norm(x, [64], w), f32[:2], dy.float())
    assert_grads_close([got[0].float(), got[1]], [want[0].to(dtype).float(), want[1]],
                       tol=2e-3 if dtype == torch.float16 else 1.6e-2)


def test_gradcheck_float32(pairing):
    x, w, b = (t.detach().requires_grad_() for t in (leaf(3, 8), leaf(8, seed=1) + 1, leaf(8, seed=2)))
    kw = dict(eps=1e-2, atol=2e-2, rtol=2e-2, nondet_tol=1e-6)
    with pytest.warns(UserWarning, match="not a double precision"):
        assert torch.autograd.gradcheck(lambda x, w: OP(x, w, [8]), (x, w), **kw)
        assert torch.autograd.gradcheck(lambda x, w, b: LN(x, w, b, [8], 1e-5), (x, w, b), **kw)


@pytest.mark.parametrize("needs,branch", [
    ((True, True, True), "norm_layer_norm_bwd"),
    ((True, True, False), "norm_layer_norm_bwd_without_dbias"),
    ((True, False, True), "norm_layer_norm_bwd_without_dweight"),
    ((True, False, False), "norm_layer_norm_bwd_without_dbias_without_dweight"),
    ((False, True, False), "norm_layer_norm_bwd_without_dbias"),
])
def test_backward_branch_computes_only_the_gradients_asked_for(pairing, needs, branch):
    x, w, b = leaf(4, 16), leaf(16, seed=1), leaf(16, seed=2)
    for t, n in zip((x, w, b), needs):
        t.requires_grad_(n)
    with Calls() as calls:
        y = LN(x, w, b, [16], 1e-5)
        y.sum().backward()
    assert [name for name, _ in calls.seen] == ["norm_layer_norm_fwd", branch]
    for t, n in zip((x, w, b), needs):
        assert (t.grad is not None) == n


def test_autograd_grad_of_one_input_drops_the_other_gradients(pairing):
    x, w = leaf(4, 16), leaf(16, seed=1)
    y = OP(x, w, [16])
    with Calls() as calls:
        (dx,) = torch.autograd.grad(y.sum(), x)
    assert [name for name, _ in calls.seen] == ["norm_rms_norm_bwd_without_dweight"]
    torch.testing.assert_close(dx, torch.autograd.grad(F.rms_norm(x, [16], w).sum(), x)[0])


def test_weight_none_uses_the_dx_only_branch(pairing):
    x = leaf(4, 16)
    with Calls() as calls:
        OP(x, None, [16]).sum().backward()
    assert [name for name, _ in calls.seen] == ["norm_rms_norm_fwd", "norm_rms_norm_bwd_without_dweight"]


def test_explicit_target_reaches_the_backward(pairing):
    x, w = leaf(4, 16), leaf(16, seed=1)
    with Calls() as calls:
        RMSNormFwdOp(16, eps=1e-4, target="reference")(x, w).sum().backward()
    (fwd, fkw), (bwd, bkw) = calls.seen
    assert (fwd, bwd) == ("norm_rms_norm_fwd", "norm_rms_norm_bwd")
    assert fkw.get("target") == bkw.get("target") == "reference"


def test_double_backward_is_a_clear_error(pairing):
    x, w = leaf(4, 16), leaf(16, seed=1)
    y = OP(x, w, [16])
    with pytest.raises(RuntimeError, match=r"tileops::norm_rms_norm_bwd_without_dweight: an input requires grad"):
        torch.autograd.grad(y.sum(), x, create_graph=True)


def test_input_modified_after_the_forward_is_caught(pairing):
    x, w = leaf(4, 16), leaf(16, seed=1)
    h = x * 2
    y = OP(h, w, [16])
    with torch.no_grad():
        h.add_(1)  # a tensor the backward saved
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_switching_off_restores_the_error():
    prev = tileops.enable_autograd(True)
    try:
        x = leaf(2, 8)
        OP(x, None, [8]).sum().backward()
        assert x.grad is not None
        assert tileops.enable_autograd(False) is True
        with pytest.raises(RuntimeError, match="an input requires grad, but this op has no autograd formula"):
            OP(x, None, [8])
    finally:
        tileops.enable_autograd(prev)


def test_opcheck_with_grad_inputs(pairing):
    x, w, b = leaf(4, 16), leaf(16, seed=1), leaf(16, seed=2)
    torch.library.opcheck(OP.default, (x, w, [16], None))
    torch.library.opcheck(LN.default, (x, w, b, [16], 1e-5))


# ---- on: torch.compile ----------------------------------------------------------------------------

def ops_in(graphs):
    return [n.target for g in graphs for n in g.graph.nodes
            if n.op == "call_function" and getattr(n.target, "namespace", None) == "tileops"]


@pytest.mark.parametrize("weight_grad", [True, False])
@pytest.mark.filterwarnings("ignore:Your compiler for AOTAutograd")  # AotEagerAndRecordGraphs is unboxed
def test_compile_fullgraph_forward_and_backward(pairing, weight_grad):
    torch._dynamo.reset()
    x, w = leaf(8, 32), leaf(32, seed=1, requires_grad=weight_grad)
    dy = torch.randn(8, 32)
    backend = AotEagerAndRecordGraphs()
    fn = torch.compile(lambda x, w: OP(x, w, [32]) * 2, fullgraph=True, backend=backend)
    y = fn(x, w)
    got = torch.autograd.grad(y, [x, w] if weight_grad else [x], dy)
    xe, we = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_(weight_grad)
    want = torch.autograd.grad(OP(xe, we, [32]) * 2, [xe, we] if weight_grad else [xe], dy)
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)
    assert ops_in(backend.fw_graphs) == [torch.ops.tileops.norm_rms_norm_fwd.default]
    bwd = torch.ops.tileops.norm_rms_norm_bwd if weight_grad else torch.ops.tileops.norm_rms_norm_bwd_without_dweight
    assert ops_in(backend.bw_graphs) == [bwd.default]


@pytest.mark.filterwarnings("ignore:Your compiler for AOTAutograd")
def test_compile_layer_norm_dynamic_batch(pairing):
    torch._dynamo.reset()
    backend = AotEagerAndRecordGraphs()
    op = LayerNormFwdOp((24,))
    fn = torch.compile(lambda x, w, b: op(x, w, b).sum(), fullgraph=True, backend=backend, dynamic=True)
    for rows in (3, 5, 9):
        x, w, b = leaf(rows, 24), leaf(24, seed=1), leaf(24, seed=2)
        got = torch.autograd.grad(fn(x, w, b), (x, w, b))
        xe, we, be = (t.detach().clone().requires_grad_() for t in (x, w, b))
        want = torch.autograd.grad(op(xe, we, be).sum(), (xe, we, be))
        for g, e in zip(got, want):
            torch.testing.assert_close(g, e)
    assert len(backend.fw_graphs) == 1  # one dynamic graph for every batch size
    assert ops_in(backend.fw_graphs) == [torch.ops.tileops.norm_layer_norm_fwd.default]
    assert ops_in(backend.bw_graphs) == [torch.ops.tileops.norm_layer_norm_bwd.default]
