"""BatchNormBwdOp on the GPU (nvrtc target): the one-launch path (batch_norm_bwd_channel, a channel's dy
and x in registers) and the chunked path (partial sums, their reduction, dx) against a float64
computation of the manifest's formula (dx rounded to dy's dtype), against torch's CUDA
native_batch_norm_backward (float32 on both sides) and the reference target on the same values; every
dtype; 2-d x, one-element spatial dims, misaligned and non-contiguous inputs, an empty batch; both sides
of the one-launch limit (tests/kernels/test_batch_norm_bwd_plan.py checks on the CPU which side each
shape plans to); bitwise equal runs; CUDA graph capture after a warm-up. Skipped without a GPU
(conftest)."""
import pytest
import torch

import tileops
from support.reference import TOL, assert_close_rel

tileops.load()
pytestmark = pytest.mark.gpu
OP = torch.ops.tileops.norm_batch_norm_bwd
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
SHAPES = {
    "fc-2d": (32, 64),                   # one launch, 32 channels a CTA
    "odd": (3, 5, 7),                    # one launch, scalar accesses
    "stage1": (8, 64, 32, 32),           # one launch, 16-byte accesses (8-byte for float32)
    "stage3": (4, 256, 28, 28),
    "tail-spatial": (4, 64, 30, 30),     # 900 = 4 * 225: 8-byte accesses
    "5d": (2, 4, 8, 16, 16),
    "spatial-1": (64, 8, 1, 1),          # one-element spatial dims: planned as 2-d x
    "long-chunks": (2, 3, 1024, 1024),   # chunked: 2 M values a channel
    "2d-chunks": (4096, 100),            # chunked, 32 channels a CTA, a partial last CTA
    "spatial-1-chunks": (20000, 4, 1, 1),
}


def channel_view(t, x):
    return t.double().view([1, x.shape[1]] + [1] * (x.dim() - 2))


def expected(dy, x, w, mean, rstd):
    """(dx, dweight, dbias) of the manifest's formula in float64, dx rounded to dy's dtype."""
    dims = [0] + list(range(2, x.dim()))
    dyd = dy.double()
    xh = (x.double() - channel_view(mean, x)) * channel_view(rstd, x)
    db, dw = dyd.sum(dims), (dyd * xh).sum(dims)
    m = max(x.numel() // x.shape[1], 1)
    dx = channel_view(w, x) * channel_view(rstd, x) * (dyd - channel_view(db, x) / m - xh * channel_view(dw, x) / m)
    return dx.to(dy.dtype), dw, db


def case(shape, dtype, seed=0):
    torch.manual_seed(seed)
    x = (torch.randn(shape, device="cuda") * 2 + 0.5).to(dtype)
    dy = torch.randn(shape, device="cuda").to(dtype)
    w = torch.randn(shape[1], device="cuda")
    _, mean, rstd = torch.native_batch_norm(x.float(), None, None, None, None, True, 0.1, 1e-5)
    return dy, x, w, mean, rstd


def assert_sums(got, want, m):
    """float32 sums of m values against float64 ones: float32 rounding that grows with sqrt(m)."""
    torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4 * max(m, 1) ** 0.5)


def check(out, dy, x, w, mean, rstd):
    dx, dw, db = out
    assert dx.shape == x.shape and dx.dtype == dy.dtype and dx.is_contiguous()
    assert dw.dtype == db.dtype == torch.float32 and dw.shape == db.shape == (x.shape[1],)
    want = expected(dy, x, w, mean, rstd)
    assert_close_rel(dx, want[0])
    m = x.numel() // x.shape[1]
    assert_sums(dw, want[1], m)
    assert_sums(db, want[2], m)
    tdx, tdw, tdb = torch.ops.aten.native_batch_norm_backward(dy.float(), x.float(), w, None, None, mean, rstd, True,
                                                              0.0, [True, True, True])
    tol = 4 * TOL[dy.dtype]
    torch.testing.assert_close(dx.float(), tdx.to(dy.dtype).float(), rtol=tol, atol=tol)
    assert_sums(dw, tdw.double(), m)
    assert_sums(db, tdb.double(), m)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_matches_float64_and_torch(shape, dtype):
    dy, x, w, mean, rstd = case(SHAPES[shape], dtype)
    check(OP(dy, x, w, mean, rstd), dy, x, w, mean, rstd)


