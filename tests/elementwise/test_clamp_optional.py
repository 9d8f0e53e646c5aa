"""ClampFwdOp with either tensor bound left out (TileOPs' signature, torch.clamp's): the answers are
torch.clamp's (torch.clamp_min / torch.clamp_max), a bound left out takes no part in the dtype or the
broadcast shape, every branch (plain, in place, out=) takes None, neither bound is refused naming the
rule, and the compiler, fake tensors and export see one node."""
import pytest
import torch
import torch._dynamo.testing

import tileops
from tileops.elementwise import ClampFwdOp

tileops.load()
ops = torch.ops.tileops


def bounds(dtype=torch.float32):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 1, 6, generator=g).to(dtype)
    x[0, 0, 0] = float("nan") if dtype.is_floating_point else x[0, 0, 0]
    lo = (torch.randn(5, 1, generator=g) - 0.5).to(dtype)
    hi = (torch.randn(6, generator=g) + 0.5).to(dtype)
    return x, lo, hi


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
@pytest.mark.parametrize("given", ["min", "max", "both"])
def test_answers_are_torch_clamps(dtype, given):
    x, lo, hi = bounds(dtype)
    lo, hi = (lo if given != "max" else None), (hi if given != "min" else None)
    got = ops.elementwise_clamp_fwd(x, lo, hi)
    want = torch.clamp(x, min=lo, max=hi)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)


def test_a_bound_left_out_takes_no_part_in_dtype_or_shape():
    x = torch.arange(-3, 3, dtype=torch.int32).reshape(2, 3)
    hi = torch.tensor([1.5, 0.5, 2.5])  # float32 bound: the result is float32
    got = ops.elementwise_clamp_fwd(x, None, hi)
    assert got.dtype == torch.float32 and torch.equal(got, torch.clamp(x, max=hi))
    lo = torch.zeros(3, 1, 1, dtype=torch.int64)  # a bound of more dims broadcasts the result
    assert ops.elementwise_clamp_fwd(x, lo, None).shape == (3, 2, 3)
    assert ops.elementwise_clamp_fwd(x.to("meta"), None, hi.to("meta")).dtype == torch.float32


def test_neither_bound_is_refused_naming_the_rule():
    with pytest.raises(ValueError, match=r"tileops::elementwise_clamp_fwd: arguments \(min, max\) break the rule "
                                         r"'given\(min\) or given\(max\)'"):
        ops.elementwise_clamp_fwd(torch.randn(3), None, None)


def test_in_place_and_out_branches_take_none():
    x, lo, hi = bounds()
    y = x.clone()
    ops.elementwise_clamp_fwd_writes_input(y, None, hi)
    torch.testing.assert_close(y, torch.clamp(x, max=hi), equal_nan=True)
    x2 = torch.randn(5, 6)
    out = torch.empty(5, 6)
    ops.elementwise_clamp_fwd_out(x2, lo, None, out=out)
    assert torch.equal(out, torch.clamp(x2, min=lo))


def test_op_class_takes_bounds_by_name_or_position():
    x, lo, hi = bounds()
    clamp = ClampFwdOp()
    torch.testing.assert_close(clamp(x, max=hi), torch.clamp(x, max=hi), equal_nan=True)
    torch.testing.assert_close(clamp(x, lo), torch.clamp(x, min=lo), equal_nan=True)
    torch.testing.assert_close(clamp(x, min=lo, max=hi), torch.clamp(x, lo, hi), equal_nan=True)
    with pytest.raises(TypeError, match="ClampFwdOp has no tensor input 'high'"):
        clamp(x, high=hi)
    with pytest.raises(TypeError, match="input 'min' given by position and by name"):
        clamp(x, lo, min=lo)


@pytest.mark.parametrize("given", ["min", "max"])
def test_opcheck_compile_and_export_with_a_bound_left_out(given):
    x, lo, hi = bounds()
    x = torch.nan_to_num(x)  # opcheck compares without equal_nan
    args = (x, lo, None) if given == "min" else (x, None, hi)
    torch.library.opcheck(ops.elementwise_clamp_fwd, args)

    def f(a, b):
        return ops.elementwise_clamp_fwd(a, b, None) if given == "min" else ops.elementwise_clamp_fwd(a, None, b)
    b = args[1] if given == "min" else args[2]
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")
    torch.testing.assert_close(torch.compile(f, fullgraph=True, backend=counter)(x, b), f(x, b), equal_nan=True)
    assert counter.frame_count == 1

    class M(torch.nn.Module):
        def forward(self, a, b):
            return f(a, b)
    ep = torch.export.export(M(), (x, b))
    nodes = [n for n in ep.graph.nodes if n.op == "call_function"]
    assert [str(n.target) for n in nodes] == ["tileops.elementwise_clamp_fwd.default"]
    torch.testing.assert_close(ep.module()(x, b), f(x, b), equal_nan=True)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.int32])
def test_cuda_kernels_answer_every_set_of_bounds(dt):
    # each set of bounds given is its own nvrtc kernel (a bound broadcast by row, by column, strided)
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(1000, 37, generator=g) * 4).to(dt).cuda()
    lo = (torch.randn(37, generator=g) - 1).to(dt).cuda()
    hi = (torch.randn(1000, 1, generator=g) + 1).to(dt).cuda()
    for a, b in ((lo, None), (None, hi), (lo, hi), (None, hi.t().contiguous().t())):
        got = ops.elementwise_clamp_fwd(x, a, b)
        assert torch.equal(got, torch.clamp(x, min=a, max=b)), (dt, a is None, b is None)
