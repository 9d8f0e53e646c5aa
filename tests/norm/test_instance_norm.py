"""InstanceNormFwdOp on CPU (reference target): the input's statistics match F.instance_norm, the
running ones (use_input_stats=False) match it in eval form and are never written; running stats
beside use_input_stats=True, half a pair, or none without are refused naming the op, the arguments
and the rule; one node under torch.compile and torch.export; opcheck."""

import pytest
import torch
import torch._dynamo

from tileops.norm import InstanceNormFwdOp
from support.graphs import GraphRecorder

OP = torch.ops.tileops.norm_instance_norm_fwd
F = torch.nn.functional
PREFIX = r"tileops::norm_instance_norm_fwd: "
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def eval_ref(x, rm, rv, w, b, eps=1e-5):
    """F.instance_norm on the running stats in float32 (clones: torch would write them back)."""
    y = F.instance_norm(x.float(), rm.clone(), rv.clone(), None if w is None else w.float(),
                        None if b is None else b.float(), use_input_stats=False, eps=eps)
    return y.to(x.dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("weight,bias", [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.parametrize("shape", [(2, 6, 10), (3, 4, 5, 7), (2, 3, 2, 3, 4), (1, 16, 33)])
def test_input_stats_match_instance_norm(dtype, weight, bias, shape):
    x = torch.randn(shape, dtype=dtype) * 2 - 0.5
    c = shape[1]
    w = torch.randn(c, dtype=dtype) if weight else None
    b = torch.randn(c, dtype=dtype) if bias else None
    y = OP(x, None, None, w, b)
    assert y.dtype == dtype and y.shape == x.shape and y.is_contiguous()
    torch.testing.assert_close(y, F.instance_norm(x, weight=w, bias=b))
    # GroupNormFwdOp with a group a channel computes the same (ATen's CPU kernels for the two round
    # 16-bit results a last bit apart here and there).
    tol = {} if dtype == torch.float32 else {"rtol": torch.finfo(dtype).eps, "atol": 2 * torch.finfo(dtype).eps}
    torch.testing.assert_close(y.float(), torch.ops.tileops.norm_group_norm_fwd(x, w, b, c).float(), **tol)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("weight,bias", [(True, True), (False, True), (False, False)])
@pytest.mark.parametrize("shape", [(2, 6), (2, 6, 10), (3, 4, 5, 7), (2, 3, 2, 3, 4)])
def test_running_stats_normalise_and_are_never_written(dtype, weight, bias, shape):
    c = shape[1]
    x = torch.randn(shape, dtype=dtype)
    rm, rv = torch.randn(c), torch.rand(c) + 0.5
    rm0, rv0 = rm.clone(), rv.clone()
    w = torch.randn(c, dtype=dtype) if weight else None
    b = torch.randn(c, dtype=dtype) if bias else None
    y = OP(x, rm, rv, w, b, False, 0.1, 1e-3)
    torch.testing.assert_close(y, eval_ref(x, rm, rv, w, b, 1e-3))
    assert torch.equal(rm, rm0) and torch.equal(rv, rv0)


def test_schema_follows_instance_norm():
    args = OP.default._schema.arguments
    assert [a.name for a in args] == ["x", "running_mean", "running_var", "weight", "bias", "use_input_stats",
                                      "momentum", "eps", "target"]
    assert args[5].default_value is True
    assert args[6].default_value == pytest.approx(0.1) and args[7].default_value == pytest.approx(1e-5)


def test_op_class_and_empty_x():
    x = torch.randn(2, 4, 6)
    torch.testing.assert_close(InstanceNormFwdOp()(x, None, None, None, None), F.instance_norm(x))
    rm, rv = torch.zeros(4), torch.ones(4)
    torch.testing.assert_close(InstanceNormFwdOp(use_input_stats=False)(x, rm, rv, None, None),
                               eval_ref(x, rm, rv, None, None))
    assert InstanceNormFwdOp.compile_op_names == ("tileops::norm_instance_norm_fwd",)
    assert OP(torch.randn(0, 4, 3), None, None, None, None).shape == (0, 4, 3)
    assert OP(torch.randn(0, 4, 3), rm, rv, None, None, False).shape == (0, 4, 3)


RULE_STATS = r"arguments \(running_mean, use_input_stats\) break the rule 'not given\(running_mean\) or not use_input_stats'"


@pytest.mark.parametrize("call,error,message", [
    # An inference op: torch would update the stats with momentum here; this op refuses.
    (lambda x, s: OP(x, s, s + 1, None, None), ValueError,
     RULE_STATS + r"; got running_mean=Tensor\[4\], use_input_stats=True"),
    (lambda x, s: OP(x, s, None, None, None, False), ValueError,
     r"arguments \(running_mean, running_var\) break the rule 'given\(running_var\) or not given\(running_mean\)'; "
     r"got running_mean=Tensor\[4\], running_var=None"),
    (lambda x, s: OP(x, None, s, None, None, False), ValueError,
     r"break the rule 'given\(running_mean\) or not given\(running_var\)'"),
    (lambda x, s: OP(x, None, None, None, None, False), ValueError,
     r"arguments \(running_mean, use_input_stats\) break the rule 'use_input_stats or given\(running_mean\)'; "
     r"got running_mean=None, use_input_stats=False"),
    (lambda x, s: OP(x, s.half(), s.half(), None, None, False), TypeError, r"'running_mean' must have dtype float32"),
    (lambda x, s: OP(x, s[:3], s[:3], None, None, False), RuntimeError,
     r"'running_mean' must have shape \[C\] \(C=4\), got \[3\]"),
    (lambda x, s: OP(x, None, None, s[:3], None), RuntimeError, r"'weight' must have shape \[C\] \(C=4\), got \[3\]"),
    (lambda x, s: OP(x[..., :1], None, None, None, None), ValueError,
     r"break the rule 'not use_input_stats or numel\(x\) != N \* C or numel\(x\) == 0'"),
    (lambda x, s: OP(x[0, 0], None, None, None, None), RuntimeError, r"'x' must have shape \[N, C, \.\.\.\]"),
])
def test_bad_input_names_op_argument_and_rule(call, error, message):
    x, s = torch.randn(2, 4, 6), torch.rand(4)
    with pytest.raises(error, match=PREFIX + ".*" + message):
        call(x, s)


def test_one_spatial_element_is_refused_with_input_stats_only_as_in_torch():
    x = torch.randn(2, 4)
    with pytest.raises(ValueError, match="Expected more than 1 spatial element"):
        F.instance_norm(x)
    with pytest.raises(ValueError, match=PREFIX + r"arguments \(x, use_input_stats, C, N\) break the rule"):
        OP(x, None, None, None, None)
    rm, rv = torch.randn(4), torch.rand(4) + 1
    torch.testing.assert_close(OP(x, rm, rv, None, None, False), eval_ref(x, rm, rv, None, None))


def test_compiles_to_one_node_with_dynamic_shapes_and_exports():
    torch._dynamo.reset()
    rec = GraphRecorder()

    w, b = torch.randn(8), torch.randn(8)
    fn = torch.compile(lambda x: OP(x, None, None, w, b), fullgraph=True, backend=rec, dynamic=True)
    for n, hw in ((2, 9), (3, 5)):
        x = torch.randn(n, 8, hw)
        torch.testing.assert_close(fn(x), F.instance_norm(x, weight=w, bias=b))
    assert len(rec.graphs) == 1
    assert rec.calls(packets=True) == [OP]

    class M(torch.nn.Module):
        def forward(self, x, rm, rv):
            return OP(x, rm, rv, None, None, False)

    x, rm, rv = torch.randn(4, 6, 7), torch.randn(6), torch.rand(6) + 1
    ep = torch.export.export(M(), (x, rm, rv), dynamic_shapes=({0: torch.export.Dim("n")}, None, None))
    assert sum(n.op == "call_function" and n.target == OP.default for n in ep.graph.nodes) == 1
    torch.testing.assert_close(ep.module()(x, rm, rv), eval_ref(x, rm, rv, None, None))


def test_opcheck():
    x = torch.randn(2, 8, 3, 5)
    torch.library.opcheck(OP.default, (x, None, None, torch.randn(8), torch.randn(8), True, 0.1, 1e-5))
    torch.library.opcheck(OP.default, (x, torch.randn(8), torch.rand(8) + 1, None, torch.randn(8), False, 0.1, 1e-5))
