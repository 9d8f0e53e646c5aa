"""Activation family on CPU (reference target): every op and branch against torch, the boundary's
generated behaviour (non-contiguous inputs, in-place write-back, out buffers, errors), Meta/fake
shapes, opcheck of every operator, the Op-class view (inplace=, out=) and compile."""
import pytest
import torch
import torch._dynamo
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

import tileops
from tileops.activation import (FatreluAndMulFwdOp, GeluAndMulFwdOp, GeluFwdOp, GeluTanhAndMulFwdOp,
                                MulAndSiluFwdOp, QuickGeluFwdOp, ReluFwdOp, SigmoidFwdOp, SiluAndMulFwdOp, SiluFwdOp,
                                SwigluOAIAndMulFwdOp)

ops = torch.ops.tileops
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: dict(rtol=1e-6, atol=1e-6), torch.float16: dict(rtol=1e-3, atol=1e-3),
       torch.bfloat16: dict(rtol=8e-3, atol=8e-3)}

from support.activation_cases import (GATED, GATED_FORMULAS, IN_PLACE, INT_DTYPES, UNARY, formula_ref,  # noqa: E402
                                      gated_ref, int_sample, promoted)
from support.graphs import GraphRecorder  # noqa: E402


def sample(shape, dtype):
    # Spans the curved parts of the activations and both signs; includes exact zeros.
    x = torch.randn(shape) * 3
    x.view(-1)[::7] = 0
    return x.to(dtype)


# ---- unary ops ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("shape", [(1,), (37,), (4, 129), (2, 3, 64), (0, 5)], ids=str)
def test_unary_matches_torch(name, dtype, shape):
    op, _, params, ref = UNARY[name]
    x = sample(shape, dtype)
    y = op(x, *params)
    assert y.shape == x.shape and y.dtype == dtype and y.is_contiguous()
    torch.testing.assert_close(y, ref(x), **TOL[dtype])
    if dtype == torch.float32:
        torch.testing.assert_close(y, ref(x), rtol=0, atol=0)  # the reference target is ref_api itself


def test_gelu_modes_differ_so_the_param_reaches_the_kernel():
    x = torch.linspace(-3, 3, 101)
    assert not torch.equal(ops.activation_gelu_fwd(x, "tanh"), ops.activation_gelu_fwd(x, "none"))
    torch.testing.assert_close(GeluFwdOp(approximate="tanh")(x), F.gelu(x, approximate="tanh"), rtol=0, atol=0)


def test_relu_keeps_nan_and_zeroes_negatives():
    x = torch.tensor([float("nan"), -1.0, -0.0, 0.0, 2.5, float("-inf"), float("inf")])
    y = ops.activation_relu_fwd(x)
    torch.testing.assert_close(y, torch.relu(x), equal_nan=True)
    assert torch.isnan(y[0])


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_non_contiguous_input_gives_contiguous_output(name):
    op, _, params, ref = UNARY[name]
    x = sample((64, 48), torch.float32).t()[::2]  # transposed and strided
    assert not x.is_contiguous()
    y = op(x, *params)
    assert y.is_contiguous() and y.shape == x.shape
    # ATen's CPU kernels differ by an ulp between strided and contiguous loops: compare contiguous.
    torch.testing.assert_close(y, ref(x.contiguous()), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", IN_PLACE)
def test_in_place_branch_writes_x_and_returns_nothing(name, dtype):
    _, op_, params, ref = UNARY[name]
    x = sample((5, 33), dtype)
    expected, ptr = ref(x), x.data_ptr()
    assert op_(x, *params) is None
    assert x.data_ptr() == ptr
    torch.testing.assert_close(x, expected, **TOL[dtype])


@pytest.mark.parametrize("name", IN_PLACE)
def test_in_place_non_contiguous_x_is_written_back_and_nothing_else(name):
    _, op_, params, ref = UNARY[name]
    base = sample((16, 40), torch.float32)
    before = base.clone()
    x = base.t()[:, ::2]  # non-contiguous view: every other row of base
    assert not x.is_contiguous()
    op_(x, *params)
    torch.testing.assert_close(base[::2], ref(before[::2].contiguous()), rtol=0, atol=0)  # written back through the view
    assert torch.equal(base[1::2], before[1::2])  # rows outside the view untouched


def test_in_place_bumps_the_version_counter():
    x = torch.randn(8)
    v = x._version
    ops.activation_silu_fwd_writes_x(x)
    assert x._version > v


# ---- SigmoidFwdOp: integer and bool x give float32 y (promote_int_to_float) --------------------

@pytest.mark.parametrize("dtype", DTYPES + INT_DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1,), (37,), (4, 129), (2, 3, 64), (0, 5)], ids=str)
def test_sigmoid_every_dtype_matches_torch(dtype, shape):
    x = int_sample(shape, dtype) if dtype in INT_DTYPES else sample(shape, dtype)
    y = ops.activation_sigmoid_fwd(x)
    expected = torch.sigmoid(x)  # float32 for integer x under the default dtype
    assert y.dtype == promoted(dtype) == expected.dtype and y.shape == x.shape and y.is_contiguous()
    torch.testing.assert_close(y, expected, rtol=0, atol=0)  # the reference target is ref_api itself
    torch.testing.assert_close(y.double(), torch.sigmoid(x.double()), **TOL[y.dtype])  # and it is sigmoid