@pytest.mark.parametrize("shape", ["stage1", "long-chunks", "2d-chunks"])
def test_matches_the_reference_target_and_repeats_bitwise(shape):
    dy, x, w, mean, rstd = case(SHAPES[shape], torch.bfloat16, seed=5)
    out = OP(dy, x, w, mean, rstd)
    ref = OP(dy.cpu(), x.cpu(), w.cpu(), mean.cpu(), rstd.cpu())
    assert_close_rel(out[0].cpu(), ref[0])
    m = x.numel() // x.shape[1]
    assert_sums(out[1].cpu(), ref[1].double(), m)
    assert_sums(out[2].cpu(), ref[2].double(), m)
    again = OP(dy, x, w, mean, rstd)  # the sums are added in one fixed order
    assert all(torch.equal(a, b) for a, b in zip(out, again))


def test_reads_the_given_statistics():
    dy, x, w, mean, rstd = case((4, 6, 9, 9), torch.float32)
    other_mean, other_rstd = mean + 0.25, rstd * 1.5
    check(OP(dy, x, w, other_mean, other_rstd), dy, x, w, other_mean, other_rstd)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_misaligned_non_contiguous_and_empty(dtype):
    c = 8
    dy, x, w, mean, rstd = case((4, c, 48), dtype)
    flat = torch.randn(1 + x.numel(), device="cuda").to(dtype)[1:].view(x.shape)
    assert flat.data_ptr() % 16 != 0
    check(OP(dy, flat, w, mean, rstd), dy, flat, w, mean, rstd)
    dy, x, w, mean, rstd = case((2, c, 6, 10), dtype)
    cl = dy.to(memory_format=torch.channels_last)
    xt = x.transpose(2, 3).contiguous().transpose(2, 3)
    ms, rs = torch.randn(2 * c, device="cuda")[::2], (torch.rand(2 * c, device="cuda") + 0.5)[::2]
    check(OP(cl, xt, w, ms, rs), cl, xt, w, ms, rs)
    dx, dw, db = OP(torch.randn(0, c, 4, device="cuda", dtype=dtype), torch.randn(0, c, 4, device="cuda", dtype=dtype),
                    w, mean, rstd)
    assert dx.shape == (0, c, 4) and torch.equal(dw, torch.zeros_like(dw)) and torch.equal(db, torch.zeros_like(db))
    dx, dw, db = OP(torch.randn(2, c, 0, device="cuda", dtype=dtype), torch.randn(2, c, 0, device="cuda", dtype=dtype),
                    w, mean, rstd)  # an empty spatial dim: the launch walks no vectors
    assert dx.shape == (2, c, 0) and torch.equal(dw, torch.zeros_like(dw)) and torch.equal(db, torch.zeros_like(db))


# Each pair: the largest channel the one-launch plan holds, and one just past it (the chunked path).
LIMITS = [
    ((1, 8, 128, 256), (1, 8, 128, 264), torch.float16),
    ((8192, 3, 4), (8193, 3, 4), torch.float16),
    ((4, 8, 64, 64), (4, 8, 64, 65), torch.float32),
    ((2, 3, 8191), (2, 3, 8193), torch.bfloat16),
    ((512, 64), (513, 64), torch.float16),
    ((1024, 16), (1025, 16), torch.bfloat16),
]


@pytest.mark.parametrize("fits,past,dtype", LIMITS, ids=[str(f) for f, _, _ in LIMITS])
def test_both_sides_of_the_one_launch_limit_match(fits, past, dtype):
    for shape in (fits, past):
        dy, x, w, mean, rstd = case(shape, dtype, seed=2)
        check(OP(dy, x, w, mean, rstd), dy, x, w, mean, rstd)


@pytest.mark.parametrize("shape", ["stage1", "long-chunks", "fc-2d"])
def test_cuda_graph_replays_after_a_warm_up(shape):
    dy, x, w, mean, rstd = case(SHAPES[shape], torch.float16)
    OP(dy, x, w, mean, rstd)  # builds the kernels outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = OP(dy, x, w, mean, rstd)
    dy.copy_(torch.randn_like(dy))
    x.copy_(torch.randn_like(x) * 3)
    mean.add_(0.5)
    g.replay()
    torch.cuda.synchronize()
    check(out, dy, x, w, mean, rstd)
