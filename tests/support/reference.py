"""Shared helpers: fp32/fp64 references and tolerances."""
import torch


def rms_norm_ref(x, normalized_shape, weight=None, eps=None):
    """F.rms_norm computed in float64 from the same inputs, rounded to x's dtype."""
    dims = tuple(range(-len(normalized_shape), 0))
    xf = x.double()
    e = torch.finfo(torch.float32).eps if eps is None else eps
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=dims, keepdim=True) + e)
    if weight is not None:
        y = y * weight.double()
    return y.to(x.dtype)


TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def assert_close_rel(y, ref):
    assert y.shape == ref.shape and y.dtype == ref.dtype
    assert torch.isfinite(y).all(), "non-finite output"
    if y.numel() == 0:
        return
    err = (y.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)
    assert err < TOL[y.dtype], f"relative error {err:.3g} over {TOL[y.dtype]}"
    # Elementwise too: a few wrong elements hide in a norm.
    torch.testing.assert_close(y.float(), ref.float(), rtol=4 * TOL[y.dtype], atol=4 * TOL[y.dtype])
