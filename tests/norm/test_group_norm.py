"""GroupNormFwdOp on CPU (reference target): matches F.group_norm for every dtype, with and without
weight and bias, 2-d to 5-d x and several group counts; refusals name the op, the argument and the
rule; one node under torch.compile and torch.export; opcheck."""

import pytest
import torch
import torch._dynamo

from tileops.norm import GroupNormFwdOp
from support.graphs import GraphRecorder

OP = torch.ops.tileops.norm_group_norm_fwd
F = torch.nn.functional
PREFIX = r"tileops::norm_group_norm_fwd: "
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("weight,bias", [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.parametrize("shape,groups", [((4, 6), 3), ((2, 12, 10), 4), ((3, 8, 5, 7), 2), ((2, 8, 5, 7), 8),
                                          ((2, 6, 3, 4, 5), 1), ((1, 16, 33), 16)])
def test_matches_group_norm(dtype, weight, bias, shape, groups):
    x = torch.randn(shape, dtype=dtype) * 2 + 0.5
    c = shape[1]
    w = torch.randn(c, dtype=dtype) if weight else None
    b = torch.randn(c, dtype=dtype) if bias else None
    y = OP(x, w, b, groups)
    assert y.dtype == dtype and y.shape == x.shape and y.is_contiguous()
    torch.testing.assert_close(y, F.group_norm(x, groups, w, b))


def test_eps_default_and_op_class():
    x = torch.randn(2, 8, 9)
    assert OP.default._schema.arguments[4].default_value == pytest.approx(1e-5)
    torch.testing.assert_close(GroupNormFwdOp(4, eps=1e-2)(x, None, None), F.group_norm(x, 4, eps=1e-2))
    assert GroupNormFwdOp.compile_op_names == ("tileops::norm_group_norm_fwd",)


def test_non_contiguous_x_and_empty_x():
    x = torch.randn(2, 8, 5, 6).to(memory_format=torch.channels_last)
    assert not x.is_contiguous()
    w, b = torch.randn(8), torch.randn(8)
    y = OP(x, w, b, 4)
    assert y.is_contiguous()
    torch.testing.assert_close(y, F.group_norm(x, 4, w, b))
    for shape in ((0, 8, 3), (2, 8, 0), (0, 8)):
        assert OP(torch.randn(shape), w, b, 2).shape == shape


@pytest.mark.parametrize("call,error,message", [
    (lambda: OP(torch.randn(2, 6, 4), None, None, 0), ValueError,
     r"shape rule 'num_groups >= 1' is violated \(left side 0, right side 1\) with num_groups=0"),
    (lambda: OP(torch.randn(2, 6, 4), None, None, -3), ValueError, r"shape rule 'num_groups >= 1' is violated"),
    (lambda: OP(torch.randn(2, 6, 4), None, None, 4), ValueError,
     r"shape rule 'C % num_groups == 0' is violated \(left side 2, right side 0\) with num_groups=4, C=6"),
    (lambda: OP(torch.randn(2, 6, 4), torch.randn(3), None, 3), RuntimeError,
     r"'weight' must have shape \[C\] \(C=6\), got \[3\]"),
    (lambda: OP(torch.randn(2, 6, 4), None, torch.randn(6, 1), 3), RuntimeError,
     r"'bias' must have shape \[C\] \(C=6\), got \[6, 1\]"),
    (lambda: OP(torch.randn(6), None, None, 3), RuntimeError, r"'x' must have shape \[N, C, \.\.\.\], got \[6\]"),
    (lambda: OP(torch.randn(2, 6, 4, dtype=torch.float64), None, None, 3), TypeError, r"'x' must have dtype"),
    (lambda: OP(torch.randn(2, 6, 4).half(), torch.randn(6), None, 3), TypeError,
     r"'weight' must have the dtype of 'x'"),
])
def test_bad_input_names_op_argument_and_rule(call, error, message):
    with pytest.raises(error, match=PREFIX + ".*" + message):
        call()


def test_meta_checks_and_contiguous_output():
    x = torch.empty(2, 8, 5, 6, device="meta").to(memory_format=torch.channels_last)
    y = OP(x, None, None, 4)
    assert y.device.type == "meta" and y.is_contiguous() and y.shape == x.shape
    with pytest.raises(ValueError, match=PREFIX + r"shape rule 'C % num_groups == 0'"):
        OP(x, None, None, 3)


def test_compiles_to_one_node_with_dynamic_shapes_and_exports():
    torch._dynamo.reset()
    rec = GraphRecorder()

    w, b = torch.randn(8), torch.randn(8)
    fn = torch.compile(lambda x: OP(x, w, b, 4), fullgraph=True, backend=rec, dynamic=True)
    for n, hw in ((2, 9), (3, 5)):
        x = torch.randn(n, 8, hw)
        torch.testing.assert_close(fn(x), F.group_norm(x, 4, w, b))
    assert len(rec.graphs) == 1
    assert rec.calls(packets=True) == [OP]

    class M(torch.nn.Module):
        def forward(self, x, w):
            return OP(x, w, None, 2)

    x, w = torch.randn(4, 6, 7), torch.randn(6)
    ep = torch.export.export(M(), (x, w), dynamic_shapes=({0: torch.export.Dim("n")}, None))
    assert sum(n.op == "call_function" and n.target == OP.default for n in ep.graph.nodes) == 1
    torch.testing.assert_close(ep.module()(x, w), F.group_norm(x, 2, w))


def test_opcheck():
    x = torch.randn(2, 8, 3, 5)
    torch.library.opcheck(OP.default, (x, torch.randn(8), torch.randn(8), 4, 1e-5))
    torch.library.opcheck(OP.default, (x, None, None, 2, 1e-3))
