"""DropoutFwdOp / DropoutBwdOp on CPU (reference target) against the formula of docs/CONTRACT.md §11
computed in numpy (tests/support/philox.py): Random123's known answer, bit-exact outputs for every
dtype, p, seed and shape, the drop rate, NaN/infinity/-0.0, p = 0 / 1 and training=False, strides,
out=, the gradient through the autograd pairing, argument errors, Meta/fake tensors, torch.compile
(the seed a graph input), torch.export, opcheck."""

import math

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import tileops
from support.graphs import GraphRecorder, symint_inputs
from support.philox import dropout, dropout_factor

OP = torch.ops.tileops.regularization_dropout_fwd
OUT = torch.ops.tileops.regularization_dropout_fwd_out
BWD = torch.ops.tileops.regularization_dropout_bwd
PREFIX = r"tileops::regularization_dropout_fwd: "
DTYPES = [torch.float16, torch.bfloat16, torch.float32]


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 3).to(dtype)


def bits_equal(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(torch.signbit(a[~a.isnan()]), torch.signbit(b[~b.isnan()]))


def test_random123_known_answer_decides_the_first_four_elements():
    # Philox4x32-10, counter 0, key 0 (Random123's kat_vectors): 6627e8d5 e169c58d bc57ac4c 9b00dbd8.
    # p = 0.7 drops the words below round(0.7 * 2^32) = 0xb3333333: elements 0 and 3.
    y = OP(torch.ones(4), p=0.7, seed=0)
    scale = 1 / torch.tensor(0.3, dtype=torch.float32)
    assert torch.equal(y, torch.stack([torch.tensor(0.0), scale, scale, torch.tensor(0.0)]))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("p,seed", [(0.5, 0), (0.1, 1), (0.9, -1), (0.3, 2 ** 40 + 3), (0.5, -(2 ** 63))])
@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 33), (2, 5, 129)], ids=str)
def test_matches_the_formula_bit_for_bit(shape, p, seed, dtype):
    x = sample(shape, dtype, seed=len(shape))
    bits_equal(OP(x, p=p, seed=seed), dropout(x, p, seed))


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_each_element_is_dropped_with_probability_p(p):
    n = 1 << 20
    y = OP(torch.ones(n), p=p, seed=12345)
    dropped = (y == 0).sum().item()
    assert abs(dropped - p * n) < 6 * math.sqrt(n * p * (1 - p))  # six binomial sigmas
    assert torch.equal(y[y != 0], torch.full((n - dropped,), (1 / torch.tensor(1 - p, dtype=torch.float32)).item()))


def test_the_mask_depends_on_seed_and_position_only():
    x = torch.ones(4096)
    a, b = OP(x, p=0.5, seed=3), OP(x, p=0.5, seed=4)
    assert not torch.equal(a, b)
    assert torch.equal(OP(x.view(64, 64), p=0.5, seed=3).reshape(-1), a)
    assert torch.equal(OP(x.half(), p=0.5, seed=3) == 0, a == 0)
    # Non-contiguous input: element i in row-major order, not in memory order.
    xt = sample((40, 24), torch.float32, seed=9).t()
    bits_equal(OP(xt, p=0.4, seed=5), dropout(xt.contiguous(), 0.4, 5))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_infinity_and_signed_zero_are_multiplied_as_torch_does(dtype):
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), -2.0, -0.0, 1e-3] * 8, dtype=dtype)
    f = dropout_factor(x.numel(), 0.5, 11)
    assert (f == 0).any() and (f != 0).any()
    y = OP(x, p=0.5, seed=11)
    bits_equal(y, dropout(x, 0.5, 11))
    dropped = f == 0
    assert y[dropped & (x.isnan() | x.isinf())].isnan().all()          # NaN * 0, inf * 0: NaN
    assert torch.signbit(y[dropped & (x == -2)]).all()                  # -2 * 0 = -0.0


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_p_zero_and_training_false_copy_p_one_zeroes(dtype):
    x = sample((5, 31), dtype, seed=2)
    x[0, 0] = float("nan")
    for y in (OP(x, p=0.0, seed=1), OP(x, p=0.8, seed=1, training=False)):
        bits_equal(y, x)
        assert y.data_ptr() != x.data_ptr()
    y = OP(x, p=1.0, seed=1)
    bits_equal(y, (x.float() * 0).to(dtype))
    assert y[0, 0].isnan() and (y[x < 0] == 0).all() and torch.signbit(y[x < 0]).all()


def test_out_branch_and_python_class():
    import tileops.regularization as regularization
    x = sample((8, 50), torch.bfloat16, seed=4)
    out = torch.empty_like(x)
    OUT(x, out, p=0.25, seed=9)
    bits_equal(out, dropout(x, 0.25, 9))
    bits_equal(regularization.DropoutFwdOp(p=0.25, seed=9)(x), out)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_backward_op_is_the_forward_on_the_gradient(dtype):
    g = sample((6, 70), dtype, seed=6)
    bits_equal(BWD(g, p=0.3, seed=21), OP(g, p=0.3, seed=21))
    bits_equal(BWD(g, p=0.3, seed=21, training=False), g)