@pytest.mark.parametrize("dtype", [d for d in INT_DTYPES if d != torch.bool], ids=str)
def test_sigmoid_integer_extremes_saturate(dtype):
    info = torch.iinfo(dtype)
    x = torch.tensor([info.min, -1 if info.min < 0 else 1, 0, 1, info.max], dtype=dtype)
    y = ops.activation_sigmoid_fwd(x)
    assert y.dtype == torch.float32
    assert y[2] == 0.5 and y[-1] == 1.0
    assert y[0] == (0.0 if info.min < 0 else 0.5)  # exp(-min) overflows to inf: exactly 0


def test_sigmoid_bool_is_zero_or_one():
    y = ops.activation_sigmoid_fwd(torch.tensor([True, False, True]))
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, torch.tensor([1.0, 0.0, 1.0]).sigmoid(), rtol=0, atol=0)


def test_sigmoid_integer_y_is_float32_whatever_the_default_dtype():
    # Documented: torch.sigmoid follows torch.get_default_dtype(); the manifest's y is float32.
    x = int_sample((3, 7), torch.int32)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert torch.sigmoid(x).dtype == torch.float64
        y = ops.activation_sigmoid_fwd(x)
    finally:
        torch.set_default_dtype(old)
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, torch.sigmoid(x.float()), rtol=0, atol=0)


def test_sigmoid_non_contiguous_integer_x():
    x = int_sample((40, 64), torch.int16).t()[::3]
    assert not x.is_contiguous()
    y = ops.activation_sigmoid_fwd(x)
    assert y.dtype == torch.float32 and y.is_contiguous()
    torch.testing.assert_close(y, torch.sigmoid(x.contiguous()), rtol=0, atol=0)


@pytest.mark.parametrize("dtype,got", [(torch.float64, "float64"), (torch.complex64, "complex64")], ids=str)
def test_sigmoid_unsupported_dtype_names_op_argument_and_rule(dtype, got):
    with pytest.raises(TypeError, match=r"tileops::activation_sigmoid_fwd: 'x' must have dtype float16 \| bfloat16 "
                                        r"\| float32 \| uint8 \| int8 \| int16 \| int32 \| int64 \| bool, "
                                        rf"got {got}"):
        ops.activation_sigmoid_fwd(torch.ones(2, 8, dtype=dtype))
    with pytest.raises(TypeError, match=r"tileops::activation_sigmoid_fwd: 'x' must have dtype"):
        ops.activation_sigmoid_fwd(torch.ones(2, 8, dtype=dtype, device="meta"))  # the Meta kernel checks too


@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8, torch.bool, torch.int64, torch.bfloat16], ids=str)
def test_sigmoid_meta_and_fake_output_dtype(dtype, counters):
    y = ops.activation_sigmoid_fwd(torch.empty(8, 6, device="meta", dtype=dtype).t())
    assert y.device.type == "meta" and y.shape == (6, 8) and y.dtype == promoted(dtype) and y.stride() == (8, 1)
    with FakeTensorMode() as mode:
        fx = mode.from_tensor(int_sample((5, 7), dtype) if dtype in INT_DTYPES else sample((5, 7), dtype))
        fy = ops.activation_sigmoid_fwd(fx)
        assert fy.shape == (5, 7) and fy.dtype == promoted(dtype)
    assert counters()["kernel_builds"] == 0


