"""The scans (CumsumFwdOp, CumprodFwdOp, LogCumSumExpFwdOp) on CPU (reference target) against
torch.cumsum / cumprod / logcumsumexp: every x dtype and dim, dtype=, torch's int64 promotion, NaN/inf,
0-dim, empty and non-contiguous x, the out= branch; Meta/fake shapes and dtypes, opcheck, one node under
torch.compile with dynamic shapes, torch.export; errors naming the op, the argument and the rule."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import tileops.reduction as reduction
from support.scan_cases import CUMS, DTYPE_CHOICES, LOGCUMSUMEXP, SCANS, X_DTYPES, sample
from support.graphs import GraphRecorder


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape and got.is_contiguous()
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)  # the same ATen scan


@pytest.mark.parametrize("scan", SCANS, ids=str)
def test_matches_torch_for_every_dtype_and_dim(scan):
    for dtype in scan.dtypes:
        x = sample(scan, (3, 4, 5), dtype)
        for dim in range(-3, 3):
            _same(scan.op(x, dim), scan.ref(x, dim))


@pytest.mark.parametrize("scan", CUMS, ids=str)
def test_integer_and_bool_x_give_int64_floats_keep_their_dtype(scan):
    for dtype in X_DTYPES:
        y = scan.op(sample(scan, (2, 3), dtype), 1)
        assert y.dtype == (dtype if dtype.is_floating_point else torch.int64), dtype
    x = torch.tensor([True, True, False, True])
    assert scan.op(x, 0).tolist() == scan.ref(x, 0).tolist() == ([1, 2, 2, 3] if scan.stem == "cumsum" else [1, 1, 0, 0])


@pytest.mark.parametrize("scan", CUMS, ids=str)
def test_dtype_casts_x_first_for_every_choice(scan):
    for x_dtype in (torch.int32, torch.bfloat16, torch.float32, torch.bool):
        x = sample(scan, (4, 6), x_dtype)
        for dtype in DTYPE_CHOICES:
            for dim in (0, -1):
                _same(scan.op(x, dim, dtype=dtype), scan.ref(x, dim, dtype=dtype))
    # an integer dtype= truncates floats first and wraps as torch's integer scan does
    x = torch.tensor([1.9, -2.7, 100.0, 100.0, 100.0])
    _same(scan.op(x, 0, dtype=torch.int8), scan.ref(x, 0, dtype=torch.int8))
    assert scan.op(x, 0, dtype=torch.int32).tolist() == scan.ref(x.to(torch.int32), 0).tolist()


def test_integer_scans_wrap_like_torch():
    x = torch.tensor([100, 100, 100, 100], dtype=torch.int8)
    got = torch.ops.tileops.reduction_cumsum_fwd(x, 0, dtype=torch.int8)
    assert got.tolist() == [100, -56, 44, -112] == torch.cumsum(x, 0, dtype=torch.int8).tolist()
    big = torch.full((70,), 3, dtype=torch.int64)
    _same(torch.ops.tileops.reduction_cumprod_fwd(big, 0), torch.cumprod(big, 0))  # past 2**63: wraps


def test_nan_and_inf_propagate_as_torch():
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[1.0, nan, 2.0, 3.0], [inf, 1.0, -inf, 1.0], [0.0, 2.0, inf, 1.0], [-inf, -2.0, 0.5, -1.0]])
    for scan in SCANS:
        for dim in (0, 1):
            _same(scan.op(x, dim), scan.ref(x, dim))
    assert torch.ops.tileops.reduction_cumsum_fwd(x, 1)[1].tolist()[:2] == [inf, inf]
    assert torch.ops.tileops.reduction_cumsum_fwd(x, 1)[1, 2:].isnan().all()   # inf + -inf
    assert torch.ops.tileops.reduction_cumprod_fwd(x, 1)[2, 2:].isnan().all()  # 0 * inf
    lcse = torch.ops.tileops.reduction_log_cum_sum_exp_fwd
    y = lcse(torch.tensor([-inf, -inf, 0.0, inf, 1.0, -inf, nan, 2.0]), 0)
    assert y[:2].tolist() == [-inf, -inf] and y[2] == 0 and y[3:6].tolist() == [inf] * 3 and y[6:].isnan().all()


@pytest.mark.parametrize("scan", SCANS, ids=str)
def test_zero_dim_empty_and_size_one_x(scan, counters):
    x0 = torch.tensor(2.5)
    for dim in (0, -1):  # a 0-dim x takes dim 0 or -1, as in torch
        _same(scan.op(x0, dim), scan.ref(x0, dim))
    xi = torch.tensor(7, dtype=torch.int16 if scan.takes_dtype else torch.float16)
    _same(scan.op(xi, 0), scan.ref(xi, 0))
    builds = counters()["kernel_builds"]
    for shape, dim in (((0, 3), 0), ((0, 3), 1), ((3, 0), 1), ((2, 0, 4), -1)):
        x = torch.randn(shape)
        _same(scan.op(x, dim), scan.ref(x, dim))
        other = x.to(torch.int32 if scan.takes_dtype else torch.float64)
        _same(scan.op(other, dim), scan.ref(other, dim))
    assert counters()["kernel_builds"] == builds  # an empty y consults no target
    x = torch.randn(5, 1, 3)
    _same(scan.op(x, 1), scan.ref(x, 1))


@pytest.mark.parametrize("scan", SCANS, ids=str)
def test_non_contiguous_x(scan):
    xt = sample(scan, (6, 5, 4), torch.float32).transpose(0, 2)[:, 1::2]
    assert not xt.is_contiguous()
    for dim in range(3):
        _same(scan.op(xt, dim), scan.ref(xt, dim))


@pytest.mark.parametrize("scan", CUMS, ids=str)
def test_out_buffer_gets_the_result(scan):
    x = sample(scan, (4, 9), torch.bfloat16)
    out = torch.full((4, 9), 7.0)
    ptr = out.data_ptr()
    assert scan.op_out(x, out, 1, dtype=torch.float32) is None
    assert out.data_ptr() == ptr
    _same(out, scan.ref(x, 1, dtype=torch.float32))
    storage = torch.full((9, 8), 7, dtype=torch.int64)
    view = storage.t()[::2]  # (4, 9), strides (2, 8)
    assert not view.is_contiguous()
    xi = sample(scan, (4, 9), torch.int32)
    scan.op_out(xi, view, 0)
    assert torch.equal(view, scan.ref(xi, 0))
    assert torch.equal(storage.t()[1::2], torch.full((4, 9), 7, dtype=torch.int64))  # other columns untouched


def test_logcumsumexp_out_buffer():
    x = sample(LOGCUMSUMEXP, (4, 9), torch.bfloat16)
    out = torch.empty(9, 4, dtype=torch.bfloat16).t()  # non-contiguous: the result is copied back
    LOGCUMSUMEXP.op_out(x, out, 1)
    _same(out.contiguous(), torch.logcumsumexp(x, 1))
    with pytest.raises(TypeError, match=r"tileops::reduction_log_cum_sum_exp_fwd_out: 'out' must have dtype bfloat16"):
        LOGCUMSUMEXP.op_out(x, torch.empty(4, 9), 1)


@pytest.mark.parametrize("scan", CUMS, ids=str)
def test_wrong_out_buffers_are_clear_errors(scan):
    prefix = rf"tileops::{scan.name}_out: 'out' must "
    x = torch.randn(3, 4)
    with pytest.raises(TypeError, match=prefix + r"have dtype float16, got float32"):
        scan.op_out(x, torch.empty(3, 4), 1, dtype=torch.float16)
    with pytest.raises(TypeError, match=prefix + r"have dtype int64, got int32"):  # int x promotes to int64
        scan.op_out(x.int(), torch.empty(3, 4, dtype=torch.int32), 1)
    with pytest.raises(RuntimeError, match=prefix + r"have shape \[3, 4\], got \[4, 3\]"):
        scan.op_out(x, torch.empty(4, 3), 1)


@pytest.mark.parametrize("scan", SCANS, ids=str)
def test_dim_out_of_range_names_op_argument_and_rule(scan):
    x = torch.randn(2, 3)
    for bad, rule in ((2, r"dim < ndim\(x\) \+ 1 // \(ndim\(x\) \+ 1\)"),
                      (-3, r"dim \+ ndim\(x\) \+ 1 // \(ndim\(x\) \+ 1\) >= 0")):
        with pytest.raises(ValueError, match=rf"tileops::{scan.name}: shape rule '{rule}' is violated"):
            scan.op(x, bad)
        with pytest.raises(ValueError, match=rf"tileops::{scan.name}: shape rule '{rule}'"):
            scan.op(x.to("meta"), bad)  # the Meta kernel checks too
    with pytest.raises(ValueError, match=rf"tileops::{scan.name}: shape rule"):
        scan.op(torch.tensor(1.0), 1)  # a 0-dim x takes dim 0 or -1 only


@pytest.mark.parametrize("scan", SCANS, ids=str)
def test_bad_dtypes_name_op_and_argument(scan):
    with pytest.raises(TypeError, match=rf"tileops::{scan.name}: 'x' must have dtype"):
        scan.op(torch.ones(2, 3, dtype=torch.complex64), 1)
    if not scan.takes_dtype:
        with pytest.raises(TypeError, match=rf"tileops::{scan.name}: 'x' must have dtype"):
            scan.op(torch.ones(2, 3, dtype=torch.int64), 1)  # torch.logcumsumexp refuses integers too
        return
    with pytest.raises(ValueError, match=rf"tileops::{scan.name}: 'dtype' must be one of .*, got bool"):
        scan.op(torch.ones(2, 3), 1, dtype=torch.bool)  # torch has no bool scan either
    with pytest.raises(RuntimeError, match=r"target 'nvrtc' serves CUDA tensors only, got cpu"):
        scan.op(torch.ones(2, 3), 1, target="nvrtc")


@pytest.mark.parametrize("scan", CUMS, ids=str)
def test_meta_and_fake_shapes_and_dtypes(scan, counters):
    x = torch.empty_strided((6, 4, 8), (8, 48, 1), device="meta", dtype=torch.int16)
    for dim in range(-3, 3):
        for dtype, want in ((None, torch.int64), (torch.bfloat16, torch.bfloat16)):
            y = scan.op(x, dim, dtype=dtype)
            assert y.device.type == "meta" and y.shape == x.shape and y.dtype == want and y.is_contiguous()
    real = sample(scan, (6, 4, 8), torch.float16)
    with FakeTensorMode() as mode:
        y = scan.op(mode.from_tensor(real), 1, dtype=torch.float32)
        assert y.shape == real.shape and y.dtype == torch.float32
    assert counters()["kernel_builds"] == 0


def test_logcumsumexp_meta_keeps_x_dtype(counters):
    x = torch.empty_strided((6, 4, 8), (8, 48, 1), device="meta", dtype=torch.float16)
    for dim in range(-3, 3):
        y = LOGCUMSUMEXP.op(x, dim)
        assert y.device.type == "meta" and y.shape == x.shape and y.dtype == torch.float16 and y.is_contiguous()
    assert counters()["kernel_builds"] == 0


@pytest.mark.parametrize("scan", SCANS, ids=str)
def test_opcheck(scan):
    x = sample(scan, (4, 6, 3), torch.float32)
    torch.library.opcheck(scan.op.default, (x, 1))
    if scan.takes_dtype:
        torch.library.opcheck(scan.op.default, (x.int(), -1), {"dtype": torch.float64})
    torch.library.opcheck(scan.op_out.default, (x, torch.empty(4, 6, 3), 0))


@pytest.mark.parametrize("scan", SCANS, ids=str)
def test_compiles_to_one_node_with_dynamic_shapes_and_exports(scan):
    import torch._dynamo
    torch._dynamo.reset()
    rec = GraphRecorder()

    kwargs = {"dtype": torch.float32} if scan.takes_dtype else {}
    fn = torch.compile(lambda x: scan.op(x, -1, **kwargs), fullgraph=True, backend=rec, dynamic=True)
    for rows in (3, 5):
        x = sample(scan, (rows, 8), torch.bfloat16)
        _same(fn(x), scan.ref(x, -1, **kwargs))
    assert len(rec.graphs) == 1  # one graph serves both sizes
    assert rec.calls(packets=True) == [scan.op]

    class M(torch.nn.Module):
        def forward(self, x):
            return scan.op(x, 0)

    x = sample(scan, (4, 8), torch.float32)
    ep = torch.export.export(M(), (x,), dynamic_shapes=({0: torch.export.Dim("rows")},))
    assert sum(n.op == "call_function" and getattr(n.target, "overloadpacket", None) == scan.op
               for n in ep.graph.nodes) == 1
    _same(ep.module()(x), scan.ref(x, 0))


def test_op_classes():
    assert reduction.CumsumFwdOp.compile_op_names == ("tileops::reduction_cumsum_fwd",
                                                      "tileops::reduction_cumsum_fwd_out")
    x = torch.randn(3, 4, 5)
    torch.testing.assert_close(reduction.CumsumFwdOp(dim=1)(x), torch.cumsum(x, 1), rtol=0, atol=0)
    torch.testing.assert_close(reduction.CumprodFwdOp(dim=-1, dtype=torch.float64)(x), torch.cumprod(x, -1, dtype=torch.float64),
                               rtol=0, atol=0)
    out = torch.empty(3, 4, 5)
    reduction.CumsumFwdOp(dim=0)(x, out=out)
    torch.testing.assert_close(out, torch.cumsum(x, 0), rtol=0, atol=0)
    torch.testing.assert_close(reduction.LogCumSumExpFwdOp(dim=2)(x), torch.logcumsumexp(x, 2), rtol=0, atol=0)
