"""Autograd pairing on the GPU (default target: nvrtc forward and backward kernels): gradients of
RMSNormFwdOp / LayerNormFwdOp against torch autograd of F.rms_norm / F.layer_norm in float32, the
reference target through the same pairing, and torch.compile forward+backward. Skipped without a GPU."""
import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import AotEagerAndRecordGraphs

import tileops
from tileops.norm import LayerNormFwdOp, RMSNormFwdOp

pytestmark = pytest.mark.gpu
F = torch.nn.functional
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
TOL = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


@pytest.fixture(autouse=True)
def pairing():
    prev = tileops.enable_autograd(True)
    yield
    tileops.enable_autograd(prev)


def leaves(*tensors):
    return [t.detach().clone().requires_grad_() if t is not None else None for t in tensors]


def grads(fn, inputs, dy):
    live = [t for t in inputs if t is not None]
    return torch.autograd.grad(fn(*inputs), live, dy)


def torch_grads_f32(fn, inputs, dy):
    """torch autograd of the functional in float32 on the same values, rounded once to their dtype."""
    f32 = leaves(*(t.float() if t is not None else None for t in inputs))
    return [g.to(dy.dtype) for g in grads(fn, f32, dy.float())]


def assert_grads_close(got, want, dtype):
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype and g.device == w.device
        tol = TOL[dtype]
        scale = w.abs().max().item() if w.numel() else 1.0
        torch.testing.assert_close(g.float(), w.float(), rtol=tol, atol=tol * max(scale, 1.0))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m,n", [(1, 4096), (7, 1000), (2048, 4096), (64, 16384), (0, 256)])
@pytest.mark.parametrize("weight", [True, False], ids=["w", "nw"])
def test_rms_norm_grads(m, n, dtype, weight):
    x = torch.randn(m, n, device="cuda", dtype=dtype)
    w = (torch.randn(n, device="cuda", dtype=dtype) + 1) if weight else None
    dy = torch.randn(m, n, device="cuda", dtype=dtype)
    got = grads(lambda x, w: RMSNormFwdOp(n)(x, w), leaves(x, w), dy)
    want = torch_grads_f32(lambda x, w: F.rms_norm(x, [n], w), (x, w), dy)
    assert_grads_close(got, want, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m,n", [(1, 4096), (7, 1000), (2048, 4096), (64, 16384)])
@pytest.mark.parametrize("weight,bias", [(True, True), (True, False), (False, True)], ids=["wb", "w", "b"])
def test_layer_norm_grads(m, n, dtype, weight, bias):
    x = torch.randn(m, n, device="cuda", dtype=dtype) * 2 + 0.5
    w = (torch.randn(n, device="cuda", dtype=dtype) + 1) if weight else None
    b = torch.randn(n, device="cuda", dtype=dtype) if bias else None
    dy = torch.randn(m, n, device="cuda", dtype=dtype)
    got = grads(lambda x, w, b: LayerNormFwdOp(n)(x, w, b), leaves(x, w, b), dy)
    want = torch_grads_f32(lambda x, w, b: F.layer_norm(x, [n], w, b), (x, w, b), dy)
    assert_grads_close(got, want, dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_multi_dim_normalized_shape_and_non_contiguous_input(dtype):
    x = torch.randn(6, 33, 8, device="cuda", dtype=dtype).transpose(1, 2)  # (6, 8, 33), non-contiguous
    w = torch.randn(8, 33, device="cuda", dtype=dtype)
    dy = torch.randn(6, 8, 33, device="cuda", dtype=dtype)
    got = grads(lambda x, w: RMSNormFwdOp((8, 33))(x, w), leaves(x, w), dy)
    assert_grads_close(got, torch_grads_f32(lambda x, w: F.rms_norm(x, (8, 33), w), (x, w), dy), dtype)


@pytest.mark.parametrize("cls", [RMSNormFwdOp, LayerNormFwdOp])
def test_reference_target_through_the_same_pairing_agrees(cls):
    x = torch.randn(256, 2048, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(2048, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn_like(x)
    ours = grads(cls(2048), leaves(x, w), dy)
    ref = grads(cls(2048, target="reference"), leaves(x, w), dy)
    assert_grads_close(ours, ref, torch.bfloat16)


@pytest.mark.filterwarnings("ignore:Your compiler for AOTAutograd")  # AotEagerAndRecordGraphs is unboxed
def test_compile_fullgraph_forward_and_backward():
    torch._dynamo.reset()
    backend = AotEagerAndRecordGraphs()
    op = RMSNormFwdOp(4096)
    x = torch.randn(512, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn_like(x)
    fn = torch.compile(lambda x, w: op(x, w), fullgraph=True, backend=backend)
    got = grads(fn, leaves(x, w), dy)
    want = grads(op, leaves(x, w), dy)
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)
    names = [n.target for g in backend.fw_graphs + backend.bw_graphs for n in g.graph.nodes
             if getattr(n.target, "namespace", None) == "tileops"]
    assert names == [torch.ops.tileops.norm_rms_norm_fwd.default, torch.ops.tileops.norm_rms_norm_bwd.default]


def test_compile_inductor_layer_norm_training_step():
    torch._dynamo.reset()
    op = LayerNormFwdOp(1024)
    x = torch.randn(256, 1024, device="cuda", dtype=torch.float16)
    w = torch.randn(1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, device="cuda", dtype=torch.float16)
    fn = torch.compile(lambda x, w, b: (op(x, w, b).float() ** 2).mean(), fullgraph=True)
    xs, ws, bs = leaves(x, w, b)
    fn(xs, ws, bs).backward()
    xe, we, be = leaves(x, w, b)
    (op(xe, we, be).float() ** 2).mean().backward()
    for g, e in ((xs.grad, xe.grad), (ws.grad, we.grad), (bs.grad, be.grad)):
        torch.testing.assert_close(g, e, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("m,n", [(7, 1000), (2048, 4096)])
def test_float32_weight_and_bias_grads(m, n, dtype):
    x = torch.randn(m, n, device="cuda", dtype=dtype)
    w, b = torch.randn(n, device="cuda") + 1, torch.randn(n, device="cuda")
    dy = torch.randn(m, n, device="cuda", dtype=dtype)
    got = grads(lambda x, w: RMSNormFwdOp(n)(x, w), leaves(x, w), dy)
    assert [g.dtype for g in got] == [dtype, torch.float32]
    want = grads(lambda x, w: F.rms_norm(x, [n], w), leaves(x.float(), w), dy.float())
    assert_grads_close([got[0], got[1]], [want[0].to(dtype), want[1]], dtype)
    got = grads(lambda x, w, b: LayerNormFwdOp(n)(x, w, b), leaves(x, w, b), dy)
    assert [g.dtype for g in got] == [dtype, torch.float32, torch.float32]
    want = grads(lambda x, w, b: F.layer_norm(x, [n], w, b), leaves(x.float(), w, b), dy.float())
    assert_grads_close(got, [want[0].to(dtype), want[1], want[2]], dtype)
