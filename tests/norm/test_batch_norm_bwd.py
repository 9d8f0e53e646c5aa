"""BatchNormBwdOp on CPU (reference target): dx, dweight and dbias of training-mode batch norm from the
saved batch statistics match torch's native_batch_norm_backward (and autograd through F.batch_norm)
for every dtype and rank; statistics other than x's own are read, not recomputed; an empty batch gives
zero dweight and dbias; Meta and fake tensors get the manifest's shapes and dtypes; one node under
torch.compile with dynamic shapes, and torch.export; opcheck; bad input refused naming the op, the
argument and the rule."""

import pytest
import torch
import torch._dynamo
from torch._subclasses.fake_tensor import FakeTensorMode

from tileops.norm import BatchNormBwdOp
from support.graphs import GraphRecorder

OP = torch.ops.tileops.norm_batch_norm_bwd
F = torch.nn.functional
PREFIX = r"tileops::norm_batch_norm_bwd: "
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
TOL = {torch.float32: 1e-5, torch.bfloat16: 1.6e-2, torch.float16: 2e-3}


def saved_stats(x, eps=1e-5):
    """What the forward in training saves: the batch mean and 1 / sqrt(biased var + eps), float32."""
    _, mean, rstd = torch.native_batch_norm(x.float(), None, None, None, None, True, 0.1, eps)
    return mean, rstd


def torch_grads(dy, x, w, mean, rstd):
    """torch's backward in float32, dx rounded once to dy's dtype."""
    dx, dw, db = torch.ops.aten.native_batch_norm_backward(dy.float(), x.float(), w, None, None, mean, rstd, True,
                                                           0.0, [True, True, True])
    return dx.to(dy.dtype), dw, db


def case(shape, dtype, seed=0):
    torch.manual_seed(seed)
    x = (torch.randn(shape) * 2 + 0.5).to(dtype)
    dy = torch.randn(shape).to(dtype)
    w = torch.randn(shape[1])
    return dy, x, w, *saved_stats(x)


def assert_grads(got, want):
    dx, dw, db = got
    assert dx.dtype == want[0].dtype and dx.shape == want[0].shape and dx.is_contiguous()
    assert dw.dtype == db.dtype == torch.float32 and dw.shape == db.shape == want[1].shape
    tol = TOL[dx.dtype]
    torch.testing.assert_close(dx, want[0], rtol=tol, atol=tol)
    torch.testing.assert_close(dw, want[1], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(db, want[2], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(5, 6), (2, 6, 10), (3, 4, 5, 7), (2, 3, 2, 3, 4), (1, 16, 33), (40, 3, 1)])
def test_matches_native_batch_norm_backward(dtype, shape):
    dy, x, w, mean, rstd = case(shape, dtype)
    assert_grads(OP(dy, x, w, mean, rstd), torch_grads(dy, x, w, mean, rstd))


