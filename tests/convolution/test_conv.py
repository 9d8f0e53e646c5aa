"""Convolution family on CPU (reference target): Conv1dFwdOp, Conv2dFwdOp, Conv3dFwdOp against
torch.nn.functional.conv{1,2,3}d computed in float64 from the same inputs (odd sizes, stride, padding,
dilation, groups and depthwise, bias or none, padding_str 'valid' / 'same' with odd and even kernels,
one int or per-dim lists, unbatched and empty-batch inputs, non-contiguous inputs), bit for bit against
the float32 sum rounded once, refusals naming the op and the argument or rule, Meta/fake shapes, the
Op classes, opcheck, torch.compile with dynamic shapes and export."""
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

import tileops
import tileops.convolution as conv_classes
from support.graphs import GraphRecorder
from support.reference import TOL

tileops.load()
ops = torch.ops.tileops


@dataclass(frozen=True)
class Conv:
    rank: int        # spatial dims
    cls: str
    ref: object      # torch.nn.functional.conv<rank>d
    dtypes: tuple    # the manifest's, float16 first

    @property
    def name(self):
        return f"convolution_conv{self.rank}d_fwd"

    @property
    def op(self):
        return getattr(ops, self.name)


CONVS = [
    Conv(1, "Conv1dFwdOp", F.conv1d, (torch.float16, torch.bfloat16)),
    Conv(2, "Conv2dFwdOp", F.conv2d, (torch.float16, torch.bfloat16, torch.float32)),
    Conv(3, "Conv3dFwdOp", F.conv3d, (torch.float16, torch.bfloat16, torch.float32)),
]
BY_RANK = {c.rank: c for c in CONVS}
IDS = [c.cls for c in CONVS]


def per_dim(v, rank, j):
    return v[j % len(v)] if isinstance(v, (list, tuple)) else v


# (name, C_in, C_out, spatial, kernel, params): spatial / kernel per dim (cycled to the rank); params as
# torch.nn.functional takes them, `padding` possibly a str (padding_str here)
CASES = [
    ("plain", 3, 5, (9, 7, 6), (3, 2, 3), {}),
    ("stride-pad", 4, 6, (11, 9, 7), (3, 3, 2), {"stride": 2, "padding": 1}),
    ("per-dim", 2, 3, (13, 8, 7), (3, 1, 2), {"stride": [3, 1, 2], "padding": [2, 0, 1], "dilation": [1, 2, 1]}),
    ("dilation", 3, 4, (17, 10, 9), (3, 3, 2), {"dilation": 2, "padding": 2}),
    ("groups", 6, 9, (10, 7, 5), (3, 3, 3), {"groups": 3, "padding": 1}),
    ("depthwise", 5, 5, (12, 6, 6), (5, 3, 3), {"groups": 5, "padding": 2}),
    ("depthwise-mult", 4, 8, (9, 5, 4), (3, 2, 2), {"groups": 4}),
    ("pointwise", 7, 3, (5, 4, 3), (1, 1, 1), {}),
    ("kernel-equals-input", 2, 3, (5, 4, 3), (5, 4, 3), {}),
    ("stride-past-end", 2, 2, (10, 9, 8), (3, 2, 2), {"stride": 4}),
    ("big-padding", 2, 2, (3, 3, 2), (2, 2, 2), {"padding": 4}),
    ("valid", 3, 4, (9, 8, 6), (4, 3, 2), {"padding": "valid"}),
    ("same-odd", 3, 4, (9, 8, 6), (3, 5, 3), {"padding": "same"}),
    ("same-even", 3, 4, (9, 8, 6), (4, 2, 2), {"padding": "same"}),
    ("same-dilated", 2, 4, (11, 8, 7), (2, 3, 2), {"padding": "same", "dilation": [3, 2, 1]}),
    ("same-groups", 4, 6, (7, 6, 5), (2, 3, 2), {"padding": "same", "groups": 2}),
]


def shaped(params, rank):
    """The case's params for one rank: lists cut to `rank` entries, ints and strs as they are."""
    return {k: ([per_dim(v, rank, j) for j in range(rank)] if isinstance(v, list) else v) for k, v in params.items()}


