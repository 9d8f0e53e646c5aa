"""GemmFwdOp and BmmFwdOp on a CUDA GPU, through every target that serves them there (the default,
the reference, cuBLASLt): the four layouts and odd sizes against a float64 product, the decode sizes
of the manifest, operands at odd offsets, capture into a CUDA graph after one warm call."""
import itertools

import pytest
import torch

import tileops

pytestmark = pytest.mark.gpu
tileops.load()
ops = torch.ops.tileops
TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 2e-3}
TARGETS = [None, "reference"] + [t for t in ("cublaslt",) if t in tileops.target_names()]


def close_to_float64(d, a64, b64):
    want = a64 @ b64
    scale = a64.abs() @ b64.abs()  # one rounding of a float32 sum: relative to the size of the terms
    err = (d.double() - want).abs()
    assert (err <= TOL[d.dtype] * scale + 1e-6).all(), float((err / (scale + 1e-6)).max())


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("trans_a,trans_b", list(itertools.product([False, True], repeat=2)))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("mnk", [(1, 8, 64), (5, 33, 129), (64, 7168 // 8, 2048 // 4), (129, 1, 7), (8, 8, 1)])
def test_gemm_each_layout_matches_float64(target, trans_a, trans_b, dtype, mnk):
    m, n, k = mnk
    a = torch.randn(*((k, m) if trans_a else (m, k)), dtype=dtype, device="cuda")
    b = torch.randn(*((n, k) if trans_b else (k, n)), dtype=dtype, device="cuda")
    d = ops.gemm_fwd(a, b, trans_a=trans_a, trans_b=trans_b, target=target)
    assert d.shape == (m, n) and d.dtype == dtype and d.is_cuda
    a64 = a.double().t() if trans_a else a.double()
    b64 = b.double().t() if trans_b else b.double()
    close_to_float64(d, a64, b64)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bmnk", [(3, 5, 7, 9), (1, 1, 8, 128), (64, 1, 128, 2048 // 8), (4, 8, 8, 1)])
def test_bmm_matches_float64(target, dtype, bmnk):
    bs, m, n, k = bmnk
    a = torch.randn(bs, m, k, dtype=dtype, device="cuda")
    b = torch.randn(bs, k, n, dtype=dtype, device="cuda")
    d = ops.gemm_bmm_fwd(a, b, target=target)
    assert d.shape == (bs, m, n)
    close_to_float64(d, a.double(), b.double())


@pytest.mark.parametrize("target", TARGETS)
def test_empty_k_and_offset_operands(target):
    z = ops.gemm_fwd(torch.randn(3, 0, device="cuda"), torch.randn(4, 0, device="cuda"), target=target)
    assert torch.equal(z, torch.zeros(3, 4, device="cuda"))
    # operands at odd offsets of their storage (2-byte alignment): the plan may not assume 16 bytes
    big = torch.randn(8 + 24 * 16 + 40 * 16, dtype=torch.float16, device="cuda")
    a, b = big[1:1 + 24 * 16].view(24, 16), big[3 + 24 * 16:3 + 24 * 16 + 40 * 16].view(40, 16)
    close_to_float64(ops.gemm_fwd(a, b, target=target), a.double(), b.double().t())


@pytest.mark.parametrize("target", TARGETS)
def test_a_cuda_graph_replays_a_warmed_gemm(target):
    a = torch.randn(16, 256, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(512, 256, dtype=torch.bfloat16, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        ops.gemm_fwd(a, b, target=target)  # warm: the kernel (and its plan) exist before capture
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        d = ops.gemm_fwd(a, b, target=target)
    a.copy_(torch.randn_like(a))
    g.replay()
    torch.cuda.synchronize()
    close_to_float64(d, a.double(), b.double().t())
