"""The dim reductions (SumFwdOp ... LogSumExpFwdOp, tests/support/reduce_cases.py) on CPU (reference
target) against their ref_api: every listed dtype, dim sets, keepdim, dtype=/correction=, 0-dim and
non-contiguous x; Meta/fake shapes and dtypes, opcheck, one node under torch.compile with dynamic
shapes, torch.export; errors naming the op, the argument and the rule."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import tileops.reduction as reduction
from support.reduce_cases import CASES, sample
from support.graphs import GraphRecorder

IDS = [c.stem for c in CASES]


def _same(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert got.dtype == want.dtype and got.shape == want.shape and got.is_contiguous()
    torch.testing.assert_close(got, want, equal_nan=True)  # a contiguous copy may sum in another order


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_matches_ref_api_for_every_dtype_dim_and_keepdim(case):
    for dtype in case.dtypes:
        x = sample((3, 4, 5), dtype)
        for dim in case.dims(3):
            for keepdim in (False, True):
                _same(case.call(x, dim, keepdim), case.expect(x, dim, keepdim))


@pytest.mark.parametrize("case", [c for c in CASES if c.extra], ids=[c.stem for c in CASES if c.extra])
def test_extra_params_match_ref_api(case):
    x = sample((4, 6), torch.bfloat16)
    for name, values in case.extra.items():
        for v in values:
            for dim in case.dims(2)[:4]:
                _same(case.call(x, dim, True, **{name: v}), case.expect(x, dim, True, **{name: v}))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_zero_dim_and_non_contiguous_x(case):
    x0 = sample((), torch.float32)
    for dim in case.dims(0):  # a 0-dim x takes dim 0 or -1, as in torch
        _same(case.call(x0, dim), case.expect(x0, dim))
    xt = sample((6, 5, 4), torch.float32).transpose(0, 2)[:, 1::2]
    assert not xt.is_contiguous()
    for dim in case.dims(3):
        _same(case.call(xt, dim, False), case.expect(xt, dim, False))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_empty_reductions_like_torch(case):
    x = torch.randn(3, 0)
    dim = 1 if case.dim == "int" else [1]
    if case.refuses_empty:
        with pytest.raises((IndexError, RuntimeError), match=rf"tileops::{case.name}"):  # as torch raises
            case.call(x, dim)
    else:
        _same(case.call(x, dim), case.expect(x, dim))
    assert case.call(torch.randn(0, 4), dim, True if case.stem != "count_nonzero" else None) is not None


def test_nan_semantics():
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[1.0, nan, 3.0, 3.0], [2.0, 5.0, 5.0, -inf], [nan, 1.0, nan, 0.0]])
    amax, argmax, argmin = (getattr(torch.ops.tileops, f"reduction_{s}_fwd") for s in ("amax", "argmax", "argmin"))
    assert amax(x, [1]).isnan().tolist() == [True, False, True]     # NaN propagates
    assert argmax(x, 1).tolist() == [1, 1, 0]                         # first NaN, else the first maximum
    assert argmin(x, 1).tolist() == [1, 3, 0]
    assert torch.ops.tileops.reduction_log_sum_exp_fwd(torch.tensor([-inf, -inf]), [0]).item() == -inf


def test_var_correction_and_dtype_accumulation():
    x = torch.randn(5, 7)
    var = torch.ops.tileops.reduction_var_fwd
    for c in (0, 1, 3):
        torch.testing.assert_close(var(x, [1], c), torch.var(x, 1, correction=c))
    # correction >= N divides by 0, as torch does
    assert var(x, [1], 7).isinf().all()
    y = torch.ops.tileops.reduction_sum_fwd(x.bfloat16(), [1], dtype=torch.float32)
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, x.bfloat16().float().sum(1))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_meta_and_fake_shapes_dtypes(case, counters):
    x = torch.empty_strided((6, 4, 8), (8, 48, 1), device="meta", dtype=case.dtypes[0])
    real = sample((6, 4, 8), case.dtypes[0])
    for dim in case.dims(3):
        for keepdim in (False, True):
            got, want = case.call(x, dim, keepdim), case.expect(real, dim, keepdim)
            for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
                assert g.device.type == "meta" and g.shape == w.shape and g.dtype == w.dtype and g.is_contiguous()
    want = case.expect(real, case.dims(3)[-1], True)
    with FakeTensorMode() as mode:
        f = mode.from_tensor(real)
        out = case.call(f, case.dims(3)[-1], True)
        assert (out[0] if isinstance(out, tuple) else out).shape == (want[0] if isinstance(want, tuple) else want).shape
    assert counters()["kernel_builds"] == 0


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_opcheck(case):
    x = sample((4, 6, 3), case.dtypes[0])
    for dim in case.dims(3)[-1:]:
        torch.library.opcheck(case.op.default, (x, dim), {} if case.stem == "count_nonzero" else {"keepdim": True})


# Every op compiles cold to one node (tests/contracts/reduction.py); dynamic shapes and export here for
# one op of each kind of signature: dtype=, an int dim, two outputs, a listed dim with a bool output.
TRACED = [c for c in CASES if c.stem in ("sum", "argmax", "var_mean", "all")]


@pytest.mark.parametrize("case", TRACED, ids=[c.stem for c in TRACED])
def test_compiles_to_one_node_with_dynamic_shapes_and_exports(case):
    import torch._dynamo
    torch._dynamo.reset()
    rec = GraphRecorder()

    dim = case.dims(2)[-1]
    fn = torch.compile(lambda x: case.call(x, dim), fullgraph=True, backend=rec, dynamic=True)
    for rows in (3, 5):
        x = sample((rows, 8), case.dtypes[0])
        _same(fn(x), case.expect(x, dim))
    assert len(rec.graphs) == 1  # one graph serves both sizes
    assert rec.calls(packets=True) == [case.op]

    class M(torch.nn.Module):
        def forward(self, x):
            return case.call(x, dim)

    x = sample((4, 8), case.dtypes[0])
    ep = torch.export.export(M(), (x,), dynamic_shapes=({0: torch.export.Dim("rows")},))
    assert sum(n.op == "call_function" and getattr(n.target, "overloadpacket", None) == case.op
               for n in ep.graph.nodes) == 1
    _same(ep.module()(x), case.expect(x, dim))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_dim_errors_name_op_argument_and_rule(case):
    x = torch.randn(2, 3)
    bad = 2 if case.dim == "int" else [0, 2]
    with pytest.raises(IndexError, match=rf"tileops::{case.name}: 'dim' dim 2 is out of range \[-2, 1\]"):
        case.call(x, bad)
    with pytest.raises(IndexError, match=rf"tileops::{case.name}: 'dim'"):
        case.call(x.to("meta"), bad)  # the Meta kernel checks too
    if case.dim != "int":
        with pytest.raises(ValueError, match=rf"tileops::{case.name}: 'dim' names dim 1 more than once"):
            case.call(x, [1, -1])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bad_dtype_names_op_and_argument(case):
    bad = next(d for d in (torch.float64, torch.int32, torch.complex64) if d not in case.dtypes)
    with pytest.raises(TypeError, match=rf"tileops::{case.name}: 'x' must have dtype"):
        case.call(torch.ones(2, 3, dtype=bad), None if case.dim != "nonempty" else [0])


def test_op_classes_and_logsumexp_needs_a_dim():
    assert reduction.SumFwdOp.compile_op_names == ("tileops::reduction_sum_fwd",)
    x = torch.randn(3, 4, 5)
    torch.testing.assert_close(reduction.SumFwdOp(dim=[0, 2], keepdim=True)(x), x.sum((0, 2), keepdim=True))
    torch.testing.assert_close(reduction.ArgmaxFwdOp(dim=1)(x), x.argmax(1))
    v, m = reduction.VarMeanFwdOp(dim=[1], correction=0)(x)
    torch.testing.assert_close((v, m), torch.var_mean(x, 1, correction=0))
    with pytest.raises(ValueError, match=r"tileops::reduction_log_sum_exp_fwd: shape rule 'len\(dim\) >= 1'"):
        torch.ops.tileops.reduction_log_sum_exp_fwd(x, [])
    with pytest.raises(RuntimeError, match=r"target 'nvrtc' serves CUDA tensors only, got cpu"):
        torch.ops.tileops.reduction_sum_fwd(x, [0], target="nvrtc")
