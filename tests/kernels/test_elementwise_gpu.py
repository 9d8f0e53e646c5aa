"""Elementwise engine on CUDA (nvrtc target) against torch on CUDA, for every entry of
manifests/elementwise.yaml and every dtype it lists: broadcasting, special values, each planned
path (vectorised contiguous, a 0-dim operand, misaligned, strided: transposed through tiles, sliced,
expanded, outer broadcast, bias rows), the in-place and out= branches, and indexing past 2^31 elements."""
import pytest
import torch

from support.elementwise_cases import CASES, modulo_pairs, sample, values

pytestmark = pytest.mark.gpu

NAMES = sorted(CASES)
ALL = [(n, d) for n in NAMES for d in CASES[n].dtypes]
# Float results: torch's CUDA kernels use the same float32 math, libdevice may differ by an ulp.
TOL = {torch.float32: dict(rtol=2e-6, atol=1e-6), torch.float16: dict(rtol=1e-3, atol=1e-5),
       torch.bfloat16: dict(rtol=8e-3, atol=1e-5)}


def close(y, ref):
    assert y.dtype == ref.dtype and y.shape == ref.shape, (y.dtype, ref.dtype, y.shape, ref.shape)
    if y.dtype in TOL:
        torch.testing.assert_close(y, ref, equal_nan=True, **TOL[y.dtype])
        # -0.0 and +0.0 are told apart where torch tells them apart
        assert torch.equal(torch.signbit(y[ref == 0]), torch.signbit(ref[ref == 0]))
    else:
        assert torch.equal(y, ref)


@pytest.mark.parametrize("name,dtype", ALL, ids=[f"{n}-{str(d)[6:]}" for n, d in ALL])
def test_matches_torch_cuda(name, dtype):
    case = CASES[name]
    P = case.params_for(dtype)
    for shapes in (None, case.in_place_shapes((1000, 37)), [(8, 4096)] + [()] * (len(case.inputs) - 1)):
        args = sample(case, dtype, "cuda", shapes=shapes)
        close(case.op()(*args, **P), case.ref(*args, **P))


@pytest.mark.parametrize("name", [n for n in NAMES if not CASES[n].along])  # prelu: test_prelu_layouts
def test_every_layout(name):
    case = CASES[name]
    dt = case.dtypes[-1] if torch.bfloat16 not in case.dtypes else torch.bfloat16
    P = case.params_for(dt)

    def make(shape, k):
        dts = case.inputs[k][1]
        return values(shape if case.shapes[k] != () else (), dts[0] if len(dts) == 1 else dt, k).cuda()
    def shifted(shape, k):  # one element past an aligned start
        t = make((shape[0] * shape[1] + 1,), k)
        return t[1:].view(shape) if t.dim() else t

    def inner(shape, k):  # rows two elements longer, sliced to their middle
        t = make(shape, k)
        return t[:, 1:-1] if t.dim() else t
    n = len(case.inputs)
    layouts = [
        [make((4096, 1), 0)] + [make((1, 4096), k) for k in range(1, n)],            # outer broadcast
        [make((512, 384), 0).t()] + [make((384, 512), k) for k in range(1, n)],       # transposed: tiled
        [make((515, 389), 0).t()] + [make((389, 515), k) for k in range(1, n)],       # partial tiles
        [make((515, 389), k).t() for k in range(n)],                                    # every input transposed
        [make((512, 386), k).t() for k in range(n)],                                    # ... 2 a thread
        [shifted((512, 384), 0).t()] + [inner((384, 514), k) for k in range(1, n)],  # ... starts misaligned
        [make((40, 3000), 0).t()] + [make((3000, 40), k) for k in range(1, n)],       # one tile and a bit wide
        [make((300, 514), 0)[:, 1:513]] + [make((300, 512), k) for k in range(1, n)],  # sliced: misaligned rows
        [make(((1 << 16) + 1,), 0)[1:]] + [make((1 << 16,), k) for k in range(1, n)],    # misaligned start
        [make((64, 1, 7, 1, 3, 1, 5), 0)] + [make((1, 2, 1, 4, 1, 6, 5), k) for k in range(1, n)],  # rank 7
        [make((256, 1024), 0)] + [make((1024,), k) for k in range(1, n)],              # a bias row
        [make((1024,), 0)] + [make((256, 1024), k) for k in range(1, n)],              # the row first
        [make((96, 6), 0)] + [make((6,), k) for k in range(1, n)],                      # rows of 6: 2 a step
    ]
    for args in layouts:
        close(case.op()(*args, **P), case.ref(*args, **P))


@pytest.mark.parametrize("name", [n for n in NAMES if CASES[n].in_place])
def test_in_place_and_out(name):
    case = CASES[name]
    dt = case.float_dtype
    P = case.params_for(dt)
    args = sample(case, dt, "cuda", shapes=case.in_place_shapes((257, 129)))
    ref = case.ref(*args, **P)
    out = torch.empty_like(ref)
    case.op("_out")(*args, out, **P)
    close(out, ref)
    x = args[0].t().contiguous().t()  # a non-contiguous written input is written back
    case.op("_writes_input")(x, *args[1:], **P)
    close(x, ref.to(x.dtype))


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_properties(0).total_memory < 40 << 30,
                    reason="needs ~10 GB")
