"""src/kernels/elementwise/elementwise.cuh's for16 forms (expm1, softplus, div6 for results rounded
to float16 or bfloat16) compiled as host C++, every 16-bit input against the exact value (torch in
float64), and hardswish / hardsigmoid through div6 bit for bit against torch's. __expf and __logf stand in as exp2 / log2 of the scaled argument (support/host_kernel.py),
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
  for (long long i = 0; i < n; ++i) {
    const float v = x[i];
    out[i] = which == 0 ? ew::for16::expm1(v) : which == 1 ? ew::for16::softplus(v, beta, threshold)
           : which == 2 ? ew::for16::div6(v)
           : which == 3 ? ew::for16::div6(v * ew::clamp(v + 3.f, 0.f, 6.f))  // HardswishFwdOp's expression
                        : ew::for16::div6(ew::clamp(v + 3.f, 0.f, 6.f));    // HardsigmoidFwdOp's
  }
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


def test_div6_is_the_rounded_quotient(kernel):
    """Float32 values spread over every exponent, the range below 2^-120 whole, zeros, infinities and
    NaN: the float32 quotient exactly where |x| > 2^-125, rounded to float16 exactly everywhere, to
    bfloat16 but for at most the 42 ties below 2^-125 (an exhaustive run over all 2^32 floats finds
    just those). A plain x * (1/6) misses elsewhere too."""
    spread = torch.arange(-2 ** 31, 2 ** 31 - 1, 65537, dtype=torch.int64).to(torch.int32).view(torch.float32)
    tiny = torch.arange(0, 2 ** 23 * 6, 3, dtype=torch.int32).view(torch.float32)  # |x| < 2^-120
    special = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 3.4028235e38, -3.4028235e38])
    x = torch.cat([spread, tiny, -tiny, special]).contiguous()
    got, want = run(kernel, 2, x), x / 6
    same = lambda a, b: (a.view(torch.int16 if a.dtype != torch.float32 else torch.int32) ==  # noqa: E731
                         b.view(torch.int16 if b.dtype != torch.float32 else torch.int32)) | (a.isnan() & b.isnan())
    big = x.abs() > 2.0 ** -125
    assert same(got[big], want[big]).all()
    assert same(got.half(), want.half()).all()
    off = ~same(got.bfloat16(), want.bfloat16())
    assert int(off.sum()) <= 42 and (x[off].abs() <= 2.0 ** -125).all()
    assert not same(x * (1 / 6), want).all()


@pytest.mark.parametrize("which,fn", [(3, F.hardswish), (4, F.hardsigmoid)], ids=["hardswish", "hardsigmoid"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_hard_activations_through_div6_match_torch_bit_for_bit(kernel, dtype, which, fn):
    x = every_value(dtype)
    got = run(kernel, which, x).to(dtype)
    want = fn(x.to(dtype))
    same = (got.view(torch.int16) == want.view(torch.int16)) | (got.isnan() & want.isnan())
    bad = (~same).nonzero().flatten()[:5].tolist()
    assert not bad, [(x[i].item(), got[i].item(), want[i].item()) for i in bad]
