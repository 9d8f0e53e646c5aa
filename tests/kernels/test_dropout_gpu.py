"""DropoutFwdOp / DropoutBwdOp on the GPU (nvrtc target) against the reference target and the numpy
formula (tests/support/philox.py), bit for bit: every dtype and access width, sizes around the
four-element groups and the tail, misaligned input, p = 0 / 1 / training=False, NaN and infinities,
the drop rate, out=, the backward and the autograd pairing, more than 2^31 elements, CUDA graph
replay. Skipped without a GPU (conftest)."""
import math

import numpy as np
import pytest
import torch

import tileops
from support.philox import dropout, dropout_factor

pytestmark = pytest.mark.gpu
OP = torch.ops.tileops.regularization_dropout_fwd
OUT = torch.ops.tileops.regularization_dropout_fwd_out
BWD = torch.ops.tileops.regularization_dropout_bwd
DTYPES = [torch.float16, torch.bfloat16, torch.float32]


def bits_equal(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(torch.signbit(a[~a.isnan()]), torch.signbit(b[~b.isnan()]))


def check(x, p, seed, training=True):
    y = OP(x, p=p, seed=seed, training=training)
    bits_equal(y, OP(x, p=p, seed=seed, training=training, target="reference"))
    bits_equal(y.cpu(), dropout(x.cpu(), p, seed, training))
    return y


def sample(shape, dtype):
    return (torch.randn(shape, device="cuda") * 3).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 1000, 4099, 65536 + 13, 1 << 20])
def test_sizes_around_groups_and_tails(n, dtype):
    torch.manual_seed(n)
    check(sample((n,), dtype), 0.5, n)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("offset", [1, 2, 3, 4])
def test_misaligned_input_and_output_take_narrower_accesses(offset, dtype):
    torch.manual_seed(offset)
    flat = sample((offset + 8 * 1000 + 3,), dtype)
    x = flat[offset:]
    check(x, 0.3, 17)
    out = torch.empty(x.numel() + offset, device="cuda", dtype=dtype)[offset:]
    OUT(x, out, p=0.3, seed=17)
    bits_equal(out.cpu(), dropout(x.cpu(), 0.3, 17))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("p,seed", [(0.1, 0), (0.5, -1), (0.9, 2 ** 40 + 7), (0.0, 3), (1.0, 3)])
def test_workload_shapes_and_p(p, seed, dtype):
    torch.manual_seed(seed & 0xFFFF)
    check(sample((1024, 4096), dtype), p, seed)
    check(sample((64, 10240), dtype), p, seed, training=False)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_infinity_signed_zero_and_strides(dtype):
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), -2.0, -0.0, 1e-3] * 700, device="cuda").to(dtype)
    y = check(x, 0.5, 11)
    f = dropout_factor(x.numel(), 0.5, 11).cuda()
    assert y[(f == 0) & x.isinf()].isnan().all()
    check(sample((96, 40), dtype).t(), 0.4, 5)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_each_element_is_dropped_with_probability_p(p):
    n = 1 << 24
    y = OP(torch.ones(n, device="cuda", dtype=torch.bfloat16), p=p, seed=2024)
    dropped = (y == 0).sum().item()
    assert abs(dropped - p * n) < 6 * math.sqrt(n * p * (1 - p))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_backward_and_the_autograd_pairing(dtype):
    torch.manual_seed(7)
    g = sample((512, 300), dtype)
    bits_equal(BWD(g, p=0.3, seed=21), OP(g, p=0.3, seed=21))
    bits_equal(BWD(g, p=0.3, seed=21), BWD(g, p=0.3, seed=21, target="reference"))
    prev = tileops.enable_autograd(True)
    try:
        x = sample((512, 300), dtype).requires_grad_(True)
        y = OP(x, p=0.3, seed=21)
        y.backward(g)
        bits_equal(x.grad, OP(g, p=0.3, seed=21))
    finally:
        tileops.enable_autograd(prev)


def test_more_than_2_pow_31_elements():
    n = (1 << 31) + 4 * 1024 + 3
    x = torch.ones(n, device="cuda", dtype=torch.bfloat16)
    y = OP(x, p=0.5, seed=99)
    idx = np.concatenate([np.arange(4096), np.arange((1 << 31) - 64, n)])
    want = dropout_factor(0, 0.5, 99, index=idx).to(torch.bfloat16)
    assert torch.equal(y[torch.from_numpy(idx).cuda()].cpu(), want)
    del x, y


def test_cuda_graph_replay_keeps_the_captured_seed():
    torch.manual_seed(4)
    x = sample((1024, 4096), torch.bfloat16)
    OP(x, p=0.2, seed=5)  # warm-up: builds the kernel
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = OP(x, p=0.2, seed=5)
    x.copy_(sample((1024, 4096), torch.bfloat16))
    g.replay()
    torch.cuda.synchronize()
    bits_equal(y.cpu(), dropout(x.cpu(), 0.2, 5))
