"""Activation family on the GPU (nvrtc target) against torch on the same device: every op, dtypes
(sigmoid's integer and bool x too), shapes incl. odd sizes (vector tail), misaligned pointers
(narrow accesses), non-contiguous views, the in-place and out branches, > 2^32-element indexing,
kernel reuse, CUDA graphs and torch.compile.
Skipped without a GPU (conftest)."""
import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

import tileops
from tileops.activation import SigmoidFwdOp, SiluAndMulFwdOp, SiluFwdOp

pytestmark = pytest.mark.gpu
ops = torch.ops.tileops
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
# One rounding of the same fp32 math: at most an ulp of the dtype apart from torch.
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float16: dict(rtol=1e-3, atol=1e-3),
       torch.bfloat16: dict(rtol=8e-3, atol=8e-3)}
from support.activation_cases import (GATED, GATED_FORMULAS, IN_PLACE, INT_DTYPES, UNARY, formula_ref,  # noqa: E402
                                      gated_ref, int_sample, promoted)
from support.graphs import GraphRecorder  # noqa: E402


def sample(shape, dtype, offset=0):
    """randn * 3 of `shape`; `offset` elements into its storage (offset 1: not 16-byte aligned)."""
    n = 1
    for s in shape:
        n *= s
    flat = torch.randn(n + offset, device="cuda", dtype=torch.float32).mul_(3).to(dtype)
    return flat[offset:].view(shape)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (4097,), (3, 5, 7), (333, 1000), (2048, 4096)], ids=str)
@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "misaligned"])
def test_unary_matches_torch(name, dtype, shape, offset):
    op, _, params, ref = UNARY[name]
    x = sample(shape, dtype, offset)
    y = op(x, *params)
    assert y.shape == x.shape and y.dtype == dtype and y.is_contiguous()
    torch.testing.assert_close(y, ref(x), **TOL[dtype])


@pytest.mark.parametrize("dtype", INT_DTYPES + DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (4097,), (3, 5, 7), (333, 1000), (2048, 4096)], ids=str)
@pytest.mark.parametrize("offset", [0, 1, 4], ids=["aligned", "misaligned", "offset4"])
def test_sigmoid_every_dtype_matches_torch(dtype, shape, offset):
    # Integer/bool x: loads of x's width and 16-byte float32 stores (int8: 1 load, 4 stores a step);
    # offsets 1 and 4 elements narrow the step.
    x = int_sample(shape, dtype, "cuda", offset) if dtype in INT_DTYPES else sample(shape, dtype, offset)
    y = ops.activation_sigmoid_fwd(x)
    expected = torch.sigmoid(x)
    assert y.dtype == promoted(dtype) == expected.dtype and y.shape == x.shape and y.is_contiguous()
    torch.testing.assert_close(y, expected, **TOL[y.dtype])
    torch.testing.assert_close(y, ops.activation_sigmoid_fwd(x, target="reference"), **TOL[y.dtype])


def test_sigmoid_integer_extremes_and_non_contiguous():
    for dtype in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8):
        info = torch.iinfo(dtype)
        x = torch.tensor([info.min, 0, 1, info.max] * 9, dtype=dtype, device="cuda")
        y = ops.activation_sigmoid_fwd(x)
        torch.testing.assert_close(y, torch.sigmoid(x), **TOL[torch.float32])
        assert bool((y[1::4] == 0.5).all()) and bool((y[3::4] == 1.0).all())  # exp(-max) underflows: exactly 1
    x = int_sample((130, 257), torch.int32, "cuda").t()[:, 1:129]  # non-contiguous, misaligned start
    torch.testing.assert_close(ops.activation_sigmoid_fwd(x), torch.sigmoid(x), **TOL[torch.float32])


def test_sigmoid_kernels_are_keyed_by_both_dtypes(counters):
    tileops.clear_kernel_caches()
    ops.activation_sigmoid_fwd(int_sample((16, 1024), torch.int32, "cuda"))
    ops.activation_sigmoid_fwd(int_sample((99, 512), torch.int32, "cuda"))      # other size: same kernel
    assert counters()["kernel_builds"] == 1 and counters()["kernel_hits"] == 1
    ops.activation_sigmoid_fwd(int_sample((16, 1024), torch.int16, "cuda"))    # other x dtype
    ops.activation_sigmoid_fwd(sample((16, 1024), torch.float32))              # float32 -> float32
    ops.activation_sigmoid_fwd(int_sample((16, 1024), torch.int32, "cuda", 1))  # narrow steps
    assert counters()["kernel_builds"] == 4


