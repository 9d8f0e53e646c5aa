"""BmmFp8FwdOp (manifests/gemm.yaml) on CPU against a float64 sum written here, both layouts of b, and
its refusals."""
import pytest
import torch

import tileops

tileops.load()
ops = torch.ops.tileops


def fp8(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * 4).to(torch.float8_e4m3fn)


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bmnk", [(3, 5, 7, 48), (1, 1, 16, 33), (2, 17, 4, 1), (2, 3, 4, 0)])
def test_bmm_fp8_matches_float64(trans_b, out_dtype, bmnk):
    bs, m, n, k = bmnk
    a = fp8(bs, m, k, seed=0)
    b = fp8(bs, n, k, seed=1) if trans_b else fp8(bs, k, n, seed=1)
    sa, sb = torch.tensor(0.75), torch.tensor(1.5)
    d = ops.gemm_bmm_fp8_fwd(a, b, sa, sb, out_dtype=out_dtype, trans_b=trans_b)
    assert d.shape == (bs, m, n) and d.dtype == out_dtype
    b64 = b.double().transpose(1, 2) if trans_b else b.double()
    want = (a.double() @ b64) * 0.75 * 1.5
    # float32 sums of exact fp8 products, one rounding: within the output's half-ulp and the sum's rounding
    eps = 2.0 ** -8 if out_dtype == torch.bfloat16 else 2.0 ** -11
    terms = (a.double().abs() @ b64.abs()) * 0.75 * 1.5
    assert ((d.double() - want).abs() <= eps * want.abs() + 1e-6 * terms + 1e-6).all()


def test_bmm_fp8_refuses_a_scale_that_is_not_0_dim():
    with pytest.raises(RuntimeError, match=r"tileops::gemm_bmm_fp8_fwd: 'scale_a' must have shape \[\]"):
        ops.gemm_bmm_fp8_fwd(fp8(2, 3, 32, seed=0), fp8(2, 32, 4, seed=1), torch.ones(1), torch.tensor(1.0))


def test_bmm_fp8_refuses_ks_that_differ_naming_the_flag():
    with pytest.raises(ValueError, match=r"tileops::gemm_bmm_fp8_fwd: .*select\(trans_b, b2, b1\) == K.*trans_b"):
        ops.gemm_bmm_fp8_fwd(fp8(2, 3, 32, seed=0), fp8(2, 32, 4, seed=1), torch.tensor(1.0), torch.tensor(1.0),
                             trans_b=True)


def test_bmm_fp8_refuses_16_bit_operands():
    with pytest.raises(TypeError, match=r"tileops::gemm_bmm_fp8_fwd: .a. must have dtype float8_e4m3fn, got float16"):
        ops.gemm_bmm_fp8_fwd(torch.randn(2, 3, 32).half(), torch.randn(2, 32, 4).half(), torch.tensor(1.0),
                             torch.tensor(1.0))
