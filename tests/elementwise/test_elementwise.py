"""Elementwise family on CPU (reference target), one parametrised module over every entry of
manifests/elementwise.yaml (tests/support/elementwise_cases.py): values against ref_api for every
dtype (NaN/inf/-0.0/denormals, integer extremes), broadcasting and strided inputs, torch's type
promotion in eager and Meta/fake, the in-place and out= branches, opcheck, export and the refusals."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import tileops
import tileops.elementwise as ew
from support.elementwise_cases import CASES, sample, values

NAMES = sorted(CASES)
ALL = [(n, d) for n in NAMES for d in CASES[n].dtypes]


def same(y, ref):
    assert y.dtype == ref.dtype and y.shape == ref.shape, (y.dtype, ref.dtype, y.shape, ref.shape)
    torch.testing.assert_close(y, ref, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("name,dtype", ALL, ids=[f"{n}-{str(d)[6:]}" for n, d in ALL])
def test_matches_ref_api_with_broadcasting(name, dtype):
    case = CASES[name]
    args, P = sample(case, dtype), case.params_for(dtype)
    same(case.op()(*args, **P), case.ref(*args, **P))


@pytest.mark.parametrize("name", NAMES)
def test_strided_inputs_are_read_as_they_are(name):
    case = CASES[name]
    dt = case.dtypes[-1]
    P = case.params_for(dt)
    # a transposed input, a sliced one, and an expanded (stride-0) one; 0-dim inputs stay 0-dim
    args = [values((33, 4) if s != () else (), dts[0] if len(dts) == 1 else dt, k).t()
            for k, ((_, dts), s) in enumerate(zip(case.inputs, case.shapes))]
    args[0] = values((4, 66), args[0].dtype, 7)[:, ::2]
    if case.along:  # a weight along dim 1: every other element of a longer vector
        args[1] = values((66,), args[1].dtype, 9)[::2]
    elif len(args) > 1 and case.shapes[-1] != ():
        args[-1] = values((1, 33), args[-1].dtype, 9).expand(4, 33)
    y = case.op()(*args, **P)
    assert y.is_contiguous()
    # against torch on the same views (ATen's CPU loops for strided and contiguous operands differ on
    # special values, e.g. remainder by inf); the GPU test compares the engine's strided path
    same(y, case.ref(*args, **P))


@pytest.mark.parametrize("name", [n for n in NAMES if CASES[n].has_out])
def test_out_branch_writes_the_buffer(name):
    case = CASES[name]
    args, P = sample(case, case.dtypes[-1]), case.params_for(case.dtypes[-1])
    ref = case.ref(*args, **P)
    out = torch.empty_like(ref)
    assert case.op("_out")(*args, out, **P) is None
    same(out, ref)
    with pytest.raises(TypeError, match="'out' must have dtype"):
        case.op("_out")(*args, torch.empty(ref.shape, dtype=torch.complex64), **P)


@pytest.mark.parametrize("name", [n for n in NAMES if CASES[n].in_place])
def test_in_place_branch_writes_input(name):
    case = CASES[name]
    dt = case.float_dtype
    P = case.params_for(dt)
    shapes = case.in_place_shapes((4, 33))
    args = sample(case, dt, shapes=shapes)
    ref = case.ref(*args, **P)
    x = args[0]
    ptr = x.data_ptr()
    assert case.op("_writes_input")(*args, **P) is None
    assert x.data_ptr() == ptr
    same(x, ref.to(x.dtype))
    # Op-class view: inplace=True picks the same branch
    args = sample(case, dt, shapes=shapes)
    getattr(ew, name)(**P, inplace=True)(*args)
    same(args[0], ref.to(dt))


def test_in_place_refuses_a_result_that_does_not_fit():
    a, b = torch.zeros(1, 4), torch.ones(3, 4)
    with pytest.raises(ValueError, match=r"elementwise_add_fwd_writes_input: 'input' is written in place.*\[3, 4\]"):
        torch.ops.tileops.elementwise_add_fwd_writes_input(a, b)
    with pytest.raises(TypeError, match="result type float32 cannot be cast to its dtype int32"):
        torch.ops.tileops.elementwise_add_fwd_writes_input(torch.zeros(4, dtype=torch.int32), torch.ones(4))
    with pytest.raises(TypeError, match="cannot be cast"):
        torch.ops.tileops.elementwise_sqrt_fwd_writes_input(torch.ones(4, dtype=torch.int64))


def test_shapes_that_do_not_broadcast_are_refused_naming_both():
    with pytest.raises(ValueError, match=r"tileops::elementwise_add_fwd: 'input' and 'other' do not broadcast: dim -1 is 4 vs 5"):
        torch.ops.tileops.elementwise_add_fwd(torch.ones(3, 4), torch.ones(5))
    with pytest.raises(ValueError, match="'condition' and 'other' do not broadcast"):
        torch.ops.tileops.elementwise_where_fwd(torch.ones(2, 3, dtype=torch.bool), torch.ones(3), torch.ones(4, 1, 2))


PROMOTIONS = [  # (a, b) -> torch.result_type, 0-dim tensors included
    (torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.float16)),
    (torch.zeros(4, dtype=torch.uint8), torch.zeros(4, dtype=torch.int8)),
    (torch.zeros(4, dtype=torch.int64), torch.tensor(2.5)),
    (torch.zeros(4, dtype=torch.float16), torch.tensor(2.5)),
    (torch.zeros(4, dtype=torch.bool), torch.zeros(4, dtype=torch.bool)),
    (torch.zeros(4, dtype=torch.bfloat16), torch.zeros(4, dtype=torch.float16)),
]


@pytest.mark.parametrize("k", range(len(PROMOTIONS)))
@pytest.mark.parametrize("name", ["AddFwdOp", "GtFwdOp"])
def test_type_promotion_eager_and_fake(name, k):
    case = CASES[name]
    a, b = PROMOTIONS[k]
    P = case.params_for(torch.result_type(a, b))
    ref = case.ref(a, b, **P)
    same(case.op()(a, b, **P), ref)
    with FakeTensorMode() as mode:
        fa, fb = mode.from_tensor(a), mode.from_tensor(b)
        y = case.op()(fa, fb, **P)
    assert y.dtype == ref.dtype and y.shape == ref.shape


@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8, torch.bool, torch.float16])
def test_int_to_float_ops_give_float32(dtype):
    x = values((5, 7), dtype)
    same(torch.ops.tileops.elementwise_sqrt_fwd(x), torch.sqrt(x))


def test_integer_add_wraps_around_as_torch():
    a = torch.tensor([127, -128, 100], dtype=torch.int8)
    same(torch.ops.tileops.elementwise_add_fwd(a, a, alpha=3), torch.add(a, a, alpha=3))


def test_meta_broadcast_shapes_are_symbolic_free_and_contiguous():
    with FakeTensorMode() as mode:
        a = mode.from_tensor(torch.empty(4096, 1, dtype=torch.bfloat16))
        b = mode.from_tensor(torch.empty(1, 4096, dtype=torch.bfloat16).t().contiguous().t())
        y = torch.ops.tileops.elementwise_add_fwd(a, b)
    assert y.shape == (4096, 4096) and y.is_contiguous() and y.dtype == torch.bfloat16


AOT = {"AddFwdOp", "GtFwdOp", "SqrtFwdOp", "WhereFwdOp", "ClampScalarFwdOp", "MaskedFillFwdOp", "RoundFwdOp"}


@pytest.mark.parametrize("name", NAMES)
def test_opcheck(name):
    case = CASES[name]
    args = [torch.nan_to_num(a) if a.is_floating_point() else a
            for a in sample(case, case.dtypes[-1], shapes=case.in_place_shapes((2, 3)))]
    P = case.params_for(case.dtypes[-1])
    # AOT dispatch (the slow part) once per arity and path through the grammar; schema and fake for all
    utils = ("test_schema", "test_faketensor") + (("test_aot_dispatch_dynamic",) if name in AOT else ())
    torch.library.opcheck(case.op().default, tuple(args), P, test_utils=utils)


def test_compile_dynamic_shapes_one_node():
    import torch._dynamo
    torch._dynamo.reset()
    counts = []

    def backend(gm, example_inputs):
        counts.append([n.target for n in gm.graph.nodes if n.op == "call_function"])
        return gm.forward
    f = torch.compile(lambda a, b: torch.ops.tileops.elementwise_add_fwd(a, b, alpha=2), backend=backend,
                      dynamic=True, fullgraph=True)
    for rows in (3, 5, 9):
        a, b = torch.randn(rows, 1, 8), torch.randn(rows, 8)
        same(f(a, b), torch.add(a, b, alpha=2))
    assert len(counts) == 1 and [getattr(t, "default", t) for t in counts[0]] == [torch.ops.tileops.elementwise_add_fwd.default]


def test_export_holds_the_op():
    class M(torch.nn.Module):
        def forward(self, c, a, b):
            return torch.ops.tileops.elementwise_where_fwd(c, a, b)
    args = (torch.rand(4, 1) > 0.5, torch.randn(4, 6), torch.randn(6))
    ep = torch.export.export(M(), args)
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert targets == [torch.ops.tileops.elementwise_where_fwd.default]
    same(ep.module()(*args), torch.where(*args))


def test_every_entry_has_a_reference_kernel_and_a_class():
    table = {e["class"]: e for e in tileops.op_table() if e["family"] == "elementwise"}
    assert set(table) == set(CASES)
    for name in CASES:
        assert hasattr(ew, name)


# ---- bounds that may be None, clamp_min / clamp_max

NAN = float("nan")
CLAMP_BOUNDS = [(None, 5), (-3, None), (2, -1)]


@pytest.mark.parametrize("dtype", [torch.int8, torch.int64, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("lo,hi", CLAMP_BOUNDS, ids=["max-only", "min-only", "min-above-max"])
def test_clamp_scalar_takes_either_bound(lo, hi, dtype):
    x = values((4, 33), dtype)
    same(torch.ops.tileops.elementwise_clamp_scalar_fwd(x, min=lo, max=hi), torch.clamp(x, min=lo, max=hi))
    out = torch.empty_like(x)
    torch.ops.tileops.elementwise_clamp_scalar_fwd_out(x, out, max=hi, min=lo)
    same(out, torch.clamp(x, min=lo, max=hi))
    y = x.clone()
    ew.ClampScalarFwdOp(min=lo, max=hi, inplace=True)(y)
    same(y, torch.clamp(x, min=lo, max=hi))


@pytest.mark.parametrize("op,kw", [
    ("elementwise_clamp_scalar_fwd", dict(min=NAN)), ("elementwise_clamp_scalar_fwd", dict(max=NAN)),
    ("elementwise_clamp_scalar_fwd", dict(min=0.0, max=NAN)), ("elementwise_clamp_min_fwd", dict(min=NAN)),
    ("elementwise_clamp_max_fwd", dict(max=NAN))])
def test_a_nan_bound_gives_nan_everywhere(op, kw):
    x = values((4, 33), torch.float32)
    y = getattr(torch.ops.tileops, op)(x, **kw)
    assert torch.isnan(y).all()


def test_clamp_scalar_refuses_no_bound_naming_the_rule():
    x = torch.ones(3)
    msg = (r"tileops::elementwise_clamp_scalar_fwd: params \(min, max\) break the rule 'given\(min\) or given\(max\)'; "
           r"got min=None, max=None")
    with pytest.raises(ValueError, match=msg):
        torch.ops.tileops.elementwise_clamp_scalar_fwd(x)
    with FakeTensorMode() as mode, pytest.raises(ValueError, match=msg):
        torch.ops.tileops.elementwise_clamp_scalar_fwd(mode.from_tensor(x))
    with pytest.raises(ValueError, match=msg):
        ew.ClampScalarFwdOp()(x)


@pytest.mark.parametrize("name,kw,ref", [("ClampMinFwdOp", dict(min=0.0), torch.clamp_min),
                                         ("ClampMaxFwdOp", dict(max=-0.0), torch.clamp_max)])
def test_clamp_min_max_at_signed_zeros_and_in_place(name, kw, ref):
    x = torch.tensor([-0.0, 0.0, -1.0, 1.0, NAN, float("inf"), float("-inf")])
    same(getattr(ew, name)(**kw)(x), ref(x, *kw.values()))
    y = x.clone()
    getattr(ew, name)(**kw, inplace=True)(y)
    same(y, ref(x, *kw.values()))


# ---- nan_to_num

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int32, torch.bool])
@pytest.mark.parametrize("kw", [dict(nan=1.5, neginf=-7.0), dict(posinf=1e39), dict(nan=None, posinf=2.0, neginf=-2.0)],
                         ids=["nan-neginf", "posinf-overflows", "all"])
def test_nan_to_num_values_and_defaults(kw, dtype):
    x = values((4, 33), dtype)
    same(torch.ops.tileops.elementwise_nan_to_num_fwd(x, **kw), torch.nan_to_num(x, **kw))
    y = x.clone()
    torch.ops.tileops.elementwise_nan_to_num_fwd_writes_input(y, **kw)
    same(y, torch.nan_to_num(x, **kw))


# ---- div's rounding_mode: a kernel per mode, integer results for integer inputs

INT_DIV = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


def divisors(shape, dtype, seed=1):
    """Sample divisors without 0 (and without -1, which the min / -1 test covers)."""
    b = values(shape, dtype, seed)
    if dtype.is_floating_point:
        return b
    return torch.where((b == 0) | (b == -1) if dtype != torch.uint8 else b == 0, torch.full_like(b, 3), b)


@pytest.mark.parametrize("dtype", INT_DIV + [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
def test_div_rounding_modes_match_torch(mode, dtype):
    a, b = values((4, 33), dtype), divisors((33,), dtype)
    ref = torch.div(a, b, rounding_mode=mode)
    same(torch.ops.tileops.elementwise_div_fwd(a, b, rounding_mode=mode), ref)
    with FakeTensorMode() as fm:
        y = torch.ops.tileops.elementwise_div_fwd(fm.from_tensor(a), fm.from_tensor(b), rounding_mode=mode)
    assert y.dtype == ref.dtype and y.shape == ref.shape


@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_div_rounding_promotes_and_writes_in_place(mode):
    a, b = values((4, 33), torch.uint8), divisors((33,), torch.int8)
    same(torch.ops.tileops.elementwise_div_fwd(a, b, rounding_mode=mode), torch.div(a, b, rounding_mode=mode))
    f = torch.tensor([2.5, -2.5])
    same(torch.ops.tileops.elementwise_div_fwd(torch.tensor([7, -7], dtype=torch.int32), f, rounding_mode=mode),
         torch.div(torch.tensor([7, -7], dtype=torch.int32), f, rounding_mode=mode))
    x = values((4, 33), torch.int32)
    ref = torch.div(x, b, rounding_mode=mode)
    torch.ops.tileops.elementwise_div_fwd_writes_input(x, b, rounding_mode=mode)
    same(x, ref)
    with pytest.raises(TypeError, match="result type float32 cannot be cast to its dtype int32"):
        torch.ops.tileops.elementwise_div_fwd_writes_input(x, b)  # true division of integers is float


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64])
@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_div_integer_min_by_minus_one_wraps_to_min(mode, dtype):
    lo = torch.iinfo(dtype).min
    a, b = torch.tensor([lo, 7, -7], dtype=dtype), torch.tensor([-1, -1, -1], dtype=dtype)
    same(torch.ops.tileops.elementwise_div_fwd(a, b, rounding_mode=mode), torch.tensor([lo, -7, 7], dtype=dtype))


def test_div_refusals():
    a = torch.tensor([4, 5], dtype=torch.int32)
    with pytest.raises(RuntimeError, match="tileops::elementwise_div_fwd.*ZeroDivisionError"):
        torch.ops.tileops.elementwise_div_fwd(a, torch.tensor([1, 0], dtype=torch.int32), rounding_mode="floor")
    t = torch.tensor([True, False])
    with pytest.raises(TypeError, match=r"tileops::elementwise_div_fwd: output 'output' would have dtype bool, but its "
                                        r"rule promote\(input, other\) in uint8 .* allows only those dtypes"):
        torch.ops.tileops.elementwise_div_fwd(t, t, rounding_mode="trunc")
    with pytest.raises(ValueError, match="'rounding_mode' must be one of trunc | floor, got round"):
        torch.ops.tileops.elementwise_div_fwd(a, a, rounding_mode="round")
    same(torch.ops.tileops.elementwise_div_fwd(t, t | True), torch.div(t, t | True))  # true division takes bool


def test_div_rounding_mode_compiles_to_one_node():
    import torch._dynamo
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append([n.target for n in gm.graph.nodes if n.op == "call_function"])
        return gm.forward
    op = ew.DivFwdOp(rounding_mode="floor")
    f = torch.compile(lambda a, b: op(a, b), backend=backend, fullgraph=True)
    a, b = values((4, 33), torch.int32), divisors((33,), torch.int32)
    same(f(a, b), torch.div(a, b, rounding_mode="floor"))
    assert graphs == [[torch.ops.tileops.elementwise_div_fwd.default]]


# ---- prelu: a weight along dim 1

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("xs,ws", [((2, 3, 4, 5), (3,)), ((2, 3, 4, 5), (1,)), ((2, 3, 4, 5), ()), ((6,), (1,)), ((), ()),
                                   ((7, 3), (3,))])
def test_prelu_weight_along_dim_1(xs, ws, dtype):
    x, w = values(xs, dtype), values(ws, dtype, 3)
    same(torch.ops.tileops.elementwise_prelu_fwd(x, w), torch.nn.functional.prelu(x, w))


def test_prelu_reads_channels_last_and_strided_weights():
    x = values((2, 6, 4, 5), torch.float32).to(memory_format=torch.channels_last)
    w = values((12,), torch.float32, 3)[::2]
    same(ew.PreluFwdOp()(x, w), torch.nn.functional.prelu(x, w))


@pytest.mark.parametrize("xs,ws,exc,msg", [
    ((2, 3, 4), (3, 1), ValueError, r"'weight' must be a 0-dim or 1-D tensor broadcast along dim 1 of 'input' "
                                    r"\(along\(input, 1\)\), got shape \[3, 1\]"),
    ((2, 3, 4), (2,), ValueError, r"'weight' must have 1 element or input.size\(1\) = 3 elements \(along\(input, 1\)\), got 2"),
    ((5,), (5,), ValueError, r"'weight' has 5 elements, but 'input' of shape \[5\] has no dim 1"),
])
def test_prelu_refuses_a_weight_that_does_not_lie_along_dim_1(xs, ws, exc, msg):
    x, w = torch.ones(xs), torch.ones(ws)
    with pytest.raises(exc, match="tileops::elementwise_prelu_fwd: " + msg):
        torch.ops.tileops.elementwise_prelu_fwd(x, w)
    with FakeTensorMode() as mode, pytest.raises(exc, match=msg):
        torch.ops.tileops.elementwise_prelu_fwd(mode.from_tensor(x), mode.from_tensor(w))
    with pytest.raises(TypeError, match="'weight' must have the dtype of 'input'|same_as"):
        torch.ops.tileops.elementwise_prelu_fwd(torch.ones(2, 3), torch.ones(3, dtype=torch.float16))