def test_sigmoid_has_no_in_place_branch():
    assert SigmoidFwdOp.compile_op_names == ("tileops::activation_sigmoid_fwd",)
    assert not hasattr(ops, "activation_sigmoid_fwd_writes_x")
    with pytest.raises(TypeError, match=r"SigmoidFwdOp has no in-place branch"):
        SigmoidFwdOp(inplace=True)


def test_sigmoid_compiled_graph_has_float32_output_for_integer_x():
    torch._dynamo.reset()
    seen = []

    def backend(gm, example_inputs):
        seen.extend(n.meta["example_value"].dtype for n in gm.graph.nodes  # the fake result of our Meta kernel
                    if n.op == "call_function" and n.target is ops.activation_sigmoid_fwd.default)
        return gm.forward

    op = SigmoidFwdOp()
    x = int_sample((6, 33), torch.int8)
    y = torch.compile(lambda t: op(t) * 2, fullgraph=True, dynamic=True, backend=backend)(x)
    assert seen == [torch.float32]
    torch.testing.assert_close(y, torch.sigmoid(x) * 2, rtol=0, atol=0)


# ---- gated ops ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(GATED))
@pytest.mark.parametrize("shape", [(1, 2), (3, 46), (2, 5, 256), (7, 1000), (0, 8)], ids=str)
def test_gated_matches_formula(name, dtype, shape):
    op, _, act = GATED[name]
    x = sample(shape, dtype)
    y = op(x)
    assert y.shape == (*shape[:-1], shape[-1] // 2) and y.dtype == dtype and y.is_contiguous()
    torch.testing.assert_close(y, gated_ref(act, x), rtol=0, atol=0)  # fp32 math, one rounding
    d = shape[-1] // 2
    torch.testing.assert_close(y, act(x[..., :d]) * x[..., d:], **TOL[dtype])  # the formula in x's dtype


@pytest.mark.parametrize("name", sorted(GATED))
def test_gated_non_contiguous_input(name):
    op, _, act = GATED[name]
    x = sample((64, 24), torch.float32).t()  # (24, 64), strides (1, 24)
    torch.testing.assert_close(op(x), gated_ref(act, x.contiguous()), rtol=0, atol=0)


@pytest.mark.parametrize("name", sorted(GATED))
def test_gated_odd_last_dim_names_the_rule(name):
    op = GATED[name][0]
    with pytest.raises(RuntimeError, match=rf"tileops::activation_{name}_fwd: 'x' must have shape "
                                           r"\[\.\.\., 2\*d\], got \[3, 7\]"):
        op(torch.randn(3, 7))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(GATED))
def test_out_buffer_gets_the_result(name, dtype):
    _, op_out, act = GATED[name]
    x = sample((6, 80), dtype)
    out = torch.full((6, 40), 7.0, dtype=dtype)
    ptr = out.data_ptr()
    assert op_out(x, out) is None
    assert out.data_ptr() == ptr
    torch.testing.assert_close(out, gated_ref(act, x), rtol=0, atol=0)


@pytest.mark.parametrize("name", sorted(GATED))
def test_non_contiguous_out_gets_the_result(name):
    _, op_out, act = GATED[name]
    x = sample((6, 80), torch.float32)
    storage = torch.full((40, 12), 7.0)
    out = storage.t()[::2]  # (6, 40) view, strides (2, 12)
    assert not out.is_contiguous()
    op_out(x, out)
    torch.testing.assert_close(out, gated_ref(act, x), rtol=0, atol=0)
    assert torch.equal(storage.t()[1::2], torch.full((6, 40), 7.0))  # the other columns untouched


@pytest.mark.parametrize("name", sorted(GATED))
def test_wrong_out_buffers_are_clear_errors(name):
    _, op_out, _ = GATED[name]
    prefix = rf"tileops::activation_{name}_fwd_out: 'out' must "
    x = torch.randn(6, 80)
    with pytest.raises(RuntimeError, match=prefix + r"have shape \[6, 40\], got \[6, 80\]"):
        op_out(x, torch.empty(6, 80))
    with pytest.raises(TypeError, match=prefix + r"have dtype float32, got bfloat16"):
        op_out(x, torch.empty(6, 40, dtype=torch.bfloat16))
    with pytest.raises(RuntimeError, match=prefix + r"be on cpu, got meta"):
        op_out(x, torch.empty(6, 40, device="meta"))


