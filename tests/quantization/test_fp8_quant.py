"""FP8QuantFwdOp on CPU (reference target) against TileOPs' formula computed here in float64: bit-exact
scales and float8_e4m3fn bytes for every dtype and odd sizes, the all-zero floor, NaN and infinities,
argument errors, Meta/fake tensors, torch.compile, torch.export, opcheck."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from support.graphs import GraphRecorder

OP = torch.ops.tileops.quantization_fp8_quant_fwd
PREFIX = r"tileops::quantization_fp8_quant_fwd: "
FP8 = torch.float8_e4m3fn
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
FLOOR = torch.tensor(1e-4, dtype=torch.float32).double()          # float32(1e-4)
INV_QMAX = torch.tensor(1 / 448, dtype=torch.float32).double()    # float32(1 / 448)


def formula(x):
    """(scale, q) of TileOPs' kernel, computed in float64 and rounded where it rounds to float32.

    Exact products and quotients of float32 values rounded once to float32 equal the float32
    operations (float64 has more than 2 * 24 + 2 bits), so this is independent of torch's float32 math.
    """
    xd = x.double()
    amax = torch.maximum(xd.abs().amax(-1, keepdim=True), FLOOR)
    scale = (amax * INV_QMAX).float()
    v = (xd / scale.double()).float()
    return scale.squeeze(-1), v.clamp(-448, 448).to(FP8)


def same(got, want):
    scale, q = got
    ref_scale, ref_q = want
    assert scale.dtype == torch.float32 and q.dtype == FP8
    assert scale.shape == ref_scale.shape and q.shape == ref_q.shape
    assert torch.equal(scale, ref_scale)
    assert torch.equal(q.view(torch.uint8), ref_q.view(torch.uint8))


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float32)
    # Rows of very different ranges (tiny ones under the 1e-4 floor included) get different scales.
    x = x * torch.exp2(torch.randint(-16, 12, shape[:-1], generator=g).float()).unsqueeze(-1)
    return x.to(dtype)


SHAPES = [(2, 5, 3, 64), (1, 7, 1, 1), (3, 2, 2, 37), (1, 4, 1, 128), (2, 3, 1, 1000), (1, 1, 5, 3)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matches_the_formula_bit_for_bit(dtype, shape):
    x = sample(shape, dtype, seed=len(shape) * 1000 + shape[-1])
    got = OP(x)
    assert got[0].shape == shape[:-1] and got[1].shape == shape
    same(got, formula(x))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_each_row_reaches_448_and_the_python_class(dtype):
    import tileops.quantization as quantization
    x = sample((2, 16, 2, 64), dtype, seed=3)
    scale, q = quantization.FP8QuantFwdOp()(x)
    same((scale, q), formula(x))
    big = x.float().abs().amax(-1) >= 1e-4
    assert big.any()
    assert torch.equal(q.float().abs().amax(-1)[big], torch.full((int(big.sum()),), 448.0))


def test_scale_is_the_float32_product_with_1_over_448():
    # amax * float32(1 / 448) and amax / 448 differ in the last bit for some rows: TileOPs multiplies.
    x = sample((1, 512, 1, 16), torch.float32, seed=5)
    scale, _ = OP(x)
    amax = torch.maximum(x.abs().amax(-1), torch.tensor(1e-4))
    assert torch.equal(scale, amax * torch.tensor(1 / 448, dtype=torch.float32))
    assert not torch.equal(scale, amax / 448)


def test_q_is_a_true_division_by_the_scale():
    # Values x near scale * (an e4m3fn midpoint): x / scale and x * (1 / scale) round to different
    # float32 values, and for some of them to different e4m3fn codes. The op divides, as TileOPs does.
    rows = []
    mids = torch.tensor([1.0625, 3.125, 6.25, 13.0, 26.0, 52.0, 104.0, 208.0, 416.0])
    for a in torch.linspace(1.0, 9.0, 257):
        s = (a * torch.tensor(1 / 448, dtype=torch.float32))
        base = (mids * s).float()
        cands = torch.cat([torch.nextafter(base, torch.full_like(base, k * 1e9)) for k in (-1, 1)] + [base])
        cands = cands[cands.abs() <= a]
        div, mul = (cands / s).to(FP8).float(), (cands * (1 / s)).to(FP8).float()
        hit = cands[div != mul]
        if len(hit):
            rows.append(torch.cat([a.reshape(1), hit[:7], torch.zeros(7 - len(hit[:7]))]))
    assert len(rows) >= 2
    x = torch.stack(rows).reshape(1, len(rows), 1, 8)
    scale, q = OP(x)
    same((scale, q), formula(x))
    s = scale.unsqueeze(-1)
    assert not torch.equal(q.view(torch.uint8), (x * (1 / s)).clamp(-448, 448).to(FP8).view(torch.uint8))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_zero_and_tiny_rows_take_the_floor(dtype):
    x = sample((1, 4, 1, 32), dtype, seed=7)
    x[0, 0] = 0
    x[0, 1] = -0.0                    # signed zeros stay signed
    x[0, 2] = 3e-5                    # under the floor: scale 1e-4 / 448, q = x / scale
    scale, q = OP(x)
    same((scale, q), formula(x))
    floor = float((FLOOR * INV_QMAX).float())
    assert scale[0, :3, 0].tolist() == [floor] * 3
    assert torch.equal(q[0, 0].view(torch.uint8), torch.zeros(1, 32, dtype=torch.uint8))
    assert torch.equal(q[0, 1].view(torch.uint8), torch.full((1, 32), 0x80, dtype=torch.uint8))
    assert (q[0, 2].float().abs() < 448).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_and_infinity_follow_the_formula(dtype):
    x = sample((1, 5, 1, 16), dtype, seed=9)
    x[0, 0, 0, 3] = float("nan")
    x[0, 1, 0, 5] = float("inf")
    x[0, 2, 0, 0] = -float("inf")
    scale, q = OP(x)
    qf = q.float()
    # A NaN: NaN scale, NaN everywhere in its row (the sign of a NaN byte is not specified).
    assert scale[0, 0, 0].isnan() and qf[0, 0].isnan().all()
    # An infinity: infinite scale, NaN at the infinity, a zero of the input's sign elsewhere.
    for r, c in ((1, 5), (2, 0)):
        assert scale[0, r, 0] == float("inf")
        assert qf[0, r, 0, c].isnan() and qf[0, r].isnan().sum() == 1
        others = torch.cat([q[0, r, 0, :c], q[0, r, 0, c + 1:]]).view(torch.uint8)
        assert torch.equal(others, torch.where(torch.cat([x[0, r, 0, :c], x[0, r, 0, c + 1:]]).float() < 0,
                                               0x80, 0).to(torch.uint8))
    # The other rows are untouched by them.
    same((scale[:, 3:], q[:, 3:]), formula(x[:, 3:]))


def test_non_contiguous_input_and_empty_rows():
    x = sample((2, 3, 4, 40), torch.bfloat16, seed=11)
    xt = x.transpose(1, 2)
    same(OP(xt), formula(xt.contiguous()))
    scale, q = OP(torch.empty(0, 3, 2, 8))
    assert scale.shape == (0, 3, 2) and q.shape == (0, 3, 2, 8) and q.dtype == FP8


# ---- argument errors -------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(8, 64), (2, 8, 64), (1, 2, 3, 4, 5), ()], ids=str)
def test_rank_other_than_4_is_refused(shape):
    with pytest.raises(RuntimeError, match=PREFIX + r".*input_tensor"):
        OP(torch.randn(shape))


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.float8_e4m3fn], ids=str)
def test_dtype_is_refused(dtype):
    with pytest.raises(TypeError, match=PREFIX + r".*input_tensor"):
        OP(torch.zeros(1, 2, 1, 8).to(dtype))


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_empty_last_dim_is_refused(device):
    with pytest.raises(ValueError, match=PREFIX + r".*index_dim > 0"):
        OP(torch.empty(1, 2, 1, 0, device=device))


# ---- Meta, fake, compile, export, opcheck ---------------------------------------------------------

def test_meta_and_fake_shapes(counters):
    for dtype in DTYPES:
        scale, q = OP(torch.empty(2, 9, 3, 64, device="meta", dtype=dtype))
        assert scale.shape == (2, 9, 3) and scale.dtype == torch.float32 and q.shape == (2, 9, 3, 64)
        assert q.dtype == FP8 and q.is_contiguous() and scale.is_contiguous()
    with FakeTensorMode():
        scale, q = OP(torch.empty(4, 3, 1, 17, dtype=torch.float16).transpose(0, 1))
        assert scale.shape == (3, 4, 1) and q.shape == (3, 4, 1, 17) and q.is_contiguous()
    assert counters()["kernel_builds"] == 0


def test_compiles_to_one_node_with_dynamic_shapes_and_exports():
    torch._dynamo.reset()
    rec = GraphRecorder()

    fn = torch.compile(lambda x: OP(x), fullgraph=True, backend=rec, dynamic=True)
    for shape in ((2, 6, 3, 64), (3, 4, 2, 64)):  # no size-1 dims: those specialise
        x = sample(shape, torch.bfloat16, seed=shape[1])
        same(fn(x), formula(x))
    assert len(rec.graphs) == 1
    assert rec.calls(packets=True) == [OP]

    class M(torch.nn.Module):
        def forward(self, x):
            return OP(x)

    x = sample((1, 8, 2, 32), torch.float16, seed=13)
    ep = torch.export.export(M(), (x,), dynamic_shapes=({1: torch.export.Dim("s")},))
    assert sum(n.op == "call_function" and n.target == OP.default for n in ep.graph.nodes) == 1
    same(ep.module()(x), formula(x))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_opcheck(dtype):
    torch.library.opcheck(OP.default, (sample((2, 3, 2, 24), dtype, seed=17),))