def test_indexing_past_2_31_elements():
    n = (1 << 31) + 1024
    a = torch.ones(n, dtype=torch.uint8, device="cuda")
    b = torch.full((1,), 3, dtype=torch.uint8, device="cuda")
    y = torch.ops.tileops.elementwise_add_fwd(a, b)
    assert y[-1].item() == 4 and y[0].item() == 4 and int(y.sum(dtype=torch.int64)) == 4 * n
    del y
    y = torch.ops.tileops.elementwise_add_fwd(a.view(2, -1).t(), a.view(2, -1).t())  # strided, 64-bit offsets
    assert int(y.sum(dtype=torch.int64)) == 2 * n


NAN = float("nan")


@pytest.mark.parametrize("dtype", [torch.int32, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("lo,hi", [(None, 0.0), (0.0, None), (-0.0, 0.0), (2, -1)])
def test_clamp_scalar_one_bound_and_signed_zeros(lo, hi, dtype):
    if not dtype.is_floating_point:
        lo, hi = (None if v is None else int(v) for v in (lo, hi))
    x = values((1000, 37), dtype).cuda()
    close(torch.ops.tileops.elementwise_clamp_scalar_fwd(x, min=lo, max=hi), torch.clamp(x, min=lo, max=hi))
    if lo is not None:
        close(torch.ops.tileops.elementwise_clamp_min_fwd(x, lo), torch.clamp_min(x, lo))
    if hi is not None:
        close(torch.ops.tileops.elementwise_clamp_max_fwd(x, hi), torch.clamp_max(x, hi))


def test_integer_scalars_that_overflow_are_refused_as_torch_does():
    x = torch.arange(-50, 50, device="cuda", dtype=torch.int8)
    with pytest.raises(RuntimeError, match="'min' = -300.*int8_t without overflow"):
        torch.ops.tileops.elementwise_clamp_scalar_fwd(x, min=-300)
    with pytest.raises(RuntimeError, match="without overflow"):
        torch.clamp(x, min=-300)  # torch refuses the same call
    u = torch.arange(0, 200, device="cuda", dtype=torch.uint8)
    # uint8 takes -255..255 and wraps, as torch does
    assert torch.equal(torch.ops.tileops.elementwise_clamp_min_fwd(u, -1), torch.clamp_min(u, -1))


@pytest.mark.parametrize("op,kw", [
    ("elementwise_clamp_scalar_fwd", dict(min=NAN, max=1.0)), ("elementwise_clamp_scalar_fwd", dict(min=NAN)),
    ("elementwise_clamp_scalar_fwd", dict(max=NAN)), ("elementwise_clamp_min_fwd", dict(min=NAN)),
    ("elementwise_clamp_max_fwd", dict(max=NAN))])
def test_a_nan_bound_gives_nan_everywhere(op, kw):
    # torch fills the result with NaN for clamp_min/clamp_max/two bounds (and on CPU for one bound; its
    # CUDA kernel ignores a NaN single bound): here every NaN bound gives NaN
    y = getattr(torch.ops.tileops, op)(values((1000, 37), torch.bfloat16).cuda(), **kw)
    assert torch.isnan(y).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int64, torch.bool])
@pytest.mark.parametrize("kw", [{}, dict(nan=1.5, neginf=-7.0), dict(posinf=1e39), dict(nan=-2.0, posinf=2.0, neginf=-2.0)])
def test_nan_to_num_cuda(kw, dtype):
    x = values((1000, 37), dtype).cuda()
    close(torch.ops.tileops.elementwise_nan_to_num_fwd(x, **kw), torch.nan_to_num(x, **kw))


def _divisors(shape, dtype):
    b = values(shape, dtype, 1)
    if dtype.is_floating_point:
        return b
    return torch.where((b == 0) | (b == -1) if dtype != torch.uint8 else b == 0, torch.full_like(b, 3), b)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
                                   torch.bfloat16, torch.float32])
