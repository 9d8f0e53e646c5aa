"""GemmW4A16FwdOp's decode kernel on the nvrtc target (src/kernels/gemm/w4a16_fwd.cuh), on a CUDA GPU:
against a float64 product of the op's 16-bit weights for every row tile, odd N and K, groups of 32 to
256, both dtypes; equal shapes of the manifest's decode workloads against the reference target; the
shapes the kernel declines (cuBLASLt after a dequantising pass, whose rounding is checked bit for bit);
CUDA graph capture after a warm call."""
import pytest
import torch

import tileops

pytestmark = pytest.mark.gpu
tileops.load()
ops = torch.ops.tileops
HALF_ULP = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}


def inputs(m, n, k, group, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    groups = k // group
    q = torch.randint(0, 16, (n, k), generator=g, device="cuda", dtype=torch.uint8)
    packed = (q[:, 0::2] | (q[:, 1::2] << 4)).contiguous()
    zero = torch.randint(0, 16, (n, groups), generator=g, device="cuda", dtype=torch.uint8)
    scale = torch.rand(n, groups, generator=g, device="cuda") * 0.1 + 0.01
    x = torch.randn(m, k, generator=g, device="cuda").to(dtype)
    return x, q, packed, scale, zero


def float64_product(x, q, scale, zero, group, dtype):
    """The op's weights (scale rounded to dtype, (q - zero) times it rounded once), then float64 sums."""
    per_k = lambda t: t.repeat_interleave(group, 1)  # noqa: E731
    w = ((q.float() - per_k(zero).float()) * per_k(scale.to(dtype).float())).to(dtype).double()
    return x.double() @ w.T, x.double().abs() @ w.abs().T


def assert_one_rounding(out, want, terms, dtype):
    # float32 sums in any order (the MMA's and the warps'), then one rounding into dtype
    err = (out.double() - want).abs()
    assert (err <= HALF_ULP[dtype] * want.abs() + 1e-5 * terms + 1e-6).all(), float(err.max())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("m", [1, 3, 8, 9, 16, 17, 33, 64])
@pytest.mark.parametrize("n,k,group", [(16, 128, 128), (40, 96, 32), (7, 4096, 128), (300, 1024, 256),
                                       (129, 160, 32), (1024, 640, 64)])
def test_kernel_matches_float64(dtype, m, n, k, group):
    x, q, packed, scale, zero = inputs(m, n, k, group, dtype)
    out = ops.gemm_w4_a16_fwd(x, packed, scale, zero, group_size=group)
    assert out.shape == (m, n) and out.dtype == dtype
    assert_one_rounding(out, *float64_product(x, q, scale, zero, group, dtype), dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("m,n,k", [(1, 8192, 8192), (1, 8192, 16384), (1, 7168, 20480), (4, 8192, 81920)])
def test_decode_workloads_against_the_reference(dtype, m, n, k):
    x, q, packed, scale, zero = inputs(m, n, k, 128, dtype, seed=1)
    got = ops.gemm_w4_a16_fwd(x, packed, scale, zero)
    ref = ops.gemm_w4_a16_fwd(x, packed, scale, zero, target="reference")
    terms = x.double().abs().sum(1, keepdim=True) * 1.6  # |w| <= 15 * 0.11
    err = (got.double() - ref.double()).abs()
    assert (err <= 2 * HALF_ULP[dtype] * ref.double().abs() + 1e-5 * terms).all(), float(err.max())


@pytest.mark.parametrize("m,k,group", [(65, 256, 128), (2, 200, 40), (2, 256, 16), (3, 0, 128)])
def test_shapes_the_kernel_declines(m, k, group):
    x, q, packed, scale, zero = inputs(m, 24, k, group, torch.float16)
    out = ops.gemm_w4_a16_fwd(x, packed, scale, zero, group_size=group)
    assert_one_rounding(out, *float64_product(x, q, scale, zero, group, torch.float16), torch.float16)


def test_unaligned_activation_view():
    x, q, packed, scale, zero = inputs(2, 64, 256, 128, torch.bfloat16)
    buf = torch.empty(2 * 256 + 1, device="cuda", dtype=torch.bfloat16)
    xv = buf[1:].view(2, 256)
    xv.copy_(x)
    out = ops.gemm_w4_a16_fwd(xv, packed, scale, zero)
    assert_one_rounding(out, *float64_product(x, q, scale, zero, 128, torch.bfloat16), torch.bfloat16)


def test_cuda_graph_replay():
    x, q, packed, scale, zero = inputs(1, 512, 1024, 128, torch.float16)
    ops.gemm_w4_a16_fwd(x, packed, scale, zero)  # builds the kernel
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = ops.gemm_w4_a16_fwd(x, packed, scale, zero)
    x2, q2, packed2, scale2, zero2 = inputs(1, 512, 1024, 128, torch.float16, seed=5)
    for dst, src in ((x, x2), (packed, packed2), (scale, scale2), (zero, zero2)):
        dst.copy_(src)
    g.replay()
    torch.cuda.synchronize()
    assert_one_rounding(out, *float64_product(x2, q2, scale2, zero2, 128, torch.float16), torch.float16)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("m,n,k,group", [(65, 40, 96, 32), (200, 300, 1024, 128), (1024, 1024, 640, 64),
                                         (3, 16, 128, 128), (5, 8, 0, 32),
                                         (66, 24, 204, 12), (70, 24, 256, 4)])  # ATen dequantises these
def test_cublaslt_dequantises_then_one_gemm(dtype, m, n, k, group):
    # target="cublaslt": the weight rounded as the op defines (the NVRTC dequantising kernel where K and
    # group_size are multiples of 8), then cuBLASLt's float32 sums, any M
    x, q, packed, scale, zero = inputs(m, n, k, group, dtype, seed=4)
    out = ops.gemm_w4_a16_fwd(x, packed, scale, zero, group_size=group, target="cublaslt")
    want, terms = float64_product(x, q, scale, zero, group, dtype)
    assert out.shape == (m, n) and out.dtype == dtype
    assert_one_rounding(out, want, terms, dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cublaslt_dequantising_kernel_rounds_as_the_reference(dtype):
    # K = 8: each output is one product, so the GEMM adds nothing and the rounding of w shows as is; an
    # unaligned packed weight view takes the ATen path, same answer
    x = torch.eye(8, device="cuda", dtype=dtype)
    _, q, packed, scale, zero = inputs(8, 300, 8, 8, dtype, seed=6)
    zero[::3] = 200  # zero points beyond 15: |q - zero| up to 200 is exact in both dtypes
    want = ops.gemm_w4_a16_fwd(x, packed, scale, zero, group_size=8, target="reference")
    assert torch.equal(ops.gemm_w4_a16_fwd(x, packed, scale, zero, group_size=8, target="cublaslt"), want)
    buf = torch.empty(packed.numel() + 1, device="cuda", dtype=torch.uint8)
    pv = buf[1:].view_as(packed)
    pv.copy_(packed)
    assert torch.equal(ops.gemm_w4_a16_fwd(x, pv, scale, zero, group_size=8, target="cublaslt"), want)


def test_prefill_rows_run_on_cublaslt_by_default():
    x, q, packed, scale, zero = inputs(200, 256, 512, 128, torch.float16, seed=7)
    got = ops.gemm_w4_a16_fwd(x, packed, scale, zero)
    assert torch.equal(got, ops.gemm_w4_a16_fwd(x, packed, scale, zero, target="cublaslt"))
    assert_one_rounding(got, *float64_product(x, q, scale, zero, 128, torch.float16), torch.float16)
