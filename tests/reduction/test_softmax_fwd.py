"""SoftmaxFwdOp / LogSoftmaxFwdOp on CPU (reference target) against torch: values for every dim,
non-contiguous x, 0-dim x, meta/fake shapes, opcheck, and errors naming the op, argument and rule."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from tileops.reduction import LogSoftmaxFwdOp, SoftmaxFwdOp
from support.graphs import GraphRecorder

SOFTMAX = torch.ops.tileops.reduction_softmax_fwd
LOG_SOFTMAX = torch.ops.tileops.reduction_log_softmax_fwd
OPS = [(SOFTMAX, torch.softmax, "reduction_softmax_fwd"),
       (LOG_SOFTMAX, torch.log_softmax, "reduction_log_softmax_fwd")]
IDS = ["softmax", "log_softmax"]
DTYPES = [torch.float16, torch.bfloat16, torch.float32]


def _all_dims(shape):
    return list(range(-len(shape), len(shape)))


@pytest.mark.parametrize("op,ref,name", OPS, ids=IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4), (2, 1, 3, 9)], ids=str)
def test_matches_torch_for_every_dim(op, ref, name, dtype, shape):
    x = (torch.randn(shape) * 4).to(dtype)
    for d in _all_dims(shape):
        y = op(x, d)
        assert y.dtype == dtype and y.shape == x.shape and y.is_contiguous()
        torch.testing.assert_close(y, ref(x, d))


@pytest.mark.parametrize("op,ref,name", OPS, ids=IDS)
def test_default_dim_is_last(op, ref, name):
    x = torch.randn(4, 6)
    torch.testing.assert_close(op(x), ref(x, -1))
    torch.testing.assert_close(op(x), op(x, 1))


@pytest.mark.parametrize("op,ref,name", OPS, ids=IDS)
def test_non_contiguous_x(op, ref, name):
    x = torch.randn(6, 10).t()  # (10, 6), strides (1, 10)
    assert not x.is_contiguous()
    for d in (0, 1, -1):
        torch.testing.assert_close(op(x, d), ref(x, d))
    sliced = torch.randn(4, 9, 8)[:, 1::2, ::3]
    for d in _all_dims(sliced.shape):
        torch.testing.assert_close(op(sliced, d), ref(sliced, d))


@pytest.mark.parametrize("op,ref,name", OPS, ids=IDS)
def test_zero_dim_x_like_torch(op, ref, name):
    # torch allows dim in {0, -1} for a 0-dim tensor (a 1-element row): softmax 1, log_softmax 0.
    x = torch.tensor(3.5)
    for d in (0, -1):
        y = op(x, d)
        assert y.shape == () and y.dtype == x.dtype
        torch.testing.assert_close(y, ref(x, d))
    with pytest.raises(ValueError, match=rf"tileops::{name}: shape rule 'dim < ndim\(x\) \+ 1 // \(ndim\(x\) \+ 1\)'"):
        op(x, 1)
    with pytest.raises(ValueError, match=rf"tileops::{name}: shape rule 'dim \+ ndim\(x\) \+ 1 // \(ndim\(x\) \+ 1\) >= 0'"):
        op(x, -2)


@pytest.mark.parametrize("op,ref,name", OPS, ids=IDS)
def test_inf_rows_match_torch(op, ref, name):
    inf = float("inf")
    x = torch.tensor([[1.0, -inf, 2.0, -inf], [-inf, -inf, -inf, -inf], [0.5, 0.25, inf, 1.0]])
    torch.testing.assert_close(op(x), ref(x, -1), equal_nan=True)
    assert op(x)[1].isnan().all()  # an all -inf row is NaN, as in torch


@pytest.mark.parametrize("op,ref,name", OPS, ids=IDS)
def test_empty_and_size_one_dims(op, ref, name, counters):
    y = op(torch.randn(0, 5), 1)
    assert y.shape == (0, 5)
    assert counters()["kernel_builds"] == 0  # nothing to compute
    x = torch.randn(3, 1)
    torch.testing.assert_close(op(x, 1), ref(x, 1))


@pytest.mark.parametrize("op,ref,name", OPS, ids=IDS)
def test_dim_out_of_range_names_op_argument_and_rule(op, ref, name):
    x = torch.randn(2, 3)
    with pytest.raises(ValueError, match=rf"tileops::{name}: shape rule 'dim < ndim\(x\) \+ 1 // \(ndim\(x\) \+ 1\)' "
                                         r"is violated \(left side 2, right side 2\)"):
        op(x, 2)
    with pytest.raises(ValueError, match=rf"tileops::{name}: shape rule 'dim \+ ndim\(x\) \+ 1 // \(ndim\(x\) \+ 1\) >= 0' "
                                         r"is violated \(left side -1, right side 0\)"):
        op(x, -3)
    with pytest.raises(ValueError, match=rf"tileops::{name}: shape rule"):
        op(x.to("meta"), 5)  # the Meta kernel checks too


@pytest.mark.parametrize("op,ref,name", OPS, ids=IDS)
@pytest.mark.parametrize("dtype", [torch.int32, torch.float64], ids=str)
def test_bad_dtype_names_op_and_argument(op, ref, name, dtype):
    with pytest.raises(TypeError, match=rf"tileops::{name}: 'x' must have dtype float16 \| bfloat16 \| float32, "
                                        rf"got {str(dtype).replace('torch.', '')}"):
        op(torch.ones(2, 3, dtype=dtype))


@pytest.mark.parametrize("op,ref,name", OPS, ids=IDS)
def test_meta_gives_contiguous_output_for_non_contiguous_x(op, ref, name, counters):
    x = torch.empty_strided((6, 4, 8), (8, 48, 1), device="meta", dtype=torch.bfloat16)
    assert not x.is_contiguous()
    y = op(x, 1)
    assert y.device.type == "meta" and y.dtype == torch.bfloat16 and y.shape == (6, 4, 8)
    assert y.stride() == (32, 8, 1)
    assert op(torch.empty((), device="meta")).shape == ()
    with FakeTensorMode() as mode:
        f = mode.from_tensor(torch.randn(5, 16).t())
        yf = op(f, 0)
        assert yf.shape == (16, 5) and yf.stride() == (5, 1)
    assert counters()["kernel_builds"] == 0
    real = op(torch.randn(8, 6).t(), 0)
    assert real.stride() == (8, 1)  # real output strides match the Meta kernel's


@pytest.mark.parametrize("op,ref,name", OPS, ids=IDS)
def test_opcheck(op, ref, name):
    for args in [(torch.randn(4, 8), -1), (torch.randn(3, 5, 2), 1), (torch.randn(6, 4).t(), 0),
                 (torch.randn(2, 16, dtype=torch.bfloat16), 0), (torch.tensor(1.5), 0)]:
        torch.library.opcheck(op.default, args)


def test_op_classes():
    assert SoftmaxFwdOp.compile_op_names == ("tileops::reduction_softmax_fwd",)
    assert LogSoftmaxFwdOp.compile_op_names == ("tileops::reduction_log_softmax_fwd",)
    x = torch.randn(3, 4, 5)
    assert SoftmaxFwdOp().dim == -1
    torch.testing.assert_close(SoftmaxFwdOp(dim=1)(x), torch.softmax(x, 1))
    torch.testing.assert_close(LogSoftmaxFwdOp(0)(x), torch.log_softmax(x, 0))
    torch.testing.assert_close(SoftmaxFwdOp(target="reference")(x), torch.softmax(x, -1))


def test_nvrtc_target_on_cpu_tensors_is_refused_clearly():
    with pytest.raises(RuntimeError, match=r"target 'nvrtc' serves CUDA tensors only, got cpu"):
        SOFTMAX(torch.randn(2, 8), -1, target="nvrtc")
    with pytest.raises(RuntimeError, match=r"target 'nvrtc' serves CUDA tensors only, got cpu"):
        LOG_SOFTMAX(torch.randn(2, 8), 0, target="nvrtc")


def test_compiled_graph_is_one_node_per_call():
    import torch._dynamo
    torch._dynamo.reset()
    rec = GraphRecorder()

    fn = torch.compile(lambda x: LOG_SOFTMAX(SOFTMAX(x, 0), -1), fullgraph=True, backend=rec)
    x = torch.randn(5, 7)
    torch.testing.assert_close(fn(x), torch.log_softmax(torch.softmax(x, 0), -1))
    assert rec.calls(packets=True) == [SOFTMAX, LOG_SOFTMAX]