def test_sigmoid_uint8_beyond_2_pow_31_elements():
    n = 2 ** 31 + 37  # int64 indexing with 16-element steps and the tail
    if torch.cuda.mem_get_info()[0] < n * 6 + (1 << 30):
        pytest.skip("needs ~14 GB of free GPU memory")
    x = torch.zeros(n, device="cuda", dtype=torch.uint8)
    x[-(1 << 20):] = int_sample((1 << 20,), torch.uint8, "cuda")
    y = ops.activation_sigmoid_fwd(x)
    assert y.dtype == torch.float32
    torch.testing.assert_close(y[-(1 << 20):], torch.sigmoid(x[-(1 << 20):]), **TOL[torch.float32])
    assert bool((y[: 1 << 20] == 0.5).all())
    del x, y


def test_sigmoid_cuda_graph_and_compile_with_integer_x():
    x = int_sample((64, 4096), torch.int32, "cuda")
    op = SigmoidFwdOp()
    op(x)  # warm-up builds
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = op(x)
    x.copy_(int_sample((64, 4096), torch.int32, "cuda", seed=3))
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(y, torch.sigmoid(x), **TOL[torch.float32])
    torch._dynamo.reset()
    out = torch.compile(lambda t: op(t) + 1, fullgraph=True)(x)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, torch.sigmoid(x) + 1, **TOL[torch.float32])


# float64 references that stay accurate in the tails (0.5 * (1 + erf) cancels for very negative x).
EXACT64 = {
    "silu": lambda x: x * torch.sigmoid(x),
    "sigmoid": torch.sigmoid,
    "gelu_none": lambda x: 0.5 * x * torch.special.erfc(-x / 2 ** 0.5),
    # 0.5 * (1 + tanh(u)) cancels for very negative x even in float64; it equals sigmoid(2u).
    "gelu_tanh": lambda x: x * torch.sigmoid(2 * 0.7978845608028654 * (x + 0.044715 * x ** 3)),
    "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x),
}


def ulps_apart(a, b):
    """|a - b| in units of the last place of b (elementwise, a and b of one 16-bit dtype)."""
    inf = torch.tensor(float("inf"), dtype=b.dtype, device=b.device)
    ulp = (torch.nextafter(b.abs(), inf).double() - b.abs().double())
    return (a.double() - b.double()).abs() / ulp


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", sorted(EXACT64))
def test_16bit_fast_forms_are_within_one_ulp_of_the_exact_value(name, dtype):
    # The 16-bit kernels use ex2/rcp.approx (and a Chebyshev erfc for GELU) instead of expf/erff/
    # tanhf: each result must be the correctly rounded value or its neighbour, tails included.
    op, _, params, ref = UNARY[name]
    x = torch.linspace(-14, 14, 1 << 20, device="cuda").to(dtype)
    y = op(x, *params)
    exact = EXACT64[name](x.double()).to(dtype)
    # Results below 1e-30 (float16: its subnormals) are compared absolutely: the fp32 math flushes
    # them to zero, as torch's own fp32 math does (its 1 + erf and 1 + tanh round to 0 there).
    floor = max(torch.finfo(dtype).tiny, 1e-30)
    tiny = exact.abs() < floor
    apart = ulps_apart(y[~tiny], exact[~tiny])
    worst = int(apart.argmax())
    assert float(apart[worst]) <= 1.0, (f"x={float(x[~tiny][worst])}: {float(y[~tiny][worst])} vs exact "
                                        f"{float(exact[~tiny][worst])} ({float(apart[worst])} ulps)")
    if bool(tiny.any()):
        assert float((y[tiny].double() - exact[tiny].double()).abs().max()) <= 2 * floor
    special = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0], device="cuda", dtype=dtype)
    torch.testing.assert_close(op(special, *params), ref(special), equal_nan=True)


def test_relu_nan_and_signed_zero():
    x = torch.tensor([float("nan"), -0.0, -1.0, 3.0, float("inf"), float("-inf")] * 5, device="cuda")
    torch.testing.assert_close(ops.activation_relu_fwd(x), torch.relu(x), equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", IN_PLACE)
def test_in_place_contiguous_and_non_contiguous(name, dtype):
    _, op_, params, ref = UNARY[name]
    x = sample((257, 130), dtype)
    expected = ref(x)
    op_(x, *params)
    torch.testing.assert_close(x, expected, **TOL[dtype])
    base = sample((130, 257), dtype)
    before = base.clone()
    view = base.t()[:, 1:129]  # non-contiguous, misaligned start
    op_(view, *params)
    torch.testing.assert_close(base[1:129], ref(before[1:129]), **TOL[dtype])
    assert torch.equal(base[0], before[0]) and torch.equal(base[129], before[129])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(GATED))
