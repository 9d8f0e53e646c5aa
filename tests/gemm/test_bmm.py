"""BmmFwdOp (manifests/gemm.yaml) on CPU: against a float64 product written here, odd sizes, strided
inputs, refusals. (Its CUDA calls: tests/gemm/test_gemm_gpu.py.)"""
import pytest
import torch

import tileops
from tileops.gemm import BmmFwdOp

tileops.load()
ops = torch.ops.tileops
TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}


def float64_bmm(a, b):
    a64, b64 = a.double(), b.double()
    return (a64[:, :, :, None] * b64[:, None, :, :]).sum(dim=2)  # sum over k of a[i, m, k] b[i, k, n]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bmnk", [(3, 5, 7, 9), (1, 1, 8, 128), (2, 17, 1, 129), (4, 8, 8, 1)])
def test_matches_a_float64_product(dtype, bmnk):
    b_, m, n, k = bmnk
    a, b = torch.randn(b_, m, k, dtype=dtype), torch.randn(b_, k, n, dtype=dtype)
    d = ops.gemm_bmm_fwd(a, b)
    assert d.shape == (b_, m, n) and d.dtype == dtype
    want = float64_bmm(a, b)
    # one rounding of a float32 accumulation: relative to the size of the terms
    scale = (a.double().abs()[:, :, :, None] * b.double().abs()[:, None, :, :]).sum(dim=2)
    assert ((d.double() - want).abs() <= TOL[dtype] * scale + 1e-6).all()


def test_empty_k_gives_zeros_and_empty_batch_an_empty_output():
    d = ops.gemm_bmm_fwd(torch.randn(2, 3, 0), torch.randn(2, 0, 4))
    assert torch.equal(d, torch.zeros(2, 3, 4))
    assert ops.gemm_bmm_fwd(torch.randn(0, 3, 5), torch.randn(0, 5, 4)).shape == (0, 3, 4)


def test_strided_inputs_equal_contiguous_ones():
    a = torch.randn(3, 9, 5).transpose(1, 2)  # [3, 5, 9], column-major
    b = torch.randn(3, 9, 8)[:, :, ::2]  # [3, 9, 4], every other column
    assert torch.equal(ops.gemm_bmm_fwd(a, b), ops.gemm_bmm_fwd(a.contiguous(), b.contiguous()))
    assert torch.equal(BmmFwdOp()(a, b), torch.bmm(a.contiguous(), b.contiguous()))


@pytest.mark.parametrize("a,b,match", [
    (torch.randn(2, 3, 4), torch.randn(2, 5, 6), r"'b' must have shape \[B, K, N\] \(B=2\) \(K=4\), got \[2, 5, 6\]"),
    (torch.randn(2, 3, 4), torch.randn(3, 4, 6), r"'b' must have shape \[B, K, N\] \(B=2\).*got \[3, 4, 6\]"),
    (torch.randn(3, 4), torch.randn(4, 6), r"'a' must have shape \[B, M, K\]"),
    (torch.randn(2, 3, 4), torch.randn(2, 4, 6, dtype=torch.bfloat16), r"'b' must have the dtype of 'a'"),
    (torch.randn(2, 3, 4, dtype=torch.float64), torch.randn(2, 4, 6, dtype=torch.float64),
     r"'a' must have dtype float16 \| bfloat16 \| float32"),
])
def test_bad_inputs_are_refused_naming_the_op_and_argument(a, b, match):
    with pytest.raises((RuntimeError, TypeError), match=rf"tileops::gemm_bmm_fwd: .*{match}"):
        ops.gemm_bmm_fwd(a, b)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_on_cuda_the_reference_target_is_torch_bmm(dtype):
    a = torch.randn(4, 33, 129, device="cuda", dtype=dtype)
    b = torch.randn(4, 129, 65, device="cuda", dtype=dtype)
    assert torch.equal(ops.gemm_bmm_fwd(a, b, target="reference"), torch.bmm(a, b))  # the same ATen call
    with pytest.raises(RuntimeError, match=r"target 'nvrtc' has no kernel for this op"):
        ops.gemm_bmm_fwd(a, b, target="nvrtc")
    g = torch.cuda.CUDAGraph()  # replays under a CUDA graph like any op
    d = torch.empty(4, 33, 65, device="cuda", dtype=dtype)
    ops.gemm_bmm_fwd(a, b, target="reference")
    with torch.cuda.graph(g):
        d.copy_(ops.gemm_bmm_fwd(a, b, target="reference"))
    a.mul_(2)
    g.replay()
    assert torch.equal(d, torch.bmm(a, b))
