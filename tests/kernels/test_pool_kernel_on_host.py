"""src/kernels/pool/pool_fwd.cuh compiled as host C++ (float32, a few emulated CTAs and threads) and
run against torch.nn.functional on CPU: the kernel's windows, divisors, ceil_mode bounds, dilation
steps, adaptive bins, NaN rule and grid-stride loop, for both index types, without a GPU. Needs a
host C++ compiler (skipped without one)."""
import ctypes
import os
import shutil
import subprocess

import pytest
import torch

from support.pool_cases import POOLS, SIZES, params_for, reference, sample

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CXX = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")

# The CUDA words the kernel uses, for the host; float32 storage only (the f16/bf16 conversions are
# inline PTX).
SHIM = """#pragma once
namespace tileops {
inline float to_float(float v) { return v; }
template <typename T> inline T from_float(float f);
template <> inline float from_float<float>(float f) { return f; }
}
"""
DRIVER = r"""
#include <cstring>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
struct Dim { unsigned x; };
static Dim blockIdx{0}, blockDim{1}, gridDim{1}, threadIdx{0};
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
#include "pool/pool_fwd.cuh"
using namespace tileops;
template <typename I, int R, int M, bool A>
void grid(const float* x, float* y, long long total, const PoolGeometry* g, int cip, long long d) {
  blockDim.x = 3;  // 2 CTAs of 3 threads: most outputs come from the grid-stride loop
  gridDim.x = 2;
  for (unsigned b = 0; b < gridDim.x; ++b)
    for (unsigned t = 0; t < blockDim.x; ++t) {
      blockIdx.x = b;
      threadIdx.x = t;
      pool_fwd<float, I, R, M, A>(x, y, total, *g, cip, d);
    }
}
template <typename I>
void run(const float* x, float* y, long long total, const PoolGeometry* g, int cip, long long d, int rank, int mode,
         int adaptive) {
  if (adaptive) return mode ? grid<I, 2, 1, true>(x, y, total, g, cip, d) : grid<I, 2, 0, true>(x, y, total, g, cip, d);
  switch (rank * 2 + mode) {
    case 2: return grid<I, 1, 0, false>(x, y, total, g, cip, d);
    case 3: return grid<I, 1, 1, false>(x, y, total, g, cip, d);
    case 4: return grid<I, 2, 0, false>(x, y, total, g, cip, d);
    case 5: return grid<I, 2, 1, false>(x, y, total, g, cip, d);
    case 6: return grid<I, 3, 0, false>(x, y, total, g, cip, d);
    case 7: return grid<I, 3, 1, false>(x, y, total, g, cip, d);
  }
}
extern "C" void pool_run(const float* x, float* y, long long total, const PoolGeometry* g, int cip, long long d,
                         int rank, int mode, int adaptive, int bits) {
  if (bits == 32) run<int>(x, y, total, g, cip, d, rank, mode, adaptive);
  else run<long long>(x, y, total, g, cip, d, rank, mode, adaptive);
}
"""


class Geometry(ctypes.Structure):  # PoolGeometry: the op's spatial dims last
    _fields_ = [(n, ctypes.c_longlong * 3) for n in ("inn", "out", "kernel", "stride", "pad", "dil")]


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    if CXX is None:
        pytest.skip("no host C++ compiler")
    d = tmp_path_factory.mktemp("pool_host")
    (d / "common").mkdir()
    (d / "common" / "dtypes.cuh").write_text(SHIM)
    (d / "driver.cpp").write_text(DRIVER)
    lib = d / "libpool_host.so"
    # the shim folder first, so the kernel's "common/dtypes.cuh" is the host one
    subprocess.run([CXX, "-std=c++17", "-O1", "-shared", "-fPIC", f"-I{d}", f"-I{os.path.join(ROOT, 'src', 'kernels')}",
                    str(d / "driver.cpp"), "-o", str(lib)], check=True)
    return ctypes.CDLL(str(lib))


def per_dim(v, r, fallback):
    if v is None or (isinstance(v, list) and not v):
        return fallback
    v = [v] if isinstance(v, int) else list(v)
    return v * r if len(v) == 1 else v


def run_kernel(kernel, pool, x, params, out_shape, bits):
    r = pool.rank
    k = per_dim(params.get("kernel_size"), r, [1] * r)
    s = per_dim(params.get("stride"), r, k)
    p = per_dim(params.get("padding", 0), r, [0] * r)
    dl = per_dim(params.get("dilation", 1), r, [1] * r)
    g = Geometry()
    for d in range(3):
        j = d - (3 - r)
        if j < 0:
            for n in ("inn", "out", "kernel", "stride", "dil"):
                getattr(g, n)[d] = 1
            g.pad[d] = 0
            continue
        g.inn[d], g.out[d] = x.shape[x.dim() - r + j], out_shape[len(out_shape) - r + j]
        g.kernel[d], g.stride[d], g.pad[d], g.dil[d] = k[j], s[j], p[j], dl[j]
    y = torch.empty(out_shape)
    kernel.pool_run(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()), ctypes.c_longlong(y.numel()),
                    ctypes.byref(g), ctypes.c_int(int(params.get("count_include_pad", True))),
                    ctypes.c_longlong(params.get("divisor_override") or 0), ctypes.c_int(r),
                    ctypes.c_int(0 if "avg" in pool.stem else 1), ctypes.c_int(pool.kind == "adaptive"),
                    ctypes.c_int(bits))
    return y


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("pool", POOLS, ids=[p.stem for p in POOLS])
def test_kernel_matches_torch_on_host(kernel, pool, bits):
    extra = {1: [(1,), (2,)], 2: [(1, 3), (55, 57)], 3: [(1, 2, 3)]}[pool.rank]
    checked = 0
    for size in SIZES[pool.rank] + extra:
        cases = params_for(pool, size)
        if pool.kind == "adaptive":
            cases += [{"output_size": o} for o in ([1, 1], [2 * size[0] + 1, 3], [5, 7])]
        for params in cases:
            x = sample((2, 3, *size), torch.float32, nan=True).contiguous()
            try:
                expect = reference(pool, x, params)
            except RuntimeError:
                continue  # refused before any kernel (tests/pool)
            if expect.numel() == 0:
                continue
            y = run_kernel(kernel, pool, x, params, expect.shape, bits)
            what = f"{pool.stem} {size} {params}"
            if "avg" in pool.stem:  # float32 sums in another order than torch's (vectorised) loops
                torch.testing.assert_close(y, expect, rtol=1e-5, atol=1e-5, equal_nan=True, msg=what)
            else:
                torch.testing.assert_close(y, expect, rtol=0, atol=0, equal_nan=True, msg=what)
            checked += 1
    assert checked > 10