@pytest.mark.parametrize("shape", [(1, 2), (7, 46), (3, 5, 256), (333, 2000), (2048, 28672), (1, 28672)], ids=str)
@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "misaligned"])
def test_gated_matches_torch(name, dtype, shape, offset):
    op, _, act = GATED[name]
    x = sample(shape, dtype, offset)
    y = op(x)
    assert y.shape == (*shape[:-1], shape[-1] // 2) and y.is_contiguous()
    torch.testing.assert_close(y, gated_ref(act, x), **TOL[dtype])


@pytest.mark.parametrize("name", sorted(GATED))
def test_gated_out_buffers(name):
    _, op_out, act = GATED[name]
    x = sample((64, 512), torch.bfloat16)
    out = torch.empty(64, 256, device="cuda", dtype=torch.bfloat16)
    op_out(x, out)
    torch.testing.assert_close(out, gated_ref(act, x), **TOL[torch.bfloat16])
    storage = torch.zeros(256, 128, device="cuda", dtype=torch.bfloat16)
    nc = storage.t()[::2]  # (64, 256), non-contiguous
    op_out(x, nc)
    torch.testing.assert_close(nc, gated_ref(act, x), **TOL[torch.bfloat16])
    assert not storage.t()[1::2].any()
    misaligned = torch.empty(1 + 64 * 256, device="cuda", dtype=torch.bfloat16)[1:].view(64, 256)
    op_out(x, misaligned)
    torch.testing.assert_close(misaligned, gated_ref(act, x), **TOL[torch.bfloat16])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(GATED_FORMULAS))
