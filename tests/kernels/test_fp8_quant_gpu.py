"""FP8QuantFwdOp on the GPU (nvrtc target) against the reference target and the float64 formula: scales
and float8_e4m3fn bytes equal bit for bit (both sides divide in IEEE float32 and round to nearest
even), for every dtype, the manifest's workloads, row widths covering every access width, threads a
row and the two-pass path, a misaligned input, zero/NaN/infinite rows, CUDA graph replay.
Skipped without a GPU (conftest)."""
import pytest
import torch

pytestmark = pytest.mark.gpu
OP = torch.ops.tileops.quantization_fp8_quant_fwd
FP8 = torch.float8_e4m3fn
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
FLOOR = torch.tensor(1e-4, dtype=torch.float32).double()
INV_QMAX = torch.tensor(1 / 448, dtype=torch.float32).double()


def formula(x):
    """TileOPs' formula in float64, rounded to float32 where the kernel rounds (see the CPU test)."""
    xd = x.double()
    scale = (torch.maximum(xd.abs().amax(-1, keepdim=True), FLOOR.to(x.device)) * INV_QMAX.to(x.device)).float()
    return scale.squeeze(-1), (xd / scale.double()).float().clamp(-448, 448).to(FP8)


def assert_same(got, want):
    """Equal scales and bytes; NaNs compared by position (the sign of a NaN byte is not specified)."""
    (s, q), (s_ref, q_ref) = got, want
    assert s.shape == s_ref.shape and q.shape == q_ref.shape and q.dtype == FP8 and s.dtype == torch.float32
    torch.testing.assert_close(s, s_ref, rtol=0, atol=0, equal_nan=True)
    nan, nan_ref = q.float().isnan(), q_ref.float().isnan()
    assert torch.equal(nan, nan_ref)
    b, b_ref = q.view(torch.uint8)[~nan], q_ref.view(torch.uint8)[~nan]
    assert torch.equal(b, b_ref), f"{(b != b_ref).sum().item()} of {q.numel()} bytes differ"


def check(x):
    got = OP(x)
    assert_same(got, OP(x, target="reference"))
    assert_same(got, formula(x))
    return got


def sample(shape, dtype):
    x = torch.randn(shape, device="cuda")
    x = x * torch.exp2(torch.randint(-16, 12, shape[:-1], device="cuda").float()).unsqueeze(-1)
    return x.to(dtype)


WORKLOADS = {"kv-index-8k-d64": (1, 8192, 1, 64), "kv-index-4k-d128": (1, 4096, 1, 128)}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_workloads(name, dtype):
    torch.manual_seed(0)
    check(sample(WORKLOADS[name], dtype))


# 1, 2, 4, 8-wide accesses; 1 to 32 threads a row; 1 to 8 accesses a thread kept in registers; rows of
# more than 256 accesses read twice (past 2048 16-bit or 1024 float32 elements).
WIDTHS = [1, 2, 3, 5, 7, 8, 16, 37, 64, 100, 128, 129, 256, 264, 1000, 1024, 1032, 2048, 2056, 4096, 8200, 16384]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("d", WIDTHS)
def test_row_widths(d, dtype):
    torch.manual_seed(d)
    check(sample((2, 33, 3, d), dtype))  # 198 rows: the last CTA is partly empty


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_misaligned_and_non_contiguous_input(dtype):
    torch.manual_seed(1)
    flat = sample((1, 1, 1, 7 * 5 * 64 + 1), dtype).reshape(-1)
    x = flat[1:].view(1, 7, 5, 64)  # contiguous, one element past a 16-byte boundary: narrower accesses
    check(x)
    check(sample((3, 64, 4, 32), dtype).transpose(1, 2))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_zero_nan_and_infinite_rows(dtype):
    torch.manual_seed(2)
    x = sample((1, 64, 2, 96), dtype)
    x[0, 0] = 0
    x[0, 1] = -0.0
    x[0, 2] = 3e-5
    x[0, 3, 0, 17] = float("nan")
    x[0, 4, 1, 95] = float("inf")
    x[0, 5, 0, 0] = -float("inf")
    scale, q = check(x)
    assert scale[0, 3, 0].isnan() and q[0, 3, 0].float().isnan().all()
    assert scale[0, 4, 1] == float("inf") and q[0, 4, 1].float().isnan().sum() == 1
    assert torch.equal(q[0, 1].view(torch.uint8), torch.full((2, 96), 0x80, dtype=torch.uint8, device="cuda"))


def test_many_rows_and_groups():
    torch.manual_seed(3)
    check(sample((4, 4096, 8, 128), torch.bfloat16))
    check(sample((2, 3000, 4, 64), torch.float16))


def test_cuda_graph_replay_after_warm_up():
    torch.manual_seed(4)
    x = sample((1, 8192, 1, 64), torch.bfloat16)
    OP(x)  # warm-up: builds the kernel
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        scale, q = OP(x)
    x.copy_(sample((1, 8192, 1, 64), torch.bfloat16))
    g.replay()
    torch.cuda.synchronize()
    assert_same((scale, q), formula(x))
