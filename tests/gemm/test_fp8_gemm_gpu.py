"""GemmFp8FwdOp's tensor-core kernel on the nvrtc target (src/kernels/gemm/fp8_gemm.cuh), on a CUDA GPU:
per-128-block, per-tensor and mixed scales against a float64 sum of the scaled blocks, odd M and N, K
not a multiple of 128, both output and bias dtypes; DeepSeek-V3's block-scaled workloads against the
reference target; the shapes it leaves to ATen; CUDA graph replay."""
import pytest
import torch

import tileops
from support.fp8_oracle import fp8_blocks_float64

pytestmark = pytest.mark.gpu
tileops.load()
ops = torch.ops.tileops
E4M3 = torch.float8_e4m3fn
HALF_ULP = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}
# The MMA's own sums of a block are shorter than float32 on Hopper (scripts/debug/probe_fp8_gemm.py): a
# bound on the block's terms, far below what a wrong row, column or scale would give.
ACCUM = 2.0 ** -10


def inputs(m, n, k, mode_a, mode_b, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    blocks = (k + 127) // 128
    a = (torch.randn(m, k, generator=g, device="cuda") * 4).to(E4M3)
    b = (torch.randn(n, k, generator=g, device="cuda") * 4).to(E4M3)
    sa = torch.rand(*((1, 1) if mode_a == "tensor" else (m, blocks)), generator=g, device="cuda") + 0.5
    sb = torch.rand(*((1, 1) if mode_b == "tensor" else (n, blocks)), generator=g, device="cuda") + 0.5
    return a, b, sa, sb


def assert_close(d, a, b, sa, sb, bias):
    want = fp8_blocks_float64(a, b, sa, sb, bias)
    terms = fp8_blocks_float64(a.float().abs().to(E4M3), b.float().abs().to(E4M3), sa, sb, None)
    err = (d.double() - want).abs()
    assert (err <= HALF_ULP[d.dtype] * want.abs() + ACCUM * terms + 1e-3).all(), float((err / terms).max())


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bias_dtype", [None, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("modes", [("block", "block"), ("tensor", "tensor"), ("tensor", "block"), ("block", "tensor")])
@pytest.mark.parametrize("mnk", [(1, 7, 16), (5, 300, 272), (64, 128, 128), (65, 129, 400), (200, 1000, 1024)])
def test_kernel_matches_float64(out_dtype, bias_dtype, modes, mnk):
    m, n, k = mnk
    a, b, sa, sb = inputs(m, n, k, *modes)
    bias = None if bias_dtype is None else torch.randn(n, device="cuda", dtype=bias_dtype)
    d = ops.gemm_fp8_fwd(a, b, sa, sb, bias, out_dtype=out_dtype, target="nvrtc")
    assert d.shape == (m, n) and d.dtype == out_dtype
    assert_close(d, a, b, sa, sb, bias)


@pytest.mark.parametrize("mnk", [(128, 2112, 7168), (4096, 7168, 2048), (1, 7168, 2048)])
def test_block_workloads_against_the_reference(mnk):
    m, n, k = mnk
    a, b, sa, sb = inputs(m, n, k, "block", "block", seed=1)
    got = ops.gemm_fp8_fwd(a, b, sa, sb, None, target="nvrtc").double()
    ref = ops.gemm_fp8_fwd(a, b, sa, sb, None, target="reference").double()
    terms = fp8_blocks_float64(a.float().abs().to(E4M3), b.float().abs().to(E4M3), sa, sb, None)
    assert ((got - ref).abs() <= 2 * HALF_ULP[torch.bfloat16] * ref.abs() + ACCUM * terms + 1e-3).all()


def test_shapes_left_to_aten():
    a, b, sa, sb = inputs(3, 40, 100, "block", "block", seed=2)  # K % 16 != 0
    assert_close(ops.gemm_fp8_fwd(a, b, sa, sb, None, target="nvrtc"), a, b, sa, sb, None)


def test_cuda_graph_replay():
    a, b, sa, sb = inputs(96, 384, 640, "block", "block", seed=3)
    ops.gemm_fp8_fwd(a, b, sa, sb, None, target="nvrtc")  # builds the kernel
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        d = ops.gemm_fp8_fwd(a, b, sa, sb, None, target="nvrtc")
    for dst, src in zip((a, b, sa, sb), inputs(96, 384, 640, "block", "block", seed=4)):
        dst.copy_(src)
    g.replay()
    torch.cuda.synchronize()
    assert_close(d, a, b, sa, sb, None)


def test_per_tensor_scales_are_declined_to_cublaslt():
    # per-tensor on both operands: cuBLASLt's answer, target="nvrtc" included (the kernel is 0.10-0.29x
    # of it there, docs/PERF.md)
    a, b, sa, sb = inputs(200, 1000, 1024, "tensor", "tensor", seed=2)
    want = ops.gemm_fp8_fwd(a, b, sa, sb, None, target="cublaslt")
    assert torch.equal(ops.gemm_fp8_fwd(a, b, sa, sb, None, target="nvrtc"), want)
    assert torch.equal(ops.gemm_fp8_fwd(a, b, sa, sb, None), want)  # the default, nvrtc, declines too


def test_block_scales_run_on_the_nvrtc_kernel_by_default():
    a, b, sa, sb = inputs(200, 1000, 1024, "block", "block", seed=3)
    assert torch.equal(ops.gemm_fp8_fwd(a, b, sa, sb, None), ops.gemm_fp8_fwd(a, b, sa, sb, None, target="nvrtc"))
    assert not torch.equal(ops.gemm_fp8_fwd(a, b, sa, sb, None), ops.gemm_fp8_fwd(a, b, sa, sb, None, target="reference"))