@pytest.mark.parametrize("shape", [(1, 2), (7, 46), (3, 5, 256), (333, 2000), (2048, 5760), (1, 28672)], ids=str)
@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "misaligned"])
def test_gated_formula_ops_match_their_formula(name, dtype, shape, offset):
    # MulAndSilu (gate second), FatreluAndMul (threshold), SwigluOAIAndMul (interleaved, alpha, limit):
    # the float32 formula rounded once, within an ulp; the reference target on the same device too.
    op, _, params, _ = GATED_FORMULAS[name]
    x = sample(shape, dtype, offset)
    y = op(x, *params)
    assert y.shape == (*shape[:-1], shape[-1] // 2) and y.is_contiguous()
    torch.testing.assert_close(y, formula_ref(name, x), **TOL[dtype])
    torch.testing.assert_close(y, op(x, *params, target="reference"), **TOL[dtype])


@pytest.mark.parametrize("name", sorted(GATED_FORMULAS))
def test_gated_formula_ops_out_buffers_and_non_contiguous_input(name):
    op, op_out, params, _ = GATED_FORMULAS[name]
    x = sample((64, 512), torch.bfloat16)
    storage = torch.zeros(256, 128, device="cuda", dtype=torch.bfloat16)
    nc = storage.t()[::2]  # (64, 256), non-contiguous
    op_out(x, nc, *params)
    torch.testing.assert_close(nc, formula_ref(name, x), **TOL[torch.bfloat16])
    assert not storage.t()[1::2].any()
    misaligned = torch.empty(1 + 64 * 256, device="cuda", dtype=torch.bfloat16)[1:].view(64, 256)
    op_out(x, misaligned, *params)
    torch.testing.assert_close(misaligned, formula_ref(name, x), **TOL[torch.bfloat16])
    xt = sample((512, 64), torch.float16).t()
    torch.testing.assert_close(op(xt, *params), formula_ref(name, xt), **TOL[torch.float16])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gated_formula_ops_special_values(dtype):
    nan, inf = float("nan"), float("inf")
    gate = torch.tensor([nan, -inf, -20.0, -1.0, 0.0, 0.25, 0.5, 6.5, 7.0, 20.0, inf, 1.0] * 8, device="cuda")
    up = torch.tensor([1.0, 2.0, -20.0, 0.5, 3.0, -8.0, 6.0, 9.0, 1.0, 1.0, 2.0, nan] * 8, device="cuda")
    halves = torch.cat([gate, up])[None].to(dtype)
    interleaved = torch.stack([gate, up], -1).flatten()[None].to(dtype)
    for name, x in (("fatrelu_and_mul", halves), ("mul_and_silu", halves), ("swiglu_oai_and_mul", interleaved)):
        op, _, params, _ = GATED_FORMULAS[name]
        torch.testing.assert_close(op(x, *params), formula_ref(name, x), equal_nan=True, **TOL[dtype])
    assert torch.isnan(ops.activation_fatrelu_and_mul_fwd(halves, 0.0)[0, 0])  # NaN gate: NaN, not 0


def test_gated_formula_params_are_launch_arguments(counters):
    tileops.clear_kernel_caches()
    x = sample((16, 1024), torch.bfloat16)
    for t in (0.0, 0.5, -1.0):
        torch.testing.assert_close(ops.activation_fatrelu_and_mul_fwd(x, t), formula_ref("fatrelu_and_mul", x, (t,)),
                                   **TOL[torch.bfloat16])
    for alpha, limit in ((1.702, 7.0), (1.0, 2.0)):
        torch.testing.assert_close(ops.activation_swiglu_oai_and_mul_fwd(x, alpha, limit),
                                   formula_ref("swiglu_oai_and_mul", x, (alpha, limit)), **TOL[torch.bfloat16])
    assert counters()["kernel_builds"] == 2  # one kernel per op, whatever the params


def test_gated_non_contiguous_input():
    x = sample((512, 64), torch.float16).t()
    torch.testing.assert_close(ops.activation_silu_and_mul_fwd(x), gated_ref(F.silu, x), **TOL[torch.float16])


def _free_bytes():
    free, _ = torch.cuda.mem_get_info()
    return free


def test_unary_beyond_2_pow_31_elements():
    n = 2 ** 31 + 37  # int64 indexing and the vector tail
    if _free_bytes() < 3 * n * 2:
        pytest.skip("needs ~13 GB of free GPU memory")
    x = torch.empty(n, device="cuda", dtype=torch.float16)
    x[: 1 << 20].normal_()
    x[-(1 << 20):].normal_()
    y = ops.activation_silu_fwd(x)
    for sl in (slice(0, 1 << 20), slice(n - (1 << 20), n)):
        torch.testing.assert_close(y[sl], F.silu(x[sl]), **TOL[torch.float16])
    del x, y


def test_gated_beyond_2_pow_32_output_elements():
    d = 4097  # odd: one-element accesses, so the vector count exceeds 2^32 (64-bit row division)
    rows = 2 ** 32 // d + 2
    if _free_bytes() < 3 * rows * d * 2 + (1 << 30):
        pytest.skip("needs ~27 GB of free GPU memory")
    x = torch.empty(rows, 2 * d, device="cuda", dtype=torch.bfloat16)
    x[:64].normal_()
    x[-64:].normal_()
    y = ops.activation_silu_and_mul_fwd(x)
    torch.testing.assert_close(y[:64], gated_ref(F.silu, x[:64]), **TOL[torch.bfloat16])
    torch.testing.assert_close(y[-64:], gated_ref(F.silu, x[-64:]), **TOL[torch.bfloat16])
    del x, y


def test_reference_target_on_cuda_agrees():
    x = sample((64, 1024), torch.bfloat16)
    torch.testing.assert_close(ops.activation_gelu_and_mul_fwd(x), ops.activation_gelu_and_mul_fwd(x, target="reference"),
                               **TOL[torch.bfloat16])
    torch.testing.assert_close(ops.activation_gelu_fwd(x, "tanh"), ops.activation_gelu_fwd(x, "tanh", target="reference"),
                               **TOL[torch.bfloat16])


def test_kernels_are_keyed_by_dtype_activation_and_width(counters):
    tileops.clear_kernel_caches()
    x = sample((16, 1024), torch.bfloat16)
    ops.activation_relu_fwd(x)
    ops.activation_relu_fwd(sample((99, 512), torch.bfloat16))  # other size: same kernel
    ops.activation_relu_fwd_writes_x(x)                        # in-place branch: same kernel
    assert counters()["kernel_builds"] == 1 and counters()["kernel_hits"] == 2
    ops.activation_relu_fwd(sample((16, 1024), torch.bfloat16, offset=1))  # narrow accesses: new identity
    ops.activation_gelu_fwd(x, "tanh")                                    # other activation
    ops.activation_gelu_fwd(x, "none")
    assert counters()["kernel_builds"] == 4


def test_cuda_graph_replay_after_warm_up():
    x = sample((32, 8192), torch.bfloat16)
    ops.activation_silu_and_mul_fwd(x)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = ops.activation_silu_and_mul_fwd(x)
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y, gated_ref(F.silu, x), **TOL[torch.bfloat16])


def test_inductor_compile_one_node_each():
    torch._dynamo.reset()
    rec = GraphRecorder(inductor=True)

    act, silu_ = SiluAndMulFwdOp(), SiluFwdOp(inplace=True)

    def fn(x):
        h = act(x)
        silu_(h)
        return h

    x = sample((300, 4096), torch.float16)
    out = torch.compile(fn, fullgraph=True, dynamic=True, backend=rec)(x)
    torch.testing.assert_close(out, F.silu(gated_ref(F.silu, x)), rtol=4e-3, atol=4e-3)
    assert rec.calls() == [ops.activation_silu_and_mul_fwd.default, ops.activation_silu_fwd_writes_x.default]