def test_gradient_through_the_autograd_pairing():
    prev = tileops.enable_autograd(True)
    try:
        x = sample((16, 48), torch.float32, seed=8).requires_grad_(True)
        y = OP(x, p=0.35, seed=77)
        g = sample((16, 48), torch.float32, seed=10)
        y.backward(g)
        f = dropout_factor(x.numel(), 0.35, 77).view(16, 48)
        assert torch.equal(x.grad, g * f)
        assert torch.equal(y.detach(), x.detach() * f)
    finally:
        tileops.enable_autograd(prev)


# ---- argument errors -------------------------------------------------------------------------------

@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("p,rule", [(-0.1, "0 <= p"), (1.5, "p <= 1"), (float("nan"), "0 <= p")])
def test_p_outside_0_1_is_refused_naming_the_rule(p, rule, device):
    with pytest.raises(ValueError, match=PREFIX + r"params \(p\) break the rule '" + rule + "'; got p="):
        OP(torch.ones(4, device=device), p=p)
    with pytest.raises(ValueError, match=r"tileops::regularization_dropout_bwd: params \(p\) break the rule"):
        BWD(torch.ones(4, device=device), p=p)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.bool], ids=str)
def test_dtype_is_refused(dtype):
    with pytest.raises(TypeError, match=PREFIX + r".*input"):
        OP(torch.zeros(4).to(dtype))


def test_out_of_another_shape_or_dtype_is_refused():
    x = torch.ones(4, 8)
    with pytest.raises(RuntimeError, match=r"tileops::regularization_dropout_fwd_out: .*out"):
        OUT(x, torch.empty(4, 9))
    with pytest.raises((RuntimeError, TypeError), match=r"tileops::regularization_dropout_fwd_out: .*out"):
        OUT(x, torch.empty(4, 8, dtype=torch.float16))


# ---- Meta, fake, compile, export, opcheck ---------------------------------------------------------

def test_meta_and_fake_shapes(counters):
    for dtype in DTYPES:
        y = OP(torch.empty(2, 9, 64, device="meta", dtype=dtype), p=0.2, seed=1)
        assert y.shape == (2, 9, 64) and y.dtype == dtype and y.is_contiguous()
    with FakeTensorMode():
        y = OP(torch.empty(4, 3, dtype=torch.float16).t())
        assert y.shape == (3, 4) and y.is_contiguous()
    assert counters()["kernel_builds"] == 0


def test_compiles_to_one_node_with_dynamic_shapes_and_exports():
    torch._dynamo.reset()
    rec = GraphRecorder()
    fn = torch.compile(lambda x, s: OP(x, p=0.3, seed=s), fullgraph=True, backend=rec, dynamic=True)
    for shape, seed in (((6, 40), 3), ((5, 72), 3)):
        x = sample(shape, torch.bfloat16, seed=shape[1])
        bits_equal(fn(x, seed), dropout(x, 0.3, seed))
    assert len(rec.graphs) == 1
    assert rec.calls(packets=True) == [OP]

    class M(torch.nn.Module):
        def forward(self, x):
            return OP(x, p=0.6, seed=99)

    x = sample((8, 32), torch.float16, seed=13)
    ep = torch.export.export(M(), (x,), dynamic_shapes=({0: torch.export.Dim("s")},))
    assert sum(n.op == "call_function" and n.target == OP.default for n in ep.graph.nodes) == 1
    bits_equal(ep.module()(x), dropout(x, 0.6, 99))


@pytest.mark.parametrize("inductor", [False, True], ids=["traced", "inductor"])
def test_a_new_seed_reuses_the_compiled_graph(inductor):
    """The seed is a SymInt of the schema: when it changes, dynamo makes it a graph input (its
    automatic dynamic ints) instead of compiling a graph per value, so a seed a step compiles twice
    at most; the graph then passes each call's seed to the op."""
    torch._dynamo.reset()
    rec = GraphRecorder(inductor=inductor)
    fn = torch.compile(lambda x, s: OP(x, p=0.3, seed=s) + BWD(x, p=0.6, seed=s + 1), fullgraph=True, backend=rec)
    x = sample((6, 40), torch.float32, seed=2)
    for seed in range(1000, 1006):
        bits_equal(fn(x, seed), dropout(x, 0.3, seed) + dropout(x, 0.6, seed + 1))
    assert 1 <= len(rec.graphs) <= 2
    assert symint_inputs(rec.graphs[-1]), "the seed is an input of the last graph"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_opcheck(dtype):
    torch.library.opcheck(OP.default, (sample((3, 24), dtype, seed=17),), {"p": 0.4, "seed": 5})
    torch.library.opcheck(BWD.default, (sample((3, 24), dtype, seed=18),), {"p": 0.4, "seed": 5})
