"""BatchNormFwdOp on the GPU (nvrtc target): training (one launch of batch_norm_fwd_channel when a
channel fits one CTA's registers; else group_norm_fwd_stats over a sample's channel each,
batch_norm_fwd_stats a channel, then the running-stats output pass) and eval (the output pass alone)
against a float64 reference rounded to x's dtype (tests/support/reference.py) and against torch's CUDA
batch_norm (float32 statistics on both sides); the running stats moved as torch moves them; short rows,
long split rows, 2-d x, misaligned and empty x; both sides of the one-launch plan's limit
(tests/kernels/test_batch_norm_plan.py checks on the CPU which side each shape plans to); CUDA graphs.
Skipped without a GPU (conftest)."""
import pytest
import torch

import tileops
from support.reference import TOL, assert_close_rel

tileops.load()
pytestmark = pytest.mark.gpu
BN = torch.ops.tileops.norm_batch_norm_fwd_writes_running_mean_writes_running_var
F = torch.nn.functional
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
SHAPES = {
    "fc-2d": (32, 64),                    # a row a value: 2-d x
    "odd": (3, 5, 7),                     # scalar accesses
    "stage1": (8, 64, 32, 32),            # rows of 1024
    "stage3": (4, 256, 28, 28),           # rows of 784
    "tail-spatial": (4, 64, 30, 30),      # 900 = 4 * 225: 8-byte accesses
    "long-split": (2, 3, 1024, 1024),     # 6 rows of 1M: split over CTAs
    "5d": (2, 4, 8, 16, 16),
}


def channel_view(t, x):
    return t.double().view([1, x.shape[1]] + [1] * (x.dim() - 2))


def ref(x, w, b, eps, mean=None, var=None):
    """F.batch_norm in float64, rounded to x's dtype: the batch statistics unless mean and var are given."""
    xd = x.double()
    dims = [0] + list(range(2, x.dim()))
    if mean is None:
        var, mean = torch.var_mean(xd, dim=dims, correction=0)
    y = (xd - channel_view(mean, x)) / torch.sqrt(channel_view(var, x) + eps)
    if w is not None:
        y = y * channel_view(w, x)
    if b is not None:
        y = y + channel_view(b, x)
    return y.to(x.dtype)


def affine(c, dtype, on):
    return (torch.randn(c, device="cuda", dtype=dtype), torch.randn(c, device="cuda", dtype=dtype)) if on else (None, None)