@pytest.mark.parametrize("shape", [(6, 4), (3, 4, 5, 7)])
def test_is_the_gradient_of_batch_norm_in_training(shape):
    torch.manual_seed(3)
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    w = torch.randn(shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.randn(shape[1], dtype=torch.float64, requires_grad=True)
    dy = torch.randn(shape, dtype=torch.float64)
    gx, gw, gb = torch.autograd.grad(F.batch_norm(x, None, None, w, b, training=True, eps=1e-3), (x, w, b), dy)
    mean, rstd = saved_stats(x.detach(), 1e-3)
    dx, dw, db = OP(dy.float(), x.detach().float(), w.detach().float(), mean, rstd)
    torch.testing.assert_close(dx.double(), gx, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(dw.double(), gw, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(db.double(), gb, rtol=1e-4, atol=1e-5)


def test_reads_the_given_statistics():
    dy, x, w, mean, rstd = case((4, 3, 6), torch.float32)
    other_mean, other_rstd = mean + 0.5, rstd * 2
    got = OP(dy, x, w, other_mean, other_rstd)
    assert_grads(got, torch_grads(dy, x, w, other_mean, other_rstd))
    assert not torch.allclose(got[1], OP(dy, x, w, mean, rstd)[1])


def test_op_class_schema_and_empty_batch():
    dy, x, w, mean, rstd = case((3, 4, 6), torch.float16)
    assert_grads(BatchNormBwdOp()(dy, x, w, mean, rstd), torch_grads(dy, x, w, mean, rstd))
    assert BatchNormBwdOp.compile_op_names == ("tileops::norm_batch_norm_bwd",)
    args = OP.default._schema.arguments
    assert [a.name for a in args] == ["dy", "x", "weight", "mean", "rstd", "target"]
    assert not any(a.alias_info is not None and a.alias_info.is_write for a in args)
    assert len(OP.default._schema.returns) == 3
    # No values a channel: nothing to sum (torch's CPU kernel divides by zero here).
    dx, dw, db = OP(torch.randn(0, 4, 5), torch.randn(0, 4, 5), w, mean, rstd)
    assert dx.shape == (0, 4, 5) and torch.equal(dw, torch.zeros(4)) and torch.equal(db, torch.zeros(4))
    dx, dw, db = OP(torch.randn(2, 4, 0), torch.randn(2, 4, 0), w, mean, rstd)
    assert dx.shape == (2, 4, 0) and torch.equal(dw, torch.zeros(4)) and torch.equal(db, torch.zeros(4))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_meta_and_fake_tensors_get_the_manifest_shapes(dtype):
    shape = (2, 5, 3, 4)
    dx, dw, db = OP(torch.empty(shape, dtype=dtype, device="meta"), torch.empty(shape, dtype=dtype, device="meta"),
                    *(torch.empty(5, device="meta") for _ in range(3)))
    assert (dx.shape, dx.dtype, dx.device.type) == (shape, dtype, "meta")
    assert (dw.shape, dw.dtype, db.shape, db.dtype) == ((5,), torch.float32, (5,), torch.float32)
    with FakeTensorMode() as mode:
        t = mode.from_tensor(torch.empty(shape, dtype=dtype).transpose(2, 3))
        s = mode.from_tensor(torch.empty(5))
        dx, dw, db = OP(t, t, s, s, s)
        assert dx.shape == t.shape and dx.is_contiguous() and dx.dtype == dtype and dw.shape == (5,)


def test_compiles_to_one_node_with_dynamic_shapes_and_exports():
    torch._dynamo.reset()
    rec = GraphRecorder()

    w = torch.randn(8)
    fn = torch.compile(lambda dy, x, m, r: OP(dy, x, w, m, r), fullgraph=True, backend=rec, dynamic=True)
    for shape in ((2, 8, 9), (3, 8, 5), (5, 8, 2)):
        dy, x, _, mean, rstd = case(shape, torch.float32, seed=shape[0])
        assert_grads(fn(dy, x, mean, rstd), torch_grads(dy, x, w, mean, rstd))
    assert len(rec.graphs) == 1
    assert rec.calls(packets=True) == [OP]

    class M(torch.nn.Module):
        def forward(self, dy, x, w, mean, rstd):
            return OP(dy, x, w, mean, rstd)

    dy, x, w, mean, rstd = case((4, 6, 7), torch.float32)
    n = torch.export.Dim("n")
    ep = torch.export.export(M(), (dy, x, w, mean, rstd), dynamic_shapes=({0: n}, {0: n}, None, None, None))
    assert sum(node.op == "call_function" and node.target == OP.default for node in ep.graph.nodes) == 1
    dy, x, _, mean, rstd = case((9, 6, 7), torch.float32)
    assert_grads(ep.module()(dy, x, w, mean, rstd), torch_grads(dy, x, w, mean, rstd))


def test_opcheck():
    for shape, dtype in (((2, 8, 3, 5), torch.float32), ((6, 4), torch.bfloat16)):
        torch.library.opcheck(OP.default, case(shape, dtype))


@pytest.mark.parametrize("call,error,message", [
    (lambda dy, x, s: OP(dy.double(), x.double(), s, s, s), TypeError, r"'dy' must have dtype"),
    (lambda dy, x, s: OP(dy, x.half(), s, s, s), TypeError, r"'x' must have the dtype of 'dy'"),
    (lambda dy, x, s: OP(dy, x, s.half(), s, s), TypeError, r"'weight' must have dtype float32"),
    (lambda dy, x, s: OP(dy.half(), x.half(), s, s.half(), s), TypeError, r"'mean' must have dtype float32"),
    (lambda dy, x, s: OP(dy, x, s, s, s.bfloat16()), TypeError, r"'rstd' must have dtype float32"),
    (lambda dy, x, s: OP(dy, x[:, :, :5], s, s, s), RuntimeError,
     r"'x' must have the shape of 'dy' \[2, 4, 6\], got \[2, 4, 5\]"),
    (lambda dy, x, s: OP(dy, x, s[:3], s, s), RuntimeError, r"'weight' must have shape \[C\] \(C=4\), got \[3\]"),
    (lambda dy, x, s: OP(dy, x, s, s[:3], s), RuntimeError, r"'mean' must have shape \[C\] \(C=4\), got \[3\]"),
    (lambda dy, x, s: OP(dy, x, s, s, torch.rand(4, 1)), RuntimeError, r"'rstd' must have shape \[C\] \(C=4\)"),
    (lambda dy, x, s: OP(dy[0, 0], x[0, 0], s, s, s), RuntimeError, r"'dy' must have shape \[N, C, \.\.\.\]"),
])
def test_bad_input_names_op_argument_and_rule(call, error, message):
    dy, x, s = torch.randn(2, 4, 6), torch.randn(2, 4, 6), torch.rand(4)
    with pytest.raises(error, match=PREFIX + ".*" + message):
        call(dy, x, s)


def test_a_missing_weight_is_refused_by_the_schema():
    dy, x, _, mean, rstd = case((2, 4, 6), torch.float32)
    with pytest.raises((TypeError, RuntimeError), match="weight"):
        OP(dy, x, None, mean, rstd)