# ---- gated ops with another layout or params: MulAndSilu, FatreluAndMul, SwigluOAIAndMul ----------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(GATED_FORMULAS))
@pytest.mark.parametrize("shape", [(1, 2), (3, 46), (2, 5, 256), (7, 1000), (0, 8)], ids=str)
def test_gated_formula_ops_match_their_formula(name, dtype, shape):
    op, _, params, formula = GATED_FORMULAS[name]
    x = sample(shape, dtype)
    y = op(x, *params)
    assert y.shape == (*shape[:-1], shape[-1] // 2) and y.dtype == dtype and y.is_contiguous()
    torch.testing.assert_close(y, formula_ref(name, x), rtol=0, atol=0)  # fp32 math, one rounding
    loose = {k: 2 * v for k, v in TOL[dtype].items()}  # x's dtype rounds after every op: an ulp or two
    torch.testing.assert_close(y, formula(x, *params), **loose)


def test_mul_and_silu_takes_the_gate_from_the_second_half():
    x = sample((5, 64), torch.float32)
    swapped = torch.cat([x[:, 32:], x[:, :32]], -1)
    torch.testing.assert_close(MulAndSiluFwdOp()(x), SiluAndMulFwdOp()(swapped), rtol=0, atol=0)
    assert not torch.allclose(MulAndSiluFwdOp()(x), SiluAndMulFwdOp()(x))


def test_fatrelu_threshold_reaches_the_kernel_and_nan_stays_nan():
    gate = torch.tensor([float("nan"), -1.0, 0.0, 0.25, 0.3, 1.0, float("inf")])
    x = torch.cat([gate, torch.full_like(gate, 2.0)])[None]
    nan = float("nan")
    torch.testing.assert_close(ops.activation_fatrelu_and_mul_fwd(x, 0.0)[0],
                               torch.tensor([nan, 0.0, 0.0, 0.5, 0.6, 2.0, float("inf")]), equal_nan=True)
    torch.testing.assert_close(FatreluAndMulFwdOp(threshold=0.25)(x)[0],  # at the threshold: 0
                               torch.tensor([nan, 0.0, 0.0, 0.0, 0.6, 2.0, float("inf")]), equal_nan=True)
    torch.testing.assert_close(FatreluAndMulFwdOp(-2.0)(x)[0], 2 * gate, equal_nan=True)  # negative thresholds too
    assert FatreluAndMulFwdOp().threshold == 0.0  # vLLM's default


def test_fatrelu_compares_with_the_unrounded_threshold():
    # bf16(0.1) = 0.10009765625 > 0.1: kept, as vLLM's kernel (float32 threshold) and F.threshold do.
    g = torch.tensor([0.10009765625, 0.099609375], dtype=torch.bfloat16)
    x = torch.cat([g, torch.ones_like(g)])
    torch.testing.assert_close(ops.activation_fatrelu_and_mul_fwd(x, 0.1), F.threshold(g, 0.1, 0.0), rtol=0, atol=0)
    assert float(ops.activation_fatrelu_and_mul_fwd(x, 0.1)[0]) == 0.10009765625


def test_swiglu_oai_is_interleaved_and_clamps():
    gate = torch.tensor([-20.0, -1.0, 0.0, 1.0, 6.5, 7.0, 20.0, float("nan"), 1.0])
    up = torch.tensor([-20.0, 0.5, 3.0, -8.0, 6.0, 9.0, 1.0, 1.0, float("nan")])
    x = torch.stack([gate, up], -1).flatten()[None]  # [g0, u0, g1, u1, ...]
    y = SwigluOAIAndMulFwdOp()(x)[0]
    g, u = gate.clamp(max=7.0), up.clamp(-7.0, 7.0)
    expected = (u + 1) * g * torch.sigmoid(1.702 * g)
    torch.testing.assert_close(y, expected, equal_nan=True)
    assert torch.isnan(y[-2]) and torch.isnan(y[-1])  # NaN stays NaN (torch.clamp), gate or up
    assert y[6] == 2 * 7.0 * torch.sigmoid(torch.tensor(1.702 * 7.0))  # gate 20 clamps to 7
    halves = torch.cat([gate, up])[None]  # the [gate | up] layout gives another result
    assert not torch.allclose(SwigluOAIAndMulFwdOp()(halves), y[None], equal_nan=True)


def test_swiglu_oai_params_reach_the_kernel():
    x = sample((4, 64), torch.float32)
    base = SwigluOAIAndMulFwdOp()(x)
    for alpha, limit in [(1.0, 7.0), (1.702, 1.0)]:
        op = SwigluOAIAndMulFwdOp(alpha=alpha, limit=limit)
        y = op(x)
        torch.testing.assert_close(y, formula_ref("swiglu_oai_and_mul", x, (alpha, limit)), rtol=0, atol=0)
        assert not torch.equal(y, base)
    assert (SwigluOAIAndMulFwdOp().alpha, SwigluOAIAndMulFwdOp().limit) == (1.702, 7.0)  # gpt-oss's


@pytest.mark.parametrize("name", sorted(GATED_FORMULAS))
def test_gated_formula_ops_non_contiguous_input_and_out(name):
    op, op_out, params, _ = GATED_FORMULAS[name]
    x = sample((64, 24), torch.float32).t()  # (24, 64), strides (1, 24)
    torch.testing.assert_close(op(x, *params), formula_ref(name, x.contiguous()), rtol=0, atol=0)
    storage = torch.full((32, 48), 7.0)
    out = storage.t()[::2]  # (24, 32) view
    assert op_out(x, out, *params) is None
    torch.testing.assert_close(out, formula_ref(name, x.contiguous()), rtol=0, atol=0)
    assert torch.equal(storage.t()[1::2], torch.full((24, 32), 7.0))


@pytest.mark.parametrize("name", sorted(GATED_FORMULAS))
def test_gated_formula_ops_errors_and_meta(name, counters):
    op, op_out, params, _ = GATED_FORMULAS[name]
    with pytest.raises(RuntimeError, match=rf"tileops::activation_{name}_fwd: 'x' must have shape "
                                           r"\[\.\.\., 2\*d\], got \[3, 7\]"):
        op(torch.randn(3, 7), *params)
    with pytest.raises(TypeError, match=rf"tileops::activation_{name}_fwd: 'x' must have dtype "
                                        r"float16 \| bfloat16 \| float32, got float64"):
        op(torch.ones(2, 8, dtype=torch.float64), *params)
    with pytest.raises(RuntimeError, match=rf"tileops::activation_{name}_fwd_out: 'out' must have shape \[6, 40\]"):
        op_out(torch.randn(6, 80), torch.empty(6, 80), *params)
    y = op(torch.empty(3, 5, 64, device="meta", dtype=torch.float16), *params)
    assert y.shape == (3, 5, 32) and y.dtype == torch.float16 and y.stride() == (160, 32, 1)
    with FakeTensorMode():
        assert op(torch.empty(10, 256, dtype=torch.bfloat16), *params).shape == (10, 128)
    assert counters()["kernel_builds"] == 0


@pytest.mark.parametrize("name", sorted(GATED_FORMULAS))
def test_gated_formula_ops_compile_with_their_params(name):
    torch._dynamo.reset()
    op, _, params, _ = GATED_FORMULAS[name]
    cls = {"mul_and_silu": MulAndSiluFwdOp, "fatrelu_and_mul": FatreluAndMulFwdOp,
           "swiglu_oai_and_mul": SwigluOAIAndMulFwdOp}[name]
    inst = cls(*params)
    x = sample((6, 128), torch.float32)
    got = torch.compile(lambda t: inst(t) * 2, fullgraph=True, dynamic=True, backend="aot_eager")(x)
    torch.testing.assert_close(got, formula_ref(name, x) * 2, rtol=0, atol=0)


# ---- errors ---------------------------------------------------------------------------------------

OPERATORS = [(n, UNARY[n][0]) for n in ("relu", "silu", "gelu")] + [(n, GATED[n][0]) for n in sorted(GATED)]


@pytest.mark.parametrize("name,op", OPERATORS, ids=[n for n, _ in OPERATORS])
@pytest.mark.parametrize("dtype", [torch.int32, torch.float64], ids=str)
def test_bad_dtype_names_op_argument_and_rule(name, op, dtype):
    with pytest.raises(TypeError, match=rf"tileops::activation_{name}_fwd: 'x' must have dtype "
                                        rf"float16 \| bfloat16 \| float32, got {str(dtype)[6:]}"):
        op(torch.ones(2, 8, dtype=dtype))


def test_bad_dtype_in_place_names_the_writes_operator():
    with pytest.raises(TypeError, match=r"tileops::activation_relu_fwd_writes_x: 'x' must have dtype"):
        ops.activation_relu_fwd_writes_x(torch.ones(4, dtype=torch.int64))


def test_unknown_gelu_approximate_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"tileops::activation_gelu_fwd: 'approximate' must be one of "
                                         r"none \| tanh, got 'fast'"):
        ops.activation_gelu_fwd(torch.randn(4), "fast")
    with pytest.raises(ValueError, match=r"'approximate' must be one of none \| tanh"):
        GeluFwdOp(approximate="sigmoid", inplace=True)(torch.randn(4))


