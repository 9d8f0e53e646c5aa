"""The max pools with indices on CPU (reference target) against torch.nn.functional's
return_indices=True: values and int64 indices on every param combination of the pool tests, inputs
full of ties and NaNs, unbatched and non-contiguous inputs, Meta/fake shapes, torch.compile (one
node) and torch.export, opcheck, and torch's refusals named by the op."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import tileops.pool as pool_classes
from support.graphs import GraphRecorder
from support.pool_cases import BY_STEM, SIZES, our_args, params_for
from support.pool_indices_cases import STEMS, assert_same, call, cases, op, reference, ties_and_nans


@pytest.mark.parametrize("stem,size,params", [pytest.param(*c, id=f"{c[0]}-{'x'.join(map(str, c[1]))}-{c[2]}")
                                              for c in cases()])
def test_values_and_indices_match_torch(stem, size, params):
    for dtype in BY_STEM[stem].dtypes:
        x = ties_and_nans((2, 3, *size), dtype, seed=sum(size))
        assert_same(call(stem, x, params), reference(stem, x, params))


@pytest.mark.parametrize("stem", STEMS)
def test_unbatched_and_non_contiguous_inputs_and_the_class(stem):
    pool = BY_STEM[stem]
    size = SIZES[pool.rank][0]
    params = params_for(pool, size)[1]
    dtype = pool.dtypes[0]
    x = ties_and_nans((3, *size), dtype, seed=1)
    assert_same(call(stem, x, params), reference(stem, x, params))
    big = ties_and_nans((2, 3, *[2 * d for d in size]), dtype, seed=2)
    nc = big[..., *([slice(None, None, 2)] * pool.rank)]
    assert_same(call(stem, nc, params), reference(stem, nc.contiguous(), params))
    cls = getattr(pool_classes, pool.cls.replace("FwdOp", "IndicesFwdOp"))
    kwargs = dict(params)
    if kwargs.get("stride") is None:
        kwargs.pop("stride", None)
    assert_same(cls(**kwargs)(nc), reference(stem, nc.contiguous(), params))


@pytest.mark.parametrize("stem", STEMS)
def test_meta_fake_compile_and_export(stem, counters):
    pool = BY_STEM[stem]
    size = SIZES[pool.rank][1]
    params = params_for(pool, size)[1]
    dtype = pool.dtypes[-1]
    x = ties_and_nans((2, 3, *size), dtype, seed=3)
    y_ref, i_ref = reference(stem, x, params)
    y, i = call(stem, x.to("meta"), params)
    assert y.shape == y_ref.shape and i.shape == i_ref.shape and i.dtype == torch.int64 and y.dtype == dtype
    with FakeTensorMode():
        y, i = call(stem, torch.empty(x.shape, dtype=dtype), params)
        assert i.shape == i_ref.shape and i.dtype == torch.int64
    assert counters()["kernel_builds"] == 0

    torch._dynamo.reset()
    rec = GraphRecorder()
    fn = torch.compile(lambda t: call(stem, t, params), fullgraph=True, backend=rec)
    assert_same(fn(x), (y_ref, i_ref))
    assert rec.calls(packets=True) == [op(stem)]

    class M(torch.nn.Module):
        def forward(self, t):
            return call(stem, t, params)

    ep = torch.export.export(M(), (x,))
    assert sum(n.op == "call_function" and n.target == op(stem).default for n in ep.graph.nodes) == 1
    assert_same(ep.module()(x), (y_ref, i_ref))


@pytest.mark.parametrize("stem", STEMS)
def test_opcheck(stem):
    pool = BY_STEM[stem]
    size = SIZES[pool.rank][0]
    params = params_for(pool, size)[2]
    x = torch.randn(2, 3, *size).to(pool.dtypes[0])
    torch.library.opcheck(op(stem).default, (x, *our_args(pool, params)))


def test_refusals_name_the_op():
    with pytest.raises(RuntimeError, match="tileops::pool_max_pool2d_indices_fwd: .*kernel_size"):
        call("max_pool2d", torch.randn(1, 2, 5, 5), {"kernel_size": 0})
    with pytest.raises(TypeError, match="tileops::pool_adaptive_max_pool2d_indices_fwd: .*input"):
        call("adaptive_max_pool2d", torch.randn(1, 2, 5, 5, dtype=torch.float64), {"output_size": [2, 2]})
