"""Pool family on CPU (reference target): every op, dtype and many param combinations against
torch.nn.functional (ceil_mode edge cases, padding, dilation, count_include_pad, divisor_override,
odd sizes, one-int and per-dim lists, unbatched and empty-batch inputs), torch's refusals refused
alike and named, Meta/fake shapes, the Op classes, torch.compile with dynamic shapes and export."""
import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

import tileops.pool as pool_classes
from support.pool_cases import POOLS, SIZES, BY_STEM, call, our_args, params_for, reference, sample
from support.graphs import GraphRecorder

IDS = [p.stem for p in POOLS]


def torch_or_error(pool, x, params):
    try:
        return reference(pool, x, params), None
    except RuntimeError as e:
        return None, e


def cases():
    for pool in POOLS:
        for size in SIZES[pool.rank]:
            for params in params_for(pool, size):
                yield pytest.param(pool, size, params, id=f"{pool.stem}-{'x'.join(map(str, size))}-{params}")


@pytest.mark.parametrize("pool,size,params", list(cases()))
def test_matches_torch_or_refuses_as_torch_does(pool, size, params):
    for dtype in pool.dtypes:
        x = sample((2, 3, *size), dtype, nan=pool.kind != "avg")
        expect, error = torch_or_error(pool, x, params)
        if error is not None:
            with pytest.raises((RuntimeError, ValueError), match=f"tileops::{pool.name}"):
                call(pool, x, params)
            continue
        y = call(pool, x, params)
        assert y.shape == expect.shape and y.dtype == dtype and y.is_contiguous()
        # the reference target is torch's own kernel: bit for bit, NaN included
        torch.testing.assert_close(y, expect, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("pool", POOLS, ids=IDS)
def test_unbatched_empty_batch_and_non_contiguous_inputs(pool):
    size = SIZES[pool.rank][0]
    params = params_for(pool, size)[1]
    dtype = pool.dtypes[0]
    x = sample((3, *size), dtype)  # unbatched [C, *spatial]
    torch.testing.assert_close(call(pool, x, params), reference(pool, x, params), rtol=0, atol=0)
    e = sample((0, 3, *size), dtype)  # an empty batch: an empty output, no work
    y = call(pool, e, params)
    assert y.shape == reference(pool, e, params).shape and y.numel() == 0
    big = sample((2, 3, *[2 * d for d in size]), dtype)
    nc = big[..., *([slice(None, None, 2)] * pool.rank)]
    assert not nc.is_contiguous()
    torch.testing.assert_close(call(pool, nc, params), reference(pool, nc.contiguous(), params), rtol=0, atol=0)


def test_ceil_mode_drops_a_last_window_that_starts_in_the_right_padding():
    # L=5, k=2, s=2, p=1: ceil gives 4 windows, the 4th starting at 6 >= 5 + 1 is dropped (torch: 3)
    x = torch.arange(5.0).view(1, 1, 5)
    for stem in ("avg_pool1d", "max_pool1d"):
        pool = BY_STEM[stem]
        params = {"kernel_size": 2, "stride": 2, "padding": 1, "ceil_mode": True}
        y = call(pool, x, params)
        assert y.shape == (1, 1, 3)
        torch.testing.assert_close(y, reference(pool, x, params), rtol=0, atol=0)
    # a last window that starts inside the input is kept: L=6, k=3, s=2 -> 3 windows with ceil (2 without)
    x = torch.arange(6.0).view(1, 1, 6)
    assert call(BY_STEM["avg_pool1d"], x, {"kernel_size": 3, "stride": 2, "ceil_mode": True}).shape == (1, 1, 3)
    assert call(BY_STEM["avg_pool1d"], x, {"kernel_size": 3, "stride": 2}).shape == (1, 1, 2)


def test_max_pool_propagates_nan_and_pads_with_minus_infinity():
    x = torch.tensor([[[-5.0, float("nan"), -7.0, -1.0, -2.0]]])
    y = call(BY_STEM["max_pool1d"], x, {"kernel_size": 3, "stride": 2, "padding": 1})
    assert torch.isnan(y[0, 0, 0]) and torch.isnan(y[0, 0, 1]) and y[0, 0, 2] == -1.0  # padding never wins
    torch.testing.assert_close(y, F.max_pool1d(x, 3, 2, 1), equal_nan=True)


@pytest.mark.parametrize("stem,bad,what", [
    ("avg_pool2d", {"kernel_size": 3, "padding": 2}, "'padding' must be at most half of 'kernel_size'"),
    ("max_pool2d", {"kernel_size": 3, "padding": 2}, "'padding' must be at most half of 'kernel_size'"),
    ("max_pool1d", {"kernel_size": 2, "padding": -1}, "'padding' must be non-negative"),
    ("avg_pool2d", {"kernel_size": 0}, "'kernel_size' must be positive"),
    ("avg_pool2d", {"kernel_size": 2, "stride": 0}, "'stride' must be positive"),
    ("max_pool2d", {"kernel_size": 2, "dilation": 0}, "'dilation' must be positive"),
    ("avg_pool2d", {"kernel_size": 6}, "output size is too small"),
    ("max_pool3d", {"kernel_size": [2, 2, 9]}, "output size is too small"),
    ("max_pool2d", {"kernel_size": 3, "dilation": 4}, "output size is too small"),
    # d(k-1)+1 past int64 gave a wrapped-around output shape
    ("max_pool2d", {"kernel_size": 3, "dilation": 2**63 - 1}, r"argument 'dilation' must be below 2\^31"),
    ("avg_pool2d", {"kernel_size": [2, 2, 2]}, "argument 'kernel_size' must be a single int or 2 ints"),
    ("avg_pool3d", {"kernel_size": [2, 2]}, "argument 'kernel_size' must be a single int or 3 ints"),
    ("avg_pool1d", {"kernel_size": [2, 2]}, "argument 'kernel_size' must be a single int"),
    ("max_pool2d", {"kernel_size": 2, "stride": [1, 1, 1]}, "argument 'stride' must be a single int or 2 ints"),
    ("max_pool2d", {"kernel_size": 2, "padding": [0, 0, 0]}, "argument 'padding' must be a single int or 2 ints"),
    ("max_pool2d", {"kernel_size": 2, "dilation": [1, 1, 1]}, "argument 'dilation' must be a single int or 2 ints"),
    ("adaptive_avg_pool2d", {"output_size": [2, 3, 4]}, "argument 'output_size' must have 2 elements"),
    ("adaptive_max_pool2d", {"output_size": [-1, 2]}, "argument 'output_size' must be >= 0"),
])
def test_bad_params_are_refused_as_torch_refuses_them(stem, bad, what):
    pool = BY_STEM[stem]
    x = sample((2, 3, *([5] * pool.rank)), pool.dtypes[-1])
    with pytest.raises(RuntimeError):
        reference(pool, x, bad)
    with pytest.raises(RuntimeError, match=f"tileops::{pool.name}: .*{what}"):
        call(pool, x, bad)
    with pytest.raises(RuntimeError, match=f"tileops::{pool.name}: .*{what}"):
        call(pool, x.to("meta"), bad)  # the Meta kernel refuses alike


def test_params_from_2_to_the_31_are_refused_where_torch_wraps():
    # torch's max_pool1d with dilation 2^62 gives 3 outputs (its int arithmetic wraps); here no param
    # reaches the shape arithmetic unless it is below 2^31, on real and on fake tensors.
    x = torch.randn(2, 3, 5)
    for name, value in (("dilation", 2**62), ("stride", 2**31), ("kernel_size", 2**40)):
        params = {"kernel_size": 2, name: value}
        for t in (x, x.to("meta")):
            with pytest.raises(RuntimeError, match=rf"tileops::pool_max_pool1d_fwd: argument '{name}' must be below 2\^31"):
                call(BY_STEM["max_pool1d"], t, params)


@pytest.mark.parametrize("stem,params", [("max_pool2d", {"kernel_size": [-2**63]}),
                                         ("avg_pool3d", {"kernel_size": 2, "padding": [0, -2**63, 0]}),
                                         ("adaptive_avg_pool2d", {"output_size": [-2**63, 2]})])
def test_ints_c10_cannot_hold_are_refused_naming_the_op(stem, params):
    pool = BY_STEM[stem]
    x = sample((2, 3, *([5] * pool.rank)), pool.dtypes[-1])
    name = next(iter(params)) if stem != "avg_pool3d" else "padding"
    with pytest.raises(RuntimeError, match=rf"tileops::{pool.name}: argument '{name}' must hold ints above -2\^62"):
        call(pool, x, params)


def test_divisor_override_zero_is_refused_before_any_work():
    x = torch.randn(1, 2, 4, 4)
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        F.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(ValueError, match=r"tileops::pool_avg_pool2d_fwd: .*divisor_override.*"
                                         r"not given\(divisor_override\) or divisor_override != 0"):
        call(BY_STEM["avg_pool2d"], x, {"kernel_size": 2, "divisor_override": 0})


@pytest.mark.parametrize("stem,shape", [
    ("avg_pool2d", (2, 0, 5, 5)), ("avg_pool2d", (0, 5, 5)), ("avg_pool2d", (2, 3, 0, 5)), ("avg_pool2d", (5, 5)),
    ("max_pool1d", (2, 0, 5)), ("max_pool1d", (2, 3, 0)), ("avg_pool3d", (2, 3, 0, 5, 5)), ("max_pool3d", (0, 5, 5, 5)),
    ("max_pool2d", (1, 2, 3, 5, 5)), ("adaptive_avg_pool2d", (2, 3, 0, 5)), ("adaptive_max_pool2d", (2, 0, 5, 5)),
    ("adaptive_max_pool2d", (0, 0, 5, 5)), ("adaptive_avg_pool2d", (5, 5)),
])
def test_inputs_torch_refuses_are_refused(stem, shape):
    pool = BY_STEM[stem]
    x = torch.randn(shape).to(pool.dtypes[-1])
    params = {"output_size": 2} if pool.kind == "adaptive" else {"kernel_size": 2}
    with pytest.raises((RuntimeError, IndexError)):
        reference(pool, x, params)
    with pytest.raises((RuntimeError, ValueError), match=f"tileops::{pool.name}: .*input"):
        call(pool, x, params)


@pytest.mark.parametrize("stem,shape", [
    ("adaptive_avg_pool2d", (2, 0, 5, 5)), ("adaptive_avg_pool2d", (0, 0, 5, 5)), ("adaptive_max_pool2d", (0, 5, 5)),
    ("adaptive_avg_pool2d", (0, 5, 5)), ("avg_pool2d", (0, 3, 5, 5)), ("max_pool3d", (0, 2, 5, 5, 5)),
])
def test_empty_inputs_torch_accepts_give_empty_outputs(stem, shape):
    pool = BY_STEM[stem]
    x = torch.randn(shape).to(pool.dtypes[-1])
    params = {"output_size": 2} if pool.kind == "adaptive" else {"kernel_size": 2}
    y = call(pool, x, params)
    assert y.shape == reference(pool, x, params).shape and y.numel() == 0


def test_adaptive_output_size_zero_gives_an_empty_output():
    for stem in ("adaptive_avg_pool2d", "adaptive_max_pool2d"):
        x = torch.randn(2, 3, 5, 5, dtype=torch.bfloat16)
        assert call(BY_STEM[stem], x, {"output_size": [0, 3]}).shape == (2, 3, 0, 3)


@pytest.mark.parametrize("pool", POOLS, ids=IDS)
def test_dtypes_outside_the_manifest_are_refused(pool):
    bad = torch.float64 if pool.kind != "adaptive" else torch.float32
    params = {"output_size": 2} if pool.kind == "adaptive" else {"kernel_size": 2}
    with pytest.raises(TypeError, match=f"tileops::{pool.name}: 'input' must have dtype"):
        call(pool, torch.randn(1, 2, *([4] * pool.rank), dtype=bad), params)


@pytest.mark.parametrize("pool", POOLS, ids=IDS)
def test_fake_and_meta_shapes_match_torch(pool):
    for size in SIZES[pool.rank]:
        for params in params_for(pool, size):
            x = torch.randn(2, 3, *size, dtype=pool.dtypes[0])
            expect, error = torch_or_error(pool, x, params)
            if error is not None:
                continue
            with FakeTensorMode() as mode:
                fx = mode.from_tensor(x)
                y = call(pool, fx, params)
            assert y.shape == expect.shape and y.dtype == expect.dtype and y.is_contiguous()
            assert call(pool, x.to("meta"), params).shape == expect.shape


@pytest.mark.parametrize("pool", POOLS, ids=IDS)
def test_opcheck(pool):
    size = SIZES[pool.rank][1]
    x = sample((2, 3, *size), pool.dtypes[0])
    params = params_for(pool, size)[1]
    torch.library.opcheck(pool.op.default, (x, *our_args(pool, params)))


def test_op_classes_take_an_int_or_a_list_as_torch_does():
    x = torch.randn(2, 3, 9, 10)
    op = pool_classes.AvgPool2dFwdOp(kernel_size=3, stride=2, padding=1, count_include_pad=False)
    assert op.kernel_size == [3, 3] and op.stride == [2, 2]  # an int stands for every dim
    torch.testing.assert_close(op(x), F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), rtol=0, atol=0)
    op = pool_classes.MaxPool3dFwdOp(kernel_size=[1, 2, 2])
    v = torch.randn(1, 2, 3, 4, 6)
    torch.testing.assert_close(op(v), F.max_pool3d(v, [1, 2, 2]), rtol=0, atol=0)
    op = pool_classes.AdaptiveMaxPool2dFwdOp(output_size=3)
    h = torch.randn(2, 3, 7, 8, dtype=torch.bfloat16)
    torch.testing.assert_close(op(h), F.adaptive_max_pool2d(h, 3), rtol=0, atol=0)
    assert pool_classes.MaxPool1dFwdOp.compile_op_names == ("tileops::pool_max_pool1d_fwd",)
    # the raw operator takes one int too (the schema's SymInt[N] fills it in)
    torch.testing.assert_close(torch.ops.tileops.pool_max_pool2d_fwd(x, 3), F.max_pool2d(x, 3), rtol=0, atol=0)