def test_scalar_x_is_refused():
    with pytest.raises(RuntimeError, match=r"tileops::activation_relu_fwd: 'x' must have shape \[\.\.\., n\]"):
        ops.activation_relu_fwd(torch.tensor(1.0))


def test_nvrtc_target_on_cpu_is_refused_clearly():
    with pytest.raises(RuntimeError, match=r"target 'nvrtc' serves CUDA tensors only, got cpu"):
        ops.activation_silu_and_mul_fwd(torch.randn(2, 8), target="nvrtc")


def test_inputs_requiring_grad_are_refused():
    x = torch.randn(4, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"tileops::activation_silu_fwd"):
        ops.activation_silu_fwd(x)


# ---- Meta / fake ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_meta_shapes_are_contiguous(name):
    op, op_, params, _ = UNARY[name]
    x = torch.empty(8, 6, device="meta", dtype=torch.bfloat16).t()
    y = op(x, *params)
    assert y.device.type == "meta" and y.shape == (6, 8) and y.dtype == torch.bfloat16 and y.is_contiguous()
    if op_ is not None:
        assert op_(x, *params) is None


@pytest.mark.parametrize("name", sorted(GATED))
def test_gated_meta_and_fake_shapes(name, counters):
    op, op_out, _ = GATED[name]
    y = op(torch.empty(3, 5, 64, device="meta", dtype=torch.float16))
    assert y.shape == (3, 5, 32) and y.dtype == torch.float16 and y.stride() == (160, 32, 1)
    with pytest.raises(RuntimeError, match=r"must have shape \[\.\.\., 2\*d\]"):
        op(torch.empty(3, 5, 63, device="meta"))
    with FakeTensorMode():
        fx = torch.empty(10, 256, dtype=torch.bfloat16)
        fy = op(fx)
        assert fy.shape == (10, 128) and fy.dtype == torch.bfloat16
        assert op_out(fx, torch.empty(10, 128, dtype=torch.bfloat16)) is None
    assert counters()["kernel_builds"] == 0


