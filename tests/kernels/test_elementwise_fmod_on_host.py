"""src/kernels/elementwise/elementwise.cuh's fmod, remainder and floor_divide for floats compiled as
host C++ and compared bit for bit with C's fmod and torch.remainder / torch.floor_divide on CPU, on
support.elementwise_cases.modulo_pairs (quotients that take the one-fma path and those past 2^23 that
take fmodf, quotients that round onto the next integer, zeros, infinities, NaNs, subnormals). The same
pairs on the GPU: test_elementwise_gpu.py. for16::floor_divide and for16::remainder (operands of
16-bit values) on every float16 / bfloat16 value against a spread of divisors. Needs a host C++ compiler (skipped without
one)."""
import ctypes
import math

import pytest
import torch

from support import host_kernel
from support.elementwise_cases import modulo_pairs

DRIVER = host_kernel.ELEMENTWISE_WORDS + r"""
#include "elementwise/elementwise.cuh"
using namespace tileops::ew;
extern "C" void run(int which, const float* a, const float* b, float* out, long long n) {
  for (long long i = 0; i < n; ++i)
    out[i] = which == 0 ? fmod(a[i], b[i]) : which == 1 ? remainder(a[i], b[i])
           : which == 2 ? floor_divide(a[i], b[i]) : which == 3 ? for16::floor_divide(a[i], b[i])
           : for16::remainder(a[i], b[i]);
}
"""
OPS = {0: "fmod", 1: "remainder", 2: "floor_divide"}


def exact_fmod(a, b):
    """C's fmod on the float32 values as doubles: exact, as CUDA's fmodf (torch's vectorised CPU fmod
    gives NaN once a / b overflows float32)."""
    def one(x, y):
        return float("nan") if math.isnan(x) or math.isnan(y) or math.isinf(x) or y == 0 else math.fmod(x, y)
    return torch.tensor([one(x, y) for x, y in zip(a.tolist(), b.tolist())], dtype=torch.float32)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    lib = host_kernel.build(tmp_path_factory, "fmod_host", DRIVER,
                            {"common/dtypes.cuh": host_kernel.ELEMENTWISE_DTYPES},
                            flags=("-ffp-contract=off",))
    lib.run.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong]
    return lib


@pytest.mark.parametrize("which", sorted(OPS), ids=OPS.values())
def test_float_modulo_matches_torch_bit_for_bit(kernel, which):
    a, b = modulo_pairs()
    if which > 0:  # torch's CPU remainder and floor_divide where its fmod is exact: a / b finite
        keep = (a / b).isfinite() | a.isnan() | b.isnan() | (b == 0)
        a, b = a[keep], b[keep]
    a, b = a.contiguous(), b.contiguous()
    out = torch.empty_like(a)
    kernel.run(which, a.data_ptr(), b.data_ptr(), out.data_ptr(), a.numel())
    want = exact_fmod(a, b) if which == 0 else getattr(torch, OPS[which])(a, b)
    same = (out.view(torch.int32) == want.view(torch.int32)) | (out.isnan() & want.isnan())
    bad = (~same).nonzero().flatten()[:5].tolist()
    assert not bad, [(a[i].item(), b[i].item(), out[i].item(), want[i].item()) for i in bad]


def sixteen_bit_pairs(da, db):
    """Every value of da (NaNs, infinities, zeros and subnormals included) against 192 values of db:
    zeros, infinities, a NaN, +-1, small integers, and the rest spread over db's bit patterns."""
    a = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(da).float()
    picked = torch.arange(-32768, 32768, 383, dtype=torch.int32).to(torch.int16).view(db).float()
    special = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1.0, -1.0, 3.0, -7.0, 0.1, 1e-3,
                            2.0 ** -14, 2.0 ** -24 if db == torch.float16 else 2.0 ** -133]).to(db).float()
    b = torch.cat([special, picked])
    return a.repeat_interleave(b.numel()).contiguous(), b.repeat(a.numel()).contiguous()


@pytest.mark.parametrize("which,name", [(3, "floor_divide"), (4, "remainder")], ids=["floor_divide", "remainder"])
@pytest.mark.parametrize("da,db", [(torch.float16, torch.float16), (torch.bfloat16, torch.bfloat16),
                                   (torch.bfloat16, torch.float16), (torch.float16, torch.bfloat16)], ids=str)
def test_16bit_forms_match_torch_bit_for_bit(kernel, da, db, which, name):
    a, b = sixteen_bit_pairs(da, db)
    keep = (a / b).isfinite() | a.isnan() | b.isnan() | (b == 0)  # as above: torch's CPU fmod is exact there
    a, b = a[keep].contiguous(), b[keep].contiguous()
    q = (a / b).abs()
    assert ((q > 0) & (q < 8192)).sum() > a.numel() // 4 and (q >= 8192).any()  # both paths taken
    out = torch.empty_like(a)
    kernel.run(which, a.data_ptr(), b.data_ptr(), out.data_ptr(), a.numel())
    want = getattr(torch, name)(a, b)
    same = (out.view(torch.int32) == want.view(torch.int32)) | (out.isnan() & want.isnan())
    bad = (~same).nonzero().flatten()[:5].tolist()
    assert not bad, [(a[i].item(), b[i].item(), out[i].item(), want[i].item()) for i in bad]