# Every op compiles cold to one node (tests/contracts/pool.py); dynamic shapes and export here.
@pytest.mark.parametrize("stem,params", [
    ("avg_pool2d", {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}),
    ("max_pool1d", {"kernel_size": 3, "stride": 2, "dilation": 2, "ceil_mode": True}),
    ("max_pool3d", {"kernel_size": [1, 2, 2], "padding": [0, 1, 1]}),
    ("adaptive_avg_pool2d", {"output_size": [3, 2]}),
])
def test_compiles_to_one_node_with_dynamic_shapes_and_exports(stem, params):
    import torch._dynamo
    torch._dynamo.reset()
    pool = BY_STEM[stem]
    rec = GraphRecorder()

    # Under dynamic=True dynamo turns a closure's bare int into a SymInt, which an int[N] argument does
    # not take (torch fills int[N] from a Python int only); lists of them, literals and the Op
    # classes (params fixed at construction) trace as constants.
    listed = {k: [v] if isinstance(v, int) and not isinstance(v, bool) else v for k, v in params.items()}
    fn = torch.compile(lambda x: call(pool, x, listed), fullgraph=True, backend=rec, dynamic=True)
    for n, s in ((4, 9), (5, 12), (6, 17)):  # sizes apart from C=3, so duck sizing ties none
        x = sample((n, 3, *([s] * pool.rank)), pool.dtypes[0])
        torch.testing.assert_close(fn(x), reference(pool, x, params), rtol=0, atol=0)
    assert len(rec.graphs) == 1  # one graph serves every size
    assert rec.calls(packets=True) == [pool.op]

    class M(torch.nn.Module):
        def forward(self, x):
            return call(pool, x, params)

    x = sample((4, 3, *([12] * pool.rank)), pool.dtypes[0])
    ep = torch.export.export(M(), (x,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    assert sum(n.op == "call_function" and getattr(n.target, "overloadpacket", None) == pool.op
               for n in ep.graph.nodes) == 1
    x2 = sample((6, 3, *([12] * pool.rank)), pool.dtypes[0])
    torch.testing.assert_close(ep.module()(x2), reference(pool, x2, params), rtol=0, atol=0)

    torch._dynamo.reset()
    rec = GraphRecorder()
    op = getattr(pool_classes, pool.cls)(**params)  # an int param stands for every dim
    fn = torch.compile(op, fullgraph=True, backend=rec, dynamic=True)
    for n in (4, 5):
        x = sample((n, 3, *([13] * pool.rank)), pool.dtypes[0])
        torch.testing.assert_close(fn(x), reference(pool, x, params), rtol=0, atol=0)
    assert len(rec.graphs) == 1