def close_to_torch(y, ref_y):
    tol = 4 * TOL[y.dtype]
    torch.testing.assert_close(y.float(), ref_y.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("with_affine", [True, False], ids=["affine", "plain"])
def test_training_matches_float64_and_torch_and_moves_running_stats(shape, dtype, with_affine):
    shape = SHAPES[shape]
    c = shape[1]
    torch.manual_seed(0)
    x = torch.randn(shape, device="cuda", dtype=dtype) * 2 + 0.5
    w, b = affine(c, dtype, with_affine)
    rm, rv = torch.randn(c, device="cuda"), torch.rand(c, device="cuda") + 0.5
    rm_t, rv_t = rm.clone(), rv.clone()
    y = BN(x, rm, rv, w, b, True, 0.2, 1e-4)
    assert y.shape == x.shape and y.dtype == dtype and y.is_contiguous()
    assert_close_rel(y, ref(x, w, b, 1e-4))
    torch_y = F.batch_norm(x.float(), rm_t, rv_t, None if w is None else w.float(), None if b is None else b.float(),
                           training=True, momentum=0.2, eps=1e-4)
    close_to_torch(y, torch_y.to(dtype))
    torch.testing.assert_close(rm, rm_t, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rv, rv_t, rtol=1e-5, atol=1e-5)
    y2 = BN(x, None, None, w, b, True, 0.2, 1e-4)  # no running stats: the same output, nothing moved
    torch.testing.assert_close(y2, y, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_eval_reads_the_running_stats_only(shape, dtype):
    shape = SHAPES[shape]
    c = shape[1]
    x = torch.randn(shape, device="cuda", dtype=dtype)
    rm, rv = torch.randn(c, device="cuda"), torch.rand(c, device="cuda") * 2 + 0.1
    rm0, rv0 = rm.clone(), rv.clone()
    w, b = affine(c, dtype, True)
    y = BN(x, rm, rv, w, b, False, 0.1, 1e-3)
    assert_close_rel(y, ref(x, w, b, 1e-3, rm, rv))
    assert torch.equal(rm, rm0) and torch.equal(rv, rv0)


def test_large_mean_is_stable():
    """float32 channels far from zero (mean 300, std 1): Chan merges of exact chunk moments."""
    x = torch.randn(16, 8, 64, 64, device="cuda") + 300.0
    y = BN(x, None, None, None, None, True)
    assert (y.double() - ref(x, None, None, 1e-5).double()).abs().max().item() < 2e-4


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_misaligned_non_contiguous_and_empty_x(dtype):
    c = 8
    w, b = affine(c, dtype, True)
    flat = torch.randn(1 + 4 * c * 48, device="cuda", dtype=dtype)[1:].view(4, c, 48)
    assert flat.data_ptr() % 16 != 0
    assert_close_rel(BN(flat, None, None, w, b, True), ref(flat, w, b, 1e-5))
    cl = torch.randn(2, c, 6, 10, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    assert_close_rel(BN(cl, None, None, w, b, True), ref(cl, w, b, 1e-5))
    rm = torch.randn(2 * c, device="cuda")[::2]  # a strided running_mean: written back through a copy
    rv = torch.rand(c, device="cuda") + 1
    rm_t, rv_t = rm.clone(), rv.clone()
    BN(cl, rm, rv, w, b, True, 0.5)
    F.batch_norm(cl.float(), rm_t, rv_t, training=True, momentum=0.5)
    torch.testing.assert_close(rm, rm_t, rtol=1e-5, atol=1e-5)
    rm0 = rm.clone()
    y = BN(torch.randn(0, c, 4, device="cuda", dtype=dtype), rm, rv, w, b, True)
    assert y.shape == (0, c, 4) and torch.equal(rm, rm0)


def test_cuda_graph_replays_training_after_a_warm_up():
    x = torch.randn(8, 64, 32, 32, device="cuda", dtype=torch.bfloat16)
    rm, rv = torch.zeros(64, device="cuda"), torch.ones(64, device="cuda")
    BN(x, rm, rv, None, None, True)  # builds the kernels outside the capture
    torch.cuda.synchronize()
    rm.zero_()
    rv.fill_(1)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = BN(x, rm, rv, None, None, True, 0.5)
    rm.zero_()
    rv.fill_(1)
    x.copy_(torch.randn_like(x))
    g.replay()
    torch.cuda.synchronize()
    assert_close_rel(y, ref(x, None, None, 1e-5))
    var, mean = torch.var_mean(x.float(), dim=[0, 2, 3], correction=1)
    torch.testing.assert_close(rm, 0.5 * mean, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(rv, 0.5 + 0.5 * var, rtol=1e-4, atol=1e-4)


# The one-launch plan (batch_norm_fwd_channel): 2-d x with 32, 16, 4 channels a CTA and a partial last
# CTA, a channel a CTA with 16-byte, 8-byte and scalar accesses.
ONE_LAUNCH = {
    "2d-wide": (48, 200),
    "2d-16": (100, 16),
    "2d-3": (7, 3),
    "2d-one-channel": (300, 1),
    "v8": (2, 40, 8, 16),
    "v4-f16": (3, 6, 12),
    "scalar": (5, 7, 3, 3),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", sorted(ONE_LAUNCH))
@pytest.mark.parametrize("running", [True, False], ids=["running", "no_running"])
@pytest.mark.parametrize("weight,bias", [(True, True), (False, False), (True, False), (False, True)],
                         ids=["wb", "plain", "w", "b"])
def test_one_launch_training_matches_torch(shape, dtype, running, weight, bias):
    shape = ONE_LAUNCH[shape]
    c = shape[1]
    torch.manual_seed(1)
    x = torch.randn(shape, device="cuda", dtype=dtype) * 1.5 - 0.75
    w = torch.randn(c, device="cuda", dtype=dtype) if weight else None
    b = torch.randn(c, device="cuda", dtype=dtype) if bias else None
    rm, rv = (torch.randn(c, device="cuda"), torch.rand(c, device="cuda") + 0.5) if running else (None, None)
    rm_t, rv_t = (rm.clone(), rv.clone()) if running else (None, None)
    y = BN(x, rm, rv, w, b, True, 0.3, 1e-5)
    assert y.shape == x.shape and y.dtype == dtype
    assert_close_rel(y, ref(x, w, b, 1e-5))
    torch_y = F.batch_norm(x.float(), rm_t, rv_t, None if w is None else w.float(), None if b is None else b.float(),
                           training=True, momentum=0.3, eps=1e-5)
    close_to_torch(y, torch_y.to(dtype))
    if running:
        torch.testing.assert_close(rm, rm_t, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(rv, rv_t, rtol=1e-5, atol=1e-5)


# Each pair: the largest channel the one-launch plan holds, and one just past it (the three-launch path).
LIMITS = [
    ((1, 8, 256, 256), (1, 8, 256, 264), torch.float16),
    ((8, 8, 64, 64), (8, 8, 64, 65), torch.float32),
    ((2, 3, 8191), (2, 3, 8193), torch.bfloat16),
    ((512, 64), (513, 64), torch.float16),
    ((1024, 16), (1025, 16), torch.bfloat16),
]


@pytest.mark.parametrize("fits,past,dtype", LIMITS, ids=[str(f) for f, _, _ in LIMITS])
def test_both_sides_of_the_one_launch_limit_match_torch(fits, past, dtype):
    outs = []
    for shape in (fits, past):
        c = shape[1]
        torch.manual_seed(2)
        x = torch.randn(shape, device="cuda", dtype=dtype) + 0.25
        w, b = affine(c, dtype, True)
        rm, rv = torch.randn(c, device="cuda"), torch.rand(c, device="cuda") + 0.5
        rm_t, rv_t = rm.clone(), rv.clone()
        y = BN(x, rm, rv, w, b, True, 0.1, 1e-5)
        assert_close_rel(y, ref(x, w, b, 1e-5))
        close_to_torch(y, F.batch_norm(x.float(), rm_t, rv_t, w.float(), b.float(), training=True, momentum=0.1,
                                       eps=1e-5).to(dtype))
        torch.testing.assert_close(rm, rm_t, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(rv, rv_t, rtol=1e-5, atol=1e-5)
        outs.append(y)
    assert outs[0].shape == fits and outs[1].shape == past


def test_one_launch_large_mean_is_stable():
    """float32 channels far from zero (mean 300, std 1) held on chip: two exact passes over the values."""
    x = torch.randn(4, 8, 64, 64, device="cuda") + 300.0
    y = BN(x, None, None, None, None, True)
    assert (y.double() - ref(x, None, None, 1e-5).double()).abs().max().item() < 2e-4


def test_cuda_graph_replays_two_d_training_after_a_warm_up():
    x = torch.randn(32, 64, device="cuda", dtype=torch.float16)
    rm, rv = torch.zeros(64, device="cuda"), torch.ones(64, device="cuda")
    BN(x, rm, rv, None, None, True)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = BN(x, rm, rv, None, None, True, 0.5)
    rm.zero_()
    rv.fill_(1)
    x.copy_(torch.randn_like(x))
    g.replay()
    torch.cuda.synchronize()
    assert_close_rel(y, ref(x, None, None, 1e-5))
    var, mean = torch.var_mean(x.float(), dim=0, correction=1)
    torch.testing.assert_close(rm, 0.5 * mean, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(rv, 0.5 + 0.5 * var, rtol=1e-4, atol=1e-4)
