"""GemmFp8FwdOp (manifests/gemm.yaml) on CPU: per-tensor, per-block and mixed scales, bias and both
output dtypes against a float64 sum of 128-wide block products written here; refusals."""
import pytest
import torch

import tileops
from tileops.gemm import GemmFp8FwdOp

tileops.load()
ops = torch.ops.tileops
E4M3 = torch.float8_e4m3fn


def fp8(*shape):
    return (torch.randn(*shape) * 4).to(E4M3)


def float64_blocks(a, b, scale_a, scale_b, bias):
    """sum over 128-wide blocks of K of (a_blk @ b_blk.T) * scale_a[:, blk] * scale_b[:, blk] (+ bias)."""
    m, k = a.shape
    n = b.shape[0]
    blocks = (k + 127) // 128
    sa = scale_a.double().expand(m, blocks)
    sb = scale_b.double().expand(n, blocks)
    d = torch.zeros(m, n, dtype=torch.float64)
    for i in range(blocks):
        sl = slice(128 * i, 128 * (i + 1))
        d += (a.double()[:, sl] @ b.double()[:, sl].T) * sa[:, i:i + 1] * sb[:, i][None]
    return d if bias is None else d + bias.double()


@pytest.mark.parametrize("mode", ["tensor", "block", "mixed"])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("mnk", [(1, 16, 2048), (5, 7, 300), (17, 33, 128), (3, 4, 1)])
@pytest.mark.parametrize("with_bias", [False, True])
def test_matches_a_float64_sum_of_block_products(mode, out_dtype, mnk, with_bias):
    m, n, k = mnk
    blocks = (k + 127) // 128
    a, b = fp8(m, k), fp8(n, k)
    scale_a = torch.rand(1, 1) + 0.5 if mode == "tensor" else torch.rand(m, blocks) + 0.5
    scale_b = torch.rand(1, 1) + 0.5 if mode != "block" else torch.rand(n, blocks) + 0.5
    bias = torch.randn(n, dtype=out_dtype) if with_bias else None
    d = ops.gemm_fp8_fwd(a, b, scale_a, scale_b, bias, out_dtype=out_dtype)
    assert d.shape == (m, n) and d.dtype == out_dtype
    want = float64_blocks(a, b, scale_a, scale_b, bias)
    eps = 2.0 ** -8 if out_dtype == torch.bfloat16 else 2.0 ** -11  # one rounding to the output
    scale = float64_blocks(a.float().abs().to(E4M3), b.float().abs().to(E4M3), scale_a, scale_b, None)
    assert ((d.double() - want).abs() <= eps * want.abs() + 1e-5 * scale + 1e-6).all()


def test_op_class_and_empty_k():
    a, b = fp8(3, 0), fp8(4, 0)
    d = GemmFp8FwdOp()(a, b, torch.ones(1, 1), torch.ones(4, 0), torch.ones(4, dtype=torch.bfloat16))
    assert torch.equal(d, torch.ones(3, 4, dtype=torch.bfloat16))  # no products: the bias alone


def test_meta_gives_the_shape_and_the_dtype_of_the_param():
    a, b = torch.empty(8, 256, dtype=E4M3, device="meta"), torch.empty(6, 256, dtype=E4M3, device="meta")
    s = torch.empty(1, 1, device="meta")
    d = ops.gemm_fp8_fwd(a, b, s, s, None, out_dtype=torch.float16)
    assert d.shape == (8, 6) and d.dtype == torch.float16 and d.is_meta


@pytest.mark.parametrize("args,match", [
    ((fp8(5, 256), fp8(7, 256), torch.ones(5, 1), torch.ones(1, 1), None),
     r"break the rule 'sa0 \* sa1 == 1 or sa1 == \(K \+ 127\) // 128'; got K=256, sa0=5, sa1=1"),
    ((fp8(5, 256), fp8(7, 256), torch.ones(4, 2), torch.ones(1, 1), None),
     r"break the rule 'sa0 \* sa1 == 1 or sa0 == M'; got M=5, sa0=4, sa1=2"),
    ((fp8(5, 256), fp8(7, 256), torch.ones(1, 1), torch.ones(7, 3), None), r"sb1 == \(K \+ 127\) // 128"),
    ((fp8(5, 256), fp8(7, 255), torch.ones(1, 1), torch.ones(1, 1), None), r"'b' must have shape \[N, K\]"),
    ((torch.randn(5, 16), torch.randn(7, 16), torch.ones(1, 1), torch.ones(1, 1), None), r"'a' must have dtype float8_e4m3fn"),
    ((fp8(5, 16), fp8(7, 16), torch.ones(1, 1, dtype=torch.float16), torch.ones(1, 1), None),
     r"'scale_a' must have dtype float32"),
    ((fp8(5, 16), fp8(7, 16), torch.ones(1, 1), torch.ones(1, 1), torch.ones(6, dtype=torch.bfloat16)),
     r"'bias' must have shape \[N\]"),
])
def test_bad_inputs_are_refused_naming_the_op_and_the_rule(args, match):
    with pytest.raises((RuntimeError, ValueError, TypeError), match=rf"tileops::gemm_fp8_fwd: .*{match}"):
        ops.gemm_fp8_fwd(*args)


def test_out_dtype_outside_its_choices_is_refused():
    with pytest.raises((RuntimeError, ValueError), match=r"tileops::gemm_fp8_fwd: .*out_dtype"):
        ops.gemm_fp8_fwd(fp8(2, 16), fp8(3, 16), torch.ones(1, 1), torch.ones(1, 1), None, out_dtype=torch.float32)


def test_one_node_under_compile():
    f = torch.compile(lambda a, b, sa, sb: ops.gemm_fp8_fwd(a, b, sa, sb, None), fullgraph=True)
    a, b = fp8(4, 160), fp8(6, 160)
    sa, sb = torch.rand(4, 2) + 0.5, torch.rand(6, 2) + 0.5
    torch.testing.assert_close(f(a, b, sa, sb), ops.gemm_fp8_fwd(a, b, sa, sb, None), rtol=0, atol=0)