# ---- opcheck: schema, fake, autograd registration, aot dispatch, for every operator ---------------

def _opcheck_cases():
    cases = []
    for name, (op, op_, params, _) in UNARY.items():
        if name == "gelu_none":
            continue
        cases.append((f"{name}", op, lambda p=params: (sample((4, 24), torch.float32), *p)))
        if op_ is not None:
            cases.append((f"{name}_writes_x", op_, lambda p=params: (sample((4, 24), torch.float32), *p)))
    cases.append(("sigmoid_int32", ops.activation_sigmoid_fwd, lambda: (int_sample((4, 24), torch.int32),)))
    for name, (op, op_out, _) in GATED.items():
        cases.append((name, op, lambda: (sample((4, 24), torch.bfloat16),)))
        cases.append((f"{name}_out", op_out,
                      lambda: (sample((4, 24), torch.bfloat16), torch.empty(4, 12, dtype=torch.bfloat16))))
    for name, (op, op_out, params, _) in GATED_FORMULAS.items():
        cases.append((name, op, lambda p=params: (sample((4, 24), torch.bfloat16), *p)))
        cases.append((f"{name}_out", op_out,
                      lambda p=params: (sample((4, 24), torch.bfloat16), torch.empty(4, 12, dtype=torch.bfloat16), *p)))
    return cases


@pytest.mark.parametrize("name,op,make", _opcheck_cases(), ids=[c[0] for c in _opcheck_cases()])
def test_opcheck(name, op, make):
    torch.library.opcheck(op.default, make())


def test_every_activation_operator_is_opchecked():
    names = {o["name"] for e in tileops.op_table() if e["family"] == "activation" for o in e["operators"]}
    checked = {op.default.name().split("::")[1] for _, op, _ in _opcheck_cases()}
    assert names == checked


