"""BatchNormFwdOp on CPU (reference target): training normalises by the batch statistics and moves the
given running stats in place as F.batch_norm does; eval reads the running stats and writes nothing;
half a pair of running stats, none without training, or one value a channel in training are refused
naming the op, the arguments and the rule; one node under torch.compile (the running stats' update
kept) and torch.export; opcheck."""

import pytest
import torch
import torch._dynamo

from tileops.norm import BatchNormFwdOp
from support.graphs import GraphRecorder

OP = torch.ops.tileops.norm_batch_norm_fwd_writes_running_mean_writes_running_var
F = torch.nn.functional
PREFIX = r"tileops::norm_batch_norm_fwd_writes_running_mean_writes_running_var: "
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def ref(x, rm, rv, w, b, training, momentum=0.1, eps=1e-5):
    """F.batch_norm in float32, rounded once to x's dtype; rm and rv are updated as F.batch_norm does."""
    y = F.batch_norm(x.float(), rm, rv, None if w is None else w.float(), None if b is None else b.float(),
                     training=training, momentum=momentum, eps=eps)
    return y.to(x.dtype)


def affine(c, dtype, weight, bias):
    return (torch.randn(c, dtype=dtype) if weight else None), (torch.randn(c, dtype=dtype) if bias else None)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("weight,bias", [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.parametrize("shape", [(5, 6), (2, 6, 10), (3, 4, 5, 7), (2, 3, 2, 3, 4), (1, 16, 33)])
@pytest.mark.parametrize("running", [True, False], ids=["running", "no_running"])
def test_training_matches_batch_norm_and_moves_the_running_stats(dtype, weight, bias, shape, running):
    c = shape[1]
    x = torch.randn(shape, dtype=dtype) * 2 - 0.5
    w, b = affine(c, dtype, weight, bias)
    rm, rv = (torch.randn(c), torch.rand(c) + 0.5) if running else (None, None)
    rm_ref, rv_ref = (rm.clone(), rv.clone()) if running else (None, None)
    y = OP(x, rm, rv, w, b, True, 0.3, 1e-4)
    assert y.dtype == dtype and y.shape == x.shape and y.is_contiguous()
    torch.testing.assert_close(y, ref(x, rm_ref, rv_ref, w, b, True, 0.3, 1e-4))
    if running:
        torch.testing.assert_close(rm, rm_ref)
        torch.testing.assert_close(rv, rv_ref)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("weight,bias", [(True, True), (False, True), (False, False)])
@pytest.mark.parametrize("shape", [(1, 6), (2, 6, 10), (3, 4, 5, 7)])
def test_eval_reads_the_running_stats_and_never_writes_them(dtype, weight, bias, shape):
    c = shape[1]
    x = torch.randn(shape, dtype=dtype)
    rm, rv = torch.randn(c), torch.rand(c) + 0.5
    rm0, rv0 = rm.clone(), rv.clone()
    w, b = affine(c, dtype, weight, bias)
    y = OP(x, rm, rv, w, b, False, 0.1, 1e-3)
    torch.testing.assert_close(y, ref(x, rm0.clone(), rv0.clone(), w, b, False, 0.1, 1e-3))
    assert torch.equal(rm, rm0) and torch.equal(rv, rv0)


def test_schema_follows_batch_norm():
    args = OP.default._schema.arguments
    assert [a.name for a in args] == ["x", "running_mean", "running_var", "weight", "bias", "training", "momentum",
                                      "eps", "target"]
    assert [a.alias_info is not None and a.alias_info.is_write for a in args[:5]] == [False, True, True, False, False]
    assert args[5].default_value is False
    assert args[6].default_value == pytest.approx(0.1) and args[7].default_value == pytest.approx(1e-5)


def test_op_class_and_empty_x():
    x = torch.randn(3, 4, 6)
    rm, rv = torch.zeros(4), torch.ones(4)
    rm2, rv2 = rm.clone(), rv.clone()
    torch.testing.assert_close(BatchNormFwdOp(training=True)(x, rm, rv, None, None), ref(x, rm2, rv2, None, None, True))
    torch.testing.assert_close(rm, rm2)
    torch.testing.assert_close(BatchNormFwdOp()(x, rm, rv, None, None), ref(x, rm, rv, None, None, False))
    assert BatchNormFwdOp.compile_op_names == (
        "tileops::norm_batch_norm_fwd_writes_running_mean_writes_running_var",)
    rm0 = rm.clone()
    assert OP(torch.randn(0, 4, 3), rm, rv, None, None, True).shape == (0, 4, 3)
    assert torch.equal(rm, rm0)  # nothing computed, nothing moved


@pytest.mark.parametrize("call,error,message", [
    (lambda x, s: OP(x, s, None, None, None, True), ValueError,
     r"arguments \(running_mean, running_var\) break the rule 'given\(running_var\) or not given\(running_mean\)'; "
     r"got running_mean=Tensor\[4\], running_var=None"),
    (lambda x, s: OP(x, None, s, None, None, True), ValueError,
     r"break the rule 'given\(running_mean\) or not given\(running_var\)'"),
    (lambda x, s: OP(x, None, None, None, None), ValueError,
     r"arguments \(running_mean, training\) break the rule 'training or given\(running_mean\)'; "
     r"got running_mean=None, training=False"),
    (lambda x, s: OP(x, s.half(), s.half().add(1), None, None), TypeError, r"'running_mean' must have dtype float32"),
    (lambda x, s: OP(x, s[:3], s[:3], None, None), RuntimeError,
     r"'running_mean' must have shape \[C\] \(C=4\), got \[3\]"),
    (lambda x, s: OP(x, None, None, s[:3], None, True), RuntimeError,
     r"'weight' must have shape \[C\] \(C=4\), got \[3\]"),
    (lambda x, s: OP(x, None, None, s, None, True), TypeError, r"'weight' must have the dtype of 'x'"),
    (lambda x, s: OP(x[:1, :, :1], None, None, None, None, True), ValueError,
     r"arguments \(x, training, C\) break the rule 'not training or numel\(x\) > C or numel\(x\) == 0'"),
    (lambda x, s: OP(x[0, 0], s, s, None, None), RuntimeError, r"'x' must have shape \[N, C, \.\.\.\]"),
    (lambda x, s: OP(x, s, s, None, None, True), RuntimeError, r"'running_mean' is written and shares memory with 'running_var'"),
])
def test_bad_input_names_op_argument_and_rule(call, error, message):
    x, s = torch.randn(2, 4, 6, dtype=torch.float64).float(), torch.rand(4)
    if "weight' must have the dtype" in message:
        x = x.half()
    with pytest.raises(error, match=PREFIX + ".*" + message):
        call(x, s)


def test_one_value_a_channel_in_training_is_refused_as_in_torch():
    x = torch.randn(1, 4)
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        F.batch_norm(x, None, None, training=True)
    with pytest.raises(ValueError, match=PREFIX + r"arguments \(x, training, C\) break the rule"):
        OP(x, None, None, None, None, True)
    rm, rv = torch.randn(4), torch.rand(4) + 1
    torch.testing.assert_close(OP(x, rm, rv, None, None), ref(x, rm.clone(), rv.clone(), None, None, False))


def test_compiles_to_one_node_that_keeps_the_update_and_exports():
    torch._dynamo.reset()
    rec = GraphRecorder()

    w, b = torch.randn(8), torch.randn(8)
    fn = torch.compile(lambda x, rm, rv: OP(x, rm, rv, w, b, True), fullgraph=True, backend=rec, dynamic=True)
    for n, hw in ((2, 9), (3, 5)):
        x = torch.randn(n, 8, hw)
        rm, rv = torch.randn(8), torch.rand(8) + 1
        rm_ref, rv_ref = rm.clone(), rv.clone()
        torch.testing.assert_close(fn(x, rm, rv), ref(x, rm_ref, rv_ref, w, b, True))
        torch.testing.assert_close(rm, rm_ref)
        torch.testing.assert_close(rv, rv_ref)
    assert len(rec.graphs) == 1
    assert rec.calls(packets=True) == [OP]

    class M(torch.nn.Module):
        def forward(self, x, rm, rv):
            return OP(x, rm, rv, None, None, False)

    x, rm, rv = torch.randn(4, 6, 7), torch.randn(6), torch.rand(6) + 1
    ep = torch.export.export(M(), (x, rm, rv), dynamic_shapes=({0: torch.export.Dim("n")}, None, None))
    assert sum(n.op == "call_function" and n.target == OP.default for n in ep.graph.nodes) == 1
    torch.testing.assert_close(ep.module()(x, rm, rv), ref(x, rm, rv, None, None, False))


def test_opcheck():
    x = torch.randn(2, 8, 3, 5)
    torch.library.opcheck(OP.default, (x, torch.randn(8), torch.rand(8) + 1, torch.randn(8), torch.randn(8), True,
                                       0.1, 1e-5))
    torch.library.opcheck(OP.default, (x, None, None, None, torch.randn(8), True, 0.1, 1e-5))
    torch.library.opcheck(OP.default, (x, torch.randn(8), torch.rand(8) + 1, None, None, False, 0.1, 1e-5))