@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
def test_div_rounding_modes_cuda(mode, dtype):
    for a_shape, b_shape in (((1000, 37), (37,)), ((37, 1000), (37, 1000))):
        a, b = values(a_shape, dtype).cuda(), _divisors(b_shape, dtype).cuda()
        close(torch.ops.tileops.elementwise_div_fwd(a, b, rounding_mode=mode), torch.div(a, b, rounding_mode=mode))
    a, b = values((64, 33), dtype).cuda(), _divisors((64, 33), dtype).cuda().t().contiguous().t()  # strided divisor
    close(torch.ops.tileops.elementwise_div_fwd(a, b, rounding_mode=mode), torch.div(a, b, rounding_mode=mode))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_float_modulo_bit_for_bit_with_torch_cuda(dtype):
    """Both computed in float32 and rounded once, as torch's CUDA kernels do, except float16
    floor_divide, which torch rounds otherwise (e.g. 26704 // -0.98095703125: the float32 quotient
    -27223 rounds to -27216, torch gives -27232): there the float32 result rounded once is the reference
    (and test_matches_torch_cuda holds it to torch within float16's tolerance)."""
    a, b = (t.to(dtype).cuda() for t in modulo_pairs())
    bits = torch.int32 if dtype == torch.float32 else torch.int16
    for ours, ref in ((torch.ops.tileops.elementwise_remainder_fwd, torch.remainder),
                      (torch.ops.tileops.elementwise_floor_divide_fwd, torch.floor_divide)):
        y = ours(a, b)
        if dtype == torch.float16 and ref is torch.floor_divide:
            want = ref(a.float(), b.float()).half()
        else:
            want = ref(a, b)
        same = (y.view(bits) == want.view(bits)) | (y.isnan() & want.isnan())
        bad = (~same).nonzero().flatten()[:5].tolist()
        assert not bad, (ref.__name__, [(a[i].item(), b[i].item(), y[i].item(), want[i].item()) for i in bad])


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64])
@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_div_integer_edge_cases_cuda(mode, dtype):
    lo = torch.iinfo(dtype).min
    a = torch.tensor([lo, 7, -7, 5, -5, 0], dtype=dtype, device="cuda")
    b = torch.tensor([-1, -1, -1, 0, 0, 0], dtype=dtype, device="cuda")
    # min / -1 wraps to min; division by zero gives 0 (manifests/elementwise.yaml, DivFwdOp)
    want = torch.tensor([lo, -7, 7, 0, 0, 0], dtype=dtype, device="cuda")
    assert torch.equal(torch.ops.tileops.elementwise_div_fwd(a, b, rounding_mode=mode), want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_prelu_layouts(dtype):
    F = torch.nn.functional
    cases = [
        (values((8, 64, 14, 14), dtype), values((64,), dtype, 3)),                                  # per channel
        (values((8, 64, 14, 14), dtype).to(memory_format=torch.channels_last), values((64,), dtype, 3)),
        (values((8, 64, 14, 14), dtype), values((1,), dtype, 3)),                                   # one weight
        (values((4096, 512), dtype), values((1024,), dtype, 3)[::2]),                               # strided weight
        (values((512, 4096), dtype).t(), values((512,), dtype, 3)),                                 # transposed
        (values((1 << 16,), dtype), values((), dtype, 3)),                                          # 1-D, 0-dim weight
    ]
    for x, w in cases:
        x, w = x.cuda(), w.cuda()
        close(torch.ops.tileops.elementwise_prelu_fwd(x, w), F.prelu(x, w))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_maximum_minimum_bit_for_bit_cuda(dtype):
    """Zeros of both signs in both orders, NaNs of both signs on either side, infinities: torch's
    results bit for bit (assert_close takes -0.0 for 0.0), through the contiguous and the broadcast
    paths. float32 keeps the winning NaN's sign as torch does; a 16-bit NaN is compared as a NaN."""
    v = torch.tensor([0.0, -0.0, 1.0, -1.0, float("inf"), -float("inf"), float("nan"), 2.5, -2.5])
    v = torch.cat([v, -v[6:7]])  # -NaN
    a = v.repeat_interleave(v.numel()).to(dtype).cuda()
    b = v.repeat(v.numel()).to(dtype).cuda()
    bits = torch.int32 if dtype == torch.float32 else torch.int16
    for ours, ref in ((torch.ops.tileops.elementwise_maximum_fwd, torch.maximum),
                      (torch.ops.tileops.elementwise_minimum_fwd, torch.minimum)):
        for x, y in ((a, b), (a.view(v.numel(), v.numel()), v.to(dtype).cuda())):
            got, want = ours(x, y), ref(x, y)
            same = got.view(bits) == want.view(bits)
            if dtype != torch.float32:
                same |= got.isnan() & want.isnan()
            assert same.all(), (ref.__name__, got[~same][:5].tolist(), want[~same][:5].tolist())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_hardswish_hardsigmoid_bit_for_bit_cuda(dtype):
    """Every 16-bit value, or a spread of float32 patterns with the specials: torch's CUDA results bit
    for bit (its kernels multiply by RN(1/6) where the formula divides by 6; NaNs compared as NaNs)."""
    if dtype == torch.float32:
        x = torch.arange(-2 ** 31, 2 ** 31 - 1, 4099, dtype=torch.int64).to(torch.int32).view(torch.float32)
        x = torch.cat([x, torch.tensor([0.0, -0.0, float("inf"), -float("inf"), -3.0, 3.0, 1e-40])])
        bits = torch.int32
    else:
        x = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
        bits = torch.int16
    x = x.cuda()
    F = torch.nn.functional
    for ours, ref in ((torch.ops.tileops.elementwise_hardswish_fwd, F.hardswish),
                      (torch.ops.tileops.elementwise_hardsigmoid_fwd, F.hardsigmoid)):
        got, want = ours(x), ref(x)
        same = (got.view(bits) == want.view(bits)) | (got.isnan() & want.isnan())
        assert same.all(), (ref.__name__, x[~same][:5].tolist(), got[~same][:5].tolist(), want[~same][:5].tolist())