# ---- the Op-class view ----------------------------------------------------------------------------

def test_op_classes_list_both_operators_of_their_boundary():
    assert set(ReluFwdOp.compile_op_names) == {"tileops::activation_relu_fwd", "tileops::activation_relu_fwd_writes_x"}
    assert set(SiluAndMulFwdOp.compile_op_names) == {"tileops::activation_silu_and_mul_fwd",
                                                     "tileops::activation_silu_and_mul_fwd_out"}


@pytest.mark.parametrize("cls,ref", [(ReluFwdOp, torch.relu), (SiluFwdOp, F.silu), (GeluFwdOp, F.gelu)])
def test_op_class_inplace_selects_the_writes_x_operator(cls, ref):
    x = sample((4, 16), torch.float32)
    expected = ref(x)
    y = cls()(x)  # default: out of place, x untouched
    assert y.data_ptr() != x.data_ptr() and not torch.equal(x, expected)
    op = cls(inplace=True)
    assert op.inplace and "inplace=True" in repr(op)
    r = op(x)
    assert r is x  # like torch's in-place functions, the written input comes back
    torch.testing.assert_close(x, expected, rtol=0, atol=0)


def test_op_class_inplace_on_a_non_contiguous_view():
    base = sample((8, 10), torch.float32)
    before = base.clone()
    GeluFwdOp("tanh", inplace=True)(base[:, 1:9])
    torch.testing.assert_close(base[:, 1:9], F.gelu(before[:, 1:9].contiguous(), approximate="tanh"), rtol=0, atol=0)
    assert torch.equal(base[:, 0], before[:, 0]) and torch.equal(base[:, 9], before[:, 9])


def test_op_class_inplace_is_refused_without_an_optional_mutated_input():
    with pytest.raises(TypeError, match=r"SiluAndMulFwdOp has no in-place branch"):
        SiluAndMulFwdOp(inplace=True)


@pytest.mark.parametrize("cls,act", [(SiluAndMulFwdOp, F.silu), (GeluAndMulFwdOp, F.gelu),
                                     (GeluTanhAndMulFwdOp, lambda g: F.gelu(g, approximate="tanh"))])
def test_op_class_out_selects_the_out_operator(cls, act):
    x = sample((3, 64), torch.float32)
    out = torch.empty(3, 32)
    assert cls()(x, out=out) is None
    torch.testing.assert_close(out, gated_ref(act, x), rtol=0, atol=0)
    with pytest.raises(TypeError, match="has no output buffer branch"):
        ReluFwdOp()(x, out=out)


# ---- torch.compile --------------------------------------------------------------------------------

def _graph_calls(fn, *args):
    torch._dynamo.reset()
    rec = GraphRecorder()
    result = torch.compile(fn, fullgraph=True, backend=rec)(*args)
    assert len(rec.graphs) == 1
    return result, rec.calls()


def test_compiled_in_place_writes_x_like_eager():
    x = sample((4, 32), torch.float32)
    expected = F.silu(x)
    op = SiluFwdOp(inplace=True)
    result, calls = _graph_calls(lambda t: op(t), x)
    assert calls == [ops.activation_silu_fwd_writes_x.default]
    assert result is x or torch.equal(result, x)
    torch.testing.assert_close(x, expected, rtol=0, atol=0)


def test_compiled_out_branch_fills_out_like_eager():
    x = sample((4, 32), torch.float32)
    out = torch.zeros(4, 16)
    op = SiluAndMulFwdOp()
    _, calls = _graph_calls(lambda t, o: op(t, out=o), x, out)
    assert calls == [ops.activation_silu_and_mul_fwd_out.default]
    torch.testing.assert_close(out, gated_ref(F.silu, x), rtol=0, atol=0)


def test_compiled_dynamic_batch_does_not_recompile():
    torch._dynamo.reset()
    rec = GraphRecorder()
    op = GeluTanhAndMulFwdOp()
    fn = torch.compile(lambda t: op(t), fullgraph=True, dynamic=True, backend=rec)
    for m in (5, 17, 300):
        x = sample((m, 64), torch.float32)
        torch.testing.assert_close(fn(x), gated_ref(lambda g: F.gelu(g, approximate="tanh"), x), rtol=0, atol=0)
    assert len(rec.graphs) == 1
