"""src/kernels/elementwise/elementwise.cuh's for16 forms (expm1, softplus for results rounded to
float16 or bfloat16) compiled as host C++, every 16-bit input against the exact value (torch in
float64). __expf and __logf stand in as exp2 / log2 of the scaled argument (support/host_kernel.py),
so this bounds the forms' own error (series truncation and roundings: 2^-16), not the hardware
functions' (CUDA's bounds, elementwise.cuh); a rounded result may differ from the exact value's
rounding only where it lies that close to a boundary. The GPU kernels against torch on CUDA:
test_elementwise_gpu.py. Needs a host C++ compiler (skipped without one)."""
import ctypes

import pytest
import torch
import torch.nn.functional as F

from support import host_kernel

DRIVER = host_kernel.ELEMENTWISE_WORDS + r"""
#include "elementwise/elementwise.cuh"
namespace ew = tileops::ew;
extern "C" void run(int which, const float* x, float beta, float threshold, float* out, long long n) {
  for (long long i = 0; i < n; ++i)
    out[i] = which == 0 ? ew::for16::expm1(x[i]) : ew::for16::softplus(x[i], beta, threshold);
}
"""
SOFTPLUS = [(1.0, 20.0), (2.0, 20.0), (0.5, 5.0), (-1.0, 20.0)]  # (beta, threshold)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    lib = host_kernel.build(tmp_path_factory, "for16_host", DRIVER,
                            {"common/dtypes.cuh": host_kernel.ELEMENTWISE_DTYPES},
                            flags=("-ffp-contract=off",))
    lib.run.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_float, ctypes.c_float, ctypes.c_void_p,
                        ctypes.c_longlong]
    return lib


def every_value(dtype):
    """Every 16-bit pattern of dtype, as float32 (NaNs and infinities included)."""
    return torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype).float().contiguous()


def run(kernel, which, x, beta=1.0, threshold=20.0):
    out = torch.empty_like(x)
    kernel.run(which, x.data_ptr(), beta, threshold, out.data_ptr(), x.numel())
    return out


def check(got, want_exact, dtype):
    """got rounded to dtype equals the exact value rounded, but for values within 2^-16 (relative) of a
    rounding boundary, where one ulp apart is allowed."""
    g, w = got.to(dtype), want_exact.to(torch.float64).to(dtype)
    same = (g.float() == w.float()) | (g.isnan() & w.isnan())
    assert torch.equal(torch.signbit(g[w == 0]), torch.signbit(w[w == 0])), "sign of zero"
    bad = ~same
    if bad.any():
        # the exact value's distance to the midpoint between the two candidates, relative to it
        mid = (g[bad].double() + w[bad].double()) / 2
        near = (want_exact[bad] - mid).abs() <= 2.0 ** -16 * want_exact[bad].abs()
        far = bad.nonzero().flatten()[~near][:5].tolist()
        assert not far, [(want_exact[i].item(), g[i].item(), w[i].item()) for i in far]
    return int(bad.sum())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_expm1_rounds_as_the_exact_value(kernel, dtype):
    x = every_value(dtype)
    got = run(kernel, 0, x)
    off = check(got, torch.expm1(x.double()), dtype)
    assert off <= x.numel() // 32  # one ulp only next to a boundary: a few in a hundred at most


@pytest.mark.parametrize("beta,threshold", SOFTPLUS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_softplus_rounds_as_the_exact_value(kernel, dtype, beta, threshold):
    x = every_value(dtype)
    got = run(kernel, 1, x, beta, threshold)
    off = check(got, F.softplus(x.double(), beta, threshold), dtype)
    assert off <= x.numel() // 32


def test_the_series_branches_are_taken_and_exact_enough(kernel):
    """Inputs on both sides of each form's switch (|x| = 1/16 for expm1, exp(x) = 2^-6 for softplus):
    float32 results within 2^-17 / 2^-16 of the exact value (a plain exp(x) - 1 or log(1 + exp(x))
    misses by far below the switch)."""
    x = torch.linspace(-0.07, 0.07, 4097).float()
    got = run(kernel, 0, x)
    exact = torch.expm1(x.double())
    rel = ((got.double() - exact).abs() / exact.abs().clamp_min(1e-30))[exact != 0]
    assert rel.max() < 2.0 ** -17
    x = torch.linspace(-12.0, 0.0, 4097).float()  # exp(x) from 6e-6 to 1 across 2^-6 at x = -4.16
    got = run(kernel, 1, x)
    exact = F.softplus(x.double())
    assert ((got.double() - exact).abs() / exact).max() < 2.0 ** -16
