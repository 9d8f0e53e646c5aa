"""GemmFwdOp (manifests/gemm.yaml) on CPU: the four layouts of trans_a / trans_b against a float64
product written here, odd sizes, strided operands, refusals. (Its CUDA calls:
tests/gemm/test_gemm_gpu.py.)"""
import itertools

import pytest
import torch

import tileops
from tileops.gemm import GemmFwdOp

tileops.load()
ops = torch.ops.tileops
TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}


def operands(m, n, k, trans_a, trans_b, dtype, device="cpu"):
    a = torch.randn(*((k, m) if trans_a else (m, k)), dtype=dtype, device=device)
    b = torch.randn(*((n, k) if trans_b else (k, n)), dtype=dtype, device=device)
    return a, b


def float64_gemm(a, b, trans_a, trans_b):
    a64 = a.double().t() if trans_a else a.double()
    b64 = b.double().t() if trans_b else b.double()
    terms = a64[:, :, None] * b64[None, :, :]  # [M, K, N]
    return terms.sum(dim=1), terms.abs().sum(dim=1)


@pytest.mark.parametrize("trans_a,trans_b", list(itertools.product([False, True], repeat=2)))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("mnk", [(5, 6, 8), (1, 33, 129), (17, 1, 7), (8, 8, 1)])
def test_each_layout_matches_a_float64_product(trans_a, trans_b, dtype, mnk):
    m, n, k = mnk
    a, b = operands(m, n, k, trans_a, trans_b, dtype)
    d = ops.gemm_fwd(a, b, trans_a=trans_a, trans_b=trans_b)
    assert d.shape == (m, n) and d.dtype == dtype
    want, scale = float64_gemm(a, b, trans_a, trans_b)
    assert ((d.double() - want).abs() <= TOL[dtype] * scale + 1e-6).all()


def test_default_layout_is_a_linear_layer():
    x, w = torch.randn(4, 16), torch.randn(8, 16)  # weight [out_features, in_features]
    torch.testing.assert_close(GemmFwdOp()(x, w), torch.nn.functional.linear(x, w), rtol=1e-6, atol=1e-6)


def test_empty_k_gives_zeros_and_meta_gives_the_shape():
    assert torch.equal(ops.gemm_fwd(torch.randn(3, 0), torch.randn(4, 0)), torch.zeros(3, 4))
    for ta, tb in itertools.product([False, True], repeat=2):
        a, b = operands(3, 4, 5, ta, tb, torch.float32, "meta")
        assert ops.gemm_fwd(a, b, trans_a=ta, trans_b=tb).shape == (3, 4)


def test_strided_operands_equal_contiguous_ones():
    a = torch.randn(16, 10)[:, ::2]  # [16, 5], every other column
    b = torch.randn(5, 7).t()        # [7, 5], a transposed view
    assert torch.equal(ops.gemm_fwd(a, b), ops.gemm_fwd(a.contiguous(), b.contiguous()))


@pytest.mark.parametrize("a,b,kw,match", [
    (torch.randn(5, 8), torch.randn(6, 8), dict(trans_b=False),
     r"shape rule 'select\(trans_a, a0, a1\) == select\(trans_b, b1, b0\)' is violated \(left side 8, right side 6\) "
     r"with trans_a=False, trans_b=False"),
    (torch.randn(5, 8), torch.randn(8, 6), dict(), r"left side 8, right side 6\) with trans_a=False, trans_b=True"),
    (torch.randn(2, 5, 8), torch.randn(6, 8), dict(), r"'a' must have shape \[a0, a1\]"),
    (torch.randn(5, 8), torch.randn(6, 8, dtype=torch.float16), dict(), r"'b' must have the dtype of 'a'"),
])
def test_bad_inputs_are_refused_naming_the_op_and_the_rule(a, b, kw, match):
    with pytest.raises((RuntimeError, ValueError, TypeError), match=rf"tileops::gemm_fwd: .*{match}"):
        ops.gemm_fwd(a, b, **kw)


def test_one_node_under_compile_whatever_the_flags():
    f = torch.compile(lambda a, b: ops.gemm_fwd(a, b, trans_a=True, trans_b=False), fullgraph=True)
    a, b = torch.randn(8, 5), torch.randn(8, 6)
    torch.testing.assert_close(f(a, b), a.t() @ b, rtol=1e-5, atol=1e-5)



def test_the_cublaslt_target_refuses_cpu_tensors_by_name():
    with pytest.raises(RuntimeError, match=r"tileops::gemm_fwd: target 'cublaslt' serves CUDA tensors only, got cpu"):
        ops.gemm_fwd(torch.randn(4, 8), torch.randn(3, 8), target="cublaslt")