def ours(params):
    """torch's kwargs as the operator's: a str padding is padding_str."""
    out = dict(params)
    if isinstance(out.get("padding"), str):
        out["padding_str"] = out.pop("padding")
    return out


def call(conv, x, w, b=None, **params):
    return conv.op(x, w, b, **ours(params))


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def operands(conv, c_in, c_out, spatial, kernel, params, dtype, batch=(2,), bias=True, seed=0):
    rank, groups = conv.rank, params.get("groups", 1)
    x = sample((*batch, c_in, *spatial[:rank]), dtype, seed)
    w = sample((c_out, c_in // groups, *kernel[:rank]), dtype, seed + 1)
    b = sample((c_out,), dtype, seed + 2) if bias else None
    return x, w, b


def float64_ref(conv, x, w, b, params):
    return conv.ref(x.double(), w.double(), None if b is None else b.double(), **params)


def check_close(y, ref64):
    """y (rounded once to its dtype) beside the float64 result: TOL of the output's scale."""
    assert y.shape == ref64.shape and y.is_contiguous()
    tol = TOL[y.dtype]
    scale = ref64.abs().max().item() if ref64.numel() else 1.0
    torch.testing.assert_close(y.double(), ref64, rtol=tol, atol=tol * max(scale, 1e-30))


def cases():
    for conv in CONVS:
        for name, c_in, c_out, spatial, kernel, params in CASES:
            for bias in (True, False):
                yield pytest.param(conv, c_in, c_out, spatial, kernel, shaped(params, conv.rank), bias,
                                   id=f"{conv.cls}-{name}-{'bias' if bias else 'nobias'}")


@pytest.mark.parametrize("conv,c_in,c_out,spatial,kernel,params,bias", list(cases()))
def test_matches_torch_in_float64(conv, c_in, c_out, spatial, kernel, params, bias):
    for dtype in conv.dtypes:
        x, w, b = operands(conv, c_in, c_out, spatial, kernel, params, dtype, bias=bias)
        y = call(conv, x, w, b, **params)
        assert y.dtype == dtype
        check_close(y, float64_ref(conv, x, w, b, params))
        # the reference target's contract: float32 sums, the bias added, one rounding
        b32 = None if b is None else b.float()
        exact = conv.ref(x.float(), w.float(), b32, **params).to(dtype)
        torch.testing.assert_close(y, exact, rtol=0, atol=0)


@pytest.mark.parametrize("conv", CONVS, ids=IDS)
def test_unbatched_empty_batch_and_non_contiguous_inputs(conv):
    params = shaped({"stride": [2, 1, 1], "padding": 1, "groups": 2}, conv.rank)
    dtype = conv.dtypes[0]
    x, w, b = operands(conv, 4, 6, (9, 8, 7), (3, 3, 2), params, dtype, batch=())  # [C_in, *spatial]
    y = call(conv, x, w, b, **params)
    assert y.shape == conv.ref(x, w, b, **params).shape and y.dim() == conv.rank + 1
    check_close(y, float64_ref(conv, x, w, b, params))
    e, w, b = operands(conv, 4, 6, (9, 8, 7), (3, 3, 2), params, dtype, batch=(0,))  # no work, an empty result
    y = call(conv, e, w, b, **params)
    assert y.shape == conv.ref(e.float(), w.float(), b.float(), **params).shape and y.numel() == 0
    big, w, b = operands(conv, 4, 6, (18, 16, 14), (3, 3, 2), params, dtype)
    nc = big[(slice(None), slice(None), *[slice(None, None, 2)] * conv.rank)]  # every other element
    wt = w.transpose(0, 1).contiguous().transpose(0, 1)                       # a weight of other strides
    assert not nc.is_contiguous() and not wt.is_contiguous()
    check_close(call(conv, nc, wt, b, **params), float64_ref(conv, nc, w, b, params))


def test_same_padding_puts_the_odd_one_on_the_right():
    # kernel 2: torch pads 0 on the left and 1 on the right, so y[l] = x[l] * w0 + x[l + 1] * w1
    x = torch.tensor([[[1.0, 2.0, 4.0, 8.0]]], dtype=torch.bfloat16)
    w = torch.tensor([[[1.0, 16.0]]], dtype=torch.bfloat16)
    y = ops.convolution_conv1d_fwd(x, w, None, padding_str="same")
    assert y.tolist() == [[[33.0, 66.0, 132.0, 8.0]]]
    assert ops.convolution_conv1d_fwd(x, w, None, padding_str="valid").shape == (1, 1, 3)


def test_a_bias_is_added_before_the_one_rounding():
    # 256 + 1 + 1 is 258 in bfloat16 only when the bias joins the float32 sum (rounded alone: 256)
    x = torch.tensor([[[256.0, 1.0]]], dtype=torch.bfloat16)
    w = torch.tensor([[[1.0, 1.0]]], dtype=torch.bfloat16)
    y = ops.convolution_conv1d_fwd(x, w, torch.tensor([1.0], dtype=torch.bfloat16))
    assert y.item() == 258.0


REFUSALS = [
    # (rank, input shape, weight shape, bias shape or None, params, message); torch refuses each too
    (1, (2, 4, 9), (6, 2, 3), None, {"groups": 0}, r"groups >= 1"),
    (1, (2, 4, 9), (6, 2, 3), None, {"groups": 3}, r"C_in == C_in_g \* groups"),
    (2, (2, 4, 9, 9), (6, 4, 3, 3), None, {"groups": 4}, r"C_in == C_in_g \* groups"),
    (2, (2, 4, 9, 9), (6, 1, 3, 3), None, {"groups": 4}, r"C_out % groups == 0"),
    (3, (2, 4, 5, 5, 5), (0, 4, 3, 3, 3), None, {}, r"C_out >= groups"),
    (1, (2, 4, 9), (6, 4, 3), (5,), {}, r"'bias' must have shape \[C_out\]"),
    (1, (2, 4, 9), (6, 4, 3), (6, 1), {}, r"'bias' must have shape \[C_out\]"),
    (1, (1, 2, 4, 9), (6, 4, 3), None, {}, r"ndim\(input\) <= 3"),
    (2, (2, 4, 9), (6, 4, 3), None, {}, r"'weight' must have shape \[C_out, C_in_g, kH, kW\]"),
    (1, (2, 4, 9), (6, 4, 3), None, {"stride": 0}, r"argument 'stride' must be positive"),
    (1, (2, 4, 9), (6, 4, 3), None, {"dilation": 0}, r"argument 'dilation' must be positive"),
    (2, (2, 4, 9, 9), (6, 4, 3, 3), None, {"padding": [1, -1]}, r"argument 'padding' must be non-negative"),
    (1, (2, 4, 9), (6, 4, 3), None, {"stride": [1, 1]}, r"argument 'stride' must be a single int, got"),
    (2, (2, 4, 9, 9), (6, 4, 3, 3), None, {"stride": [2, 1, 1]}, r"argument 'stride' must be a single int or 2 ints"),
    (3, (2, 4, 5, 5, 5), (6, 4, 3, 3, 3), None, {"dilation": [1, 1]},
     r"argument 'dilation' must be a single int or 3 ints"),
    (1, (2, 4, 9), (6, 4, 10), None, {}, r"the dilated kernel is larger than the padded input"),
    (2, (2, 4, 9, 9), (6, 4, 3, 3), None, {"dilation": [1, 5]}, r"the dilated kernel is larger than the padded input"),
    (2, (2, 4, 9, 9), (6, 4, 3, 3), None, {"padding": "same", "stride": 2}, r"padding_str='same' needs 'stride' 1"),
]


@pytest.mark.parametrize("rank,xs,ws,bs,params,what", REFUSALS)
def test_bad_arguments_are_refused_naming_the_op_as_torch_refuses_them(rank, xs, ws, bs, params, what):
    conv = BY_RANK[rank]
    x, w = torch.randn(xs), torch.randn(ws)
    b = None if bs is None else torch.randn(bs)
    with pytest.raises(RuntimeError):
        conv.ref(x, w, b, **params)
    dtype = conv.dtypes[0]
    args = (x.to(dtype), w.to(dtype), None if b is None else b.to(dtype))
    with pytest.raises((RuntimeError, ValueError), match=rf"tileops::{conv.name}: .*{what}"):
        call(conv, *args, **params)
    meta = tuple(None if t is None else t.to("meta") for t in args)
    with pytest.raises((RuntimeError, ValueError), match=rf"tileops::{conv.name}: .*{what}"):
        call(conv, *meta, **params)  # the Meta kernel refuses alike


@pytest.mark.parametrize("rank,xs,ws,params,what", [
    # where torch fails without naming the problem, answers inconsistently, or wraps around
    (1, (2, 4, 9), (6, 4, 0), {}, r"'weight' must have kernel dims >= 1"),
    (2, (2, 4, 0, 9), (6, 4, 1, 1), {"padding": 1}, r"'input' must not be empty in spatial dim 0"),
    (1, (2, 0, 9), (6, 0, 3), {}, r"C_in_g >= 1"),
    (1, (2, 4, 9), (6, 4, 3), {"padding": 2**31}, r"argument 'padding' must be below 2\^31"),
    (1, (2, 4, 9), (6, 4, 3), {"dilation": 2**62}, r"argument 'dilation' must be below 2\^31"),
    (1, (2, 4, 9), (6, 4, 3), {"padding": 1, "padding_str": "same"}, r"argument 'padding' must be 0 when 'padding_str'"),
    (1, (2, 4, 9), (6, 4, 3), {"padding_str": "full"}, r"padding_str.*valid \| same"),
])
def test_what_torch_does_not_refuse_cleanly_is_refused_here(rank, xs, ws, params, what):
    conv = BY_RANK[rank]
    dtype = conv.dtypes[0]
    x, w = torch.randn(xs).to(dtype), torch.randn(ws).to(dtype)
    for t in ((x, w), (x.to("meta"), w.to("meta"))):
        with pytest.raises((RuntimeError, ValueError), match=rf"tileops::{conv.name}: .*{what}"):
            conv.op(*t, None, **params)


def test_a_huge_kernel_on_meta_is_refused_not_wrapped_around():
    # d(k - 1) would pass 2^63 here; the check is written so that it cannot overflow
    x = torch.empty(1, 1, 2**40, device="meta", dtype=torch.float16)
    w = torch.empty(1, 1, 2**40 + 2, device="meta", dtype=torch.float16)
    with pytest.raises(RuntimeError, match="the dilated kernel is larger than the padded input"):
        ops.convolution_conv1d_fwd(x, w, None, dilation=[2**31 - 1])
    y = ops.convolution_conv1d_fwd(x, w[..., : 2**40 - 1], None, padding=[1])
    assert y.shape == (1, 1, 4)  # 2^40 + 2 - (2^40 - 2) - 1 + 1


@pytest.mark.parametrize("conv", CONVS, ids=IDS)
def test_dtypes_outside_the_manifest_and_mixed_dtypes_are_refused(conv):
    x, w = torch.randn(1, 2, *([5] * conv.rank)), torch.randn(3, 2, *([2] * conv.rank))
    with pytest.raises(TypeError, match=f"tileops::{conv.name}: 'input' must have dtype"):
        conv.op(x.double(), w.double(), None)
    if torch.float32 not in conv.dtypes:
        with pytest.raises(TypeError, match=f"tileops::{conv.name}: 'input' must have dtype"):
            conv.op(x, w, None)
    dt = conv.dtypes[0]
    with pytest.raises(TypeError, match=f"tileops::{conv.name}: 'weight'"):
        conv.op(x.to(dt), w.to(torch.bfloat16), None)
    with pytest.raises(TypeError, match=f"tileops::{conv.name}: 'bias'"):
        conv.op(x.to(dt), w.to(dt), torch.zeros(3, dtype=torch.bfloat16))


@pytest.mark.parametrize("conv", CONVS, ids=IDS)
def test_fake_and_meta_shapes_match_torch(conv):
    for name, c_in, c_out, spatial, kernel, params in CASES:
        params = shaped(params, conv.rank)
        x, w, b = operands(conv, c_in, c_out, spatial, kernel, params, conv.dtypes[0])
        expect = conv.ref(x.float(), w.float(), b.float(), **params)
        with FakeTensorMode() as mode:
            y = call(conv, mode.from_tensor(x), mode.from_tensor(w), mode.from_tensor(b), **params)
        assert y.shape == expect.shape and y.dtype == x.dtype and y.is_contiguous(), name
        assert call(conv, x.to("meta"), w.to("meta"), None, **params).shape == expect.shape, name


@pytest.mark.parametrize("conv", CONVS, ids=IDS)
def test_opcheck(conv):
    params = shaped({"stride": [2, 1, 1], "padding": 1, "groups": 2}, conv.rank)
    x, w, b = operands(conv, 4, 6, (9, 8, 7), (3, 3, 2), params, conv.dtypes[0])
    torch.library.opcheck(conv.op.default, (x, w, b), ours(params))
    torch.library.opcheck(conv.op.default, (x, w, None), {"padding_str": "same", "groups": 2})


def test_op_classes_take_an_int_or_a_list_as_torch_does():
    x = sample((2, 4, 9, 10), torch.float32)
    w = sample((6, 2, 3, 3), torch.float32, 1)
    b = sample((6,), torch.float32, 2)
    op = conv_classes.Conv2dFwdOp(stride=2, padding=1, groups=2)
    assert op.stride == [2, 2] and op.padding == [1, 1] and op.dilation == [1, 1]  # an int stands for every dim
    torch.testing.assert_close(op(x, w, b), F.conv2d(x, w, b, 2, 1, 1, 2), rtol=0, atol=0)
    torch.testing.assert_close(op(x, w), F.conv2d(x, w, None, 2, 1, 1, 2), rtol=0, atol=0)  # bias left out
    op = conv_classes.Conv2dFwdOp(padding_str="same", dilation=[1, 2], groups=2)
    torch.testing.assert_close(op(x, w), F.conv2d(x, w, None, 1, "same", [1, 2], 2), rtol=0, atol=0)
    v = sample((1, 3, 5), torch.float16)
    op = conv_classes.Conv1dFwdOp([2], [1])
    y = op(v, sample((4, 3, 3), torch.float16, 1))
    assert y.shape == (1, 4, 3)
    assert conv_classes.Conv3dFwdOp.compile_op_names == ("tileops::convolution_conv3d_fwd",)
    # the raw operator takes one int too (the schema's int[N] fills it in)
    torch.testing.assert_close(ops.convolution_conv2d_fwd(x, w, b, 2, 1, 1, 2), F.conv2d(x, w, b, 2, 1, 1, 2),
                               rtol=0, atol=0)


# Every op compiles cold to one node (tests/contracts/convolution.py); dynamic shapes and export here.
@pytest.mark.parametrize("conv", CONVS, ids=IDS)
def test_compiles_to_one_node_with_dynamic_shapes_and_exports(conv):
    import torch._dynamo
    torch._dynamo.reset()
    rec = GraphRecorder()
    params = shaped({"stride": [2, 1, 1], "padding": [1, 0, 1], "groups": 2}, conv.rank)
    dtype = conv.dtypes[0]
    w = sample((6, 2, *([3] * conv.rank)), dtype, 1)
    b = sample((6,), dtype, 2)

    def expect(x):
        return conv.ref(x.float(), w.float(), b.float(), **params).to(dtype)

    # the op is looked up outside: dynamic=True makes Dynamo trace conv.rank as a SymInt, and a SymInt
    # cannot build the op's name (torch 2.11)
    op, kwargs = conv.op, ours(params)
    fn = torch.compile(lambda x: op(x, w, b, **kwargs), fullgraph=True, backend=rec, dynamic=True)
    # the weight and bias are graph inputs too: sizes apart from C_in = 4, C_out = 6 and the kernel's 3 and
    # 2, so duck sizing ties none
    for n, s in ((5, 9), (7, 12), (8, 17)):
        x = sample((n, 4, *([s] * conv.rank)), dtype)
        torch.testing.assert_close(fn(x), expect(x), rtol=0, atol=0)
    assert len(rec.graphs) == 1  # one graph serves every size
    assert rec.calls(packets=True) == [conv.op]

    class M(torch.nn.Module):
        def forward(self, x):
            return op(x, w, b, **kwargs)

    x = sample((5, 4, *([10] * conv.rank)), dtype)
    ep = torch.export.export(M(), (x,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    assert sum(n.op == "call_function" and getattr(n.target, "overloadpacket", None) == conv.op
               for n in ep.graph.nodes) == 1
    x2 = sample((9, 4, *([10] * conv.rank)), dtype)
    torch.testing.assert_close(ep.module()(x2), expect(x2), rtol=0, atol=0)
