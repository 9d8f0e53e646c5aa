"""src/kernels/pool/pool_fwd.cuh compiled as host C++ (float32, a few emulated CTAs and threads) and
run against torch.nn.functional on CPU: the kernel's windows, divisors, ceil_mode bounds, dilation
steps, adaptive bins, NaN rule and grid-stride loop, for both index types and for the windows the
plan writes into the code (PoolWindow, each case's window instantiated; max pools with two outputs a
thread and with one), without a GPU. Needs a host C++ compiler (skipped without one)."""
import ctypes

import pytest
import torch

from support import host_kernel
from support.pool_cases import BY_STEM, POOLS, SIZES, WIDE_CASES, WIDE_LOAD_CASES, params_for, reference, sample

DRIVER = r"""
#include <cstring>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
struct Dim { unsigned x; };
static Dim blockIdx{0}, blockDim{1}, gridDim{1}, threadIdx{0};
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
float __shfl_xor_sync(unsigned, float, int);  // pool_fwd_warp's, not instantiated here
#include "pool/pool_fwd.cuh"
using namespace tileops;
// as the library's pool_units and pool_dividers make them: `per` outputs of a row's last dim an item
long long units_of(long long total, const PoolGeometry& g, int per) {
  return total == 0 ? 0 : total / g.out[2] * ((g.out[2] + per - 1) / per);
}
PoolDividers dividers_of(const PoolGeometry& g, int per) {
  PoolDividers p{};
  for (int j = 0; j < 3; ++j) p.out[j] = make_int_divider(static_cast<unsigned>(j == 2 ? (g.out[2] + per - 1) / per : g.out[j]));
  return p;
}
template <typename I, int R, int M, bool A, class W = PoolWindowOfCall, int P = pool_outputs_a_thread<M, W>()>
void grid(const float* x, float* y, long long total, const PoolGeometry* g, int cip, long long d) {
  const int per = P;
  blockDim.x = 3;  // 2 CTAs of 3 threads: most outputs come from the grid-stride loop
  gridDim.x = 2;
  for (unsigned b = 0; b < gridDim.x; ++b)
    for (unsigned t = 0; t < blockDim.x; ++t) {
      blockIdx.x = b;
      threadIdx.x = t;
      pool_fwd<float, I, R, M, A, W, P>(x, y, units_of(total, *g, per), *g, dividers_of(*g, per), cip, d);
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


def fixed_driver(windows):
    """Host entry points pool_fixed<bits>_<i> for each (rank, mode, window) of `windows`, with int
    (32) and long long (64) index math, and for max pools pool_fixed<bits>one_<i>: one output a
    thread where the kernel's default takes two (the plan's choice on short rows)."""
    out = []
    for i, (rank, mode, w) in enumerate(windows):
        args = ", ".join(map(str, w))
        for bits, index in ((32, "int"), (64, "long long")):
            for tag, p in (("", ""), ("one", ", 1")) if mode == 1 else (("", ""),):
                out.append(f'extern "C" void pool_fixed{bits}{tag}_{i}(const float* x, float* y, long long total, '
                           f'const PoolGeometry* g, int cip, long long d) {{ grid<{index}, {rank}, {mode}, false, '
                           f'PoolWindow<{args}>{p}>(x, y, total, g, cip, d); }}')
    return "\n".join(out) + "\n"


def window_of(g):
    """The 12 values the plan writes into the code (pool_small_window in pool.cpp), or None."""
    w = [v for field in ("kernel", "stride", "pad", "dil") for v in getattr(g, field)]
    taps = g.kernel[0] * g.kernel[1] * g.kernel[2]
    return tuple(w) if all(0 <= v < 256 for v in w) and 0 < taps <= 128 else None


class Geometry(ctypes.Structure):  # PoolGeometry: the op's spatial dims last
    _fields_ = [(n, ctypes.c_longlong * 3) for n in ("inn", "out", "kernel", "stride", "pad", "dil")]


def host_cases(pool):
    """(x, params, expected) of every case the host test runs for one pool op."""
    extra = {1: [(1,), (2,)], 2: [(1, 3), (55, 57)], 3: [(1, 2, 3)]}[pool.rank]
    for size in SIZES[pool.rank] + extra:
        cases = params_for(pool, size)
        if pool.kind == "adaptive":
            cases += [{"output_size": o} for o in ([1, 1], [2 * size[0] + 1, 3], [5, 7])]
        for params in cases:
            torch.manual_seed(len(params) * 1000 + sum(size))
            x = sample((2, 3, *size), torch.float32, nan=True).contiguous()
            try:
                expect = reference(pool, x, params)
            except RuntimeError:
                continue  # refused before any kernel (tests/pool)
            if expect.numel() == 0:
                continue
            yield x, params, expect


def fixed_windows():
    """Every (rank, mode, window) a host case of a non-adaptive pool would have written into code."""
    out = []
    for pool in POOLS:
        if pool.kind == "adaptive":
            continue
        for x, params, expect in host_cases(pool):
            w = window_of(geometry(pool, x, params, expect.shape))
            key = (pool.rank, 0 if pool.kind == "avg" else 1, w)
            if w is not None and key not in out:
                out.append(key)
    for stem, shape, params in WIDE_LOAD_CASES:  # the oracle of pool_fwd_wide's 16-bit avg sums
        pool = BY_STEM[stem]
        x = torch.zeros(shape)
        g = geometry(pool, x, params, reference(pool, x, params).shape)
        key = (pool.rank, 0 if pool.kind == "avg" else 1, window_of(g))
        if key not in out:
            out.append(key)
    return out


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    windows = fixed_windows()
    lib = host_kernel.build(tmp_path_factory, "pool_host", DRIVER + fixed_driver(windows),
                            {"common/dtypes.cuh": host_kernel.FLOAT_DTYPES})
    lib.windows = {(f"{bits}{tag}", *key): getattr(lib, f"pool_fixed{bits}{tag}_{i}") for i, key in enumerate(windows)
                   for bits in (32, 64) for tag in ("", "one") if tag == "" or key[1] == 1}
    return lib


def per_dim(v, r, fallback):
    if v is None or (isinstance(v, list) and not v):
        return fallback
    v = [v] if isinstance(v, int) else list(v)
    return v * r if len(v) == 1 else v


def geometry(pool, x, params, out_shape):
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
    return g


def run_kernel(kernel, pool, x, params, out_shape, bits):
    """The kernel's output: bits 32 or 64 (window read from the geometry), or "fixed32"/"fixed64" (the
    case's window written into the code, int or long long index; None when the plan would not fix it),
    "fixed32one"/"fixed64one" for a max pool's one output a thread."""
    g = geometry(pool, x, params, out_shape)
    y = torch.empty(out_shape)
    if isinstance(bits, str):
        w = window_of(g)
        if w is None or pool.kind == "adaptive":
            return None
        entry = kernel.windows[(bits[5:], pool.rank, 0 if pool.kind == "avg" else 1, w)]
        entry(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()), ctypes.c_longlong(y.numel()),
              ctypes.byref(g), ctypes.c_int(int(params.get("count_include_pad", True))),
              ctypes.c_longlong(params.get("divisor_override") or 0))
        return y
    kernel.pool_run(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()), ctypes.c_longlong(y.numel()),
                    ctypes.byref(g), ctypes.c_int(int(params.get("count_include_pad", True))),
                    ctypes.c_longlong(params.get("divisor_override") or 0), ctypes.c_int(pool.rank),
                    ctypes.c_int(0 if "avg" in pool.stem else 1), ctypes.c_int(pool.kind == "adaptive"),
                    ctypes.c_int(bits))
    return y


@pytest.mark.parametrize("bits", [32, 64, "fixed32", "fixed64", "fixed32one", "fixed64one"])
@pytest.mark.parametrize("pool", POOLS, ids=[p.stem for p in POOLS])
def test_kernel_matches_torch_on_host(kernel, pool, bits):
    if isinstance(bits, str) and pool.kind == "adaptive":
        pytest.skip("adaptive bins have no fixed window")
    if isinstance(bits, str) and bits.endswith("one") and pool.kind != "max":
        pytest.skip("avg pools take one output a thread only")
    checked = 0
    for x, params, expect in host_cases(pool):
        y = run_kernel(kernel, pool, x, params, expect.shape, bits)
        if y is None:
            continue
        what = f"{pool.stem} {tuple(x.shape)} {params}"
        if "avg" in pool.stem:  # float32 sums in another order than torch's (vectorised) loops
            torch.testing.assert_close(y, expect, rtol=1e-5, atol=1e-5, equal_nan=True, msg=what)
        else:
            torch.testing.assert_close(y, expect, rtol=0, atol=0, equal_nan=True, msg=what)
        checked += 1
    assert checked > 10


WARP_DRIVER = r"""
#include <barrier>
#include <cstring>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
struct Dim { unsigned x; };
static Dim blockIdx{0}, blockDim{32}, gridDim{1};
static thread_local Dim threadIdx{0};
static std::barrier<>* warp_barrier = nullptr;
static float lanes[32];
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
// A CTA is one warp here, its 32 lanes real threads: a shuffle is a store, a barrier, a load, a barrier.
inline float __shfl_xor_sync(unsigned, float v, int offset) {
  lanes[threadIdx.x] = v;
  warp_barrier->arrive_and_wait();
  const float r = lanes[threadIdx.x ^ offset];
  warp_barrier->arrive_and_wait();
  return r;
}
#include "pool/pool_fwd.cuh"
using namespace tileops;
template <typename I, int R, int M, bool A, int G>
void grid(const float* x, float* y, long long total, const PoolGeometry* g, int cip, long long d) {
  PoolDividers p{};
  for (int j = 0; j < 3; ++j) p.out[j] = make_int_divider(static_cast<unsigned>(g->out[j]));
  gridDim.x = 2;  // 2 CTAs of one warp: most outputs come from the grid-stride loop
  for (unsigned b = 0; b < gridDim.x; ++b) {
    blockIdx.x = b;
    std::barrier<> bar(32);
    warp_barrier = &bar;
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < 32; ++t)
      threads.emplace_back([=] {
        threadIdx.x = t;
        pool_fwd_warp<float, I, R, M, A, G>(x, y, total, *g, p, cip, d);
      });
    for (auto& t : threads) t.join();
  }
}
template <typename I, int G>
void run(const float* x, float* y, long long total, const PoolGeometry* g, int cip, long long d, int rank, int mode,
         int adaptive) {
  if (adaptive)
    return mode ? grid<I, 2, 1, true, G>(x, y, total, g, cip, d) : grid<I, 2, 0, true, G>(x, y, total, g, cip, d);
  switch (rank * 2 + mode) {
    case 2: return grid<I, 1, 0, false, G>(x, y, total, g, cip, d);
    case 3: return grid<I, 1, 1, false, G>(x, y, total, g, cip, d);
    case 4: return grid<I, 2, 0, false, G>(x, y, total, g, cip, d);
    case 5: return grid<I, 2, 1, false, G>(x, y, total, g, cip, d);
    case 6: return grid<I, 3, 0, false, G>(x, y, total, g, cip, d);
    case 7: return grid<I, 3, 1, false, G>(x, y, total, g, cip, d);
  }
}
extern "C" void pool_warp_run(const float* x, float* y, long long total, const PoolGeometry* g, int cip, long long d,
                              int rank, int mode, int adaptive, int bits, int lanes) {
  if (bits == 64) return run<long long, 16>(x, y, total, g, cip, d, rank, mode, adaptive);
  if (lanes == 8) run<int, 8>(x, y, total, g, cip, d, rank, mode, adaptive);
  else if (lanes == 16) run<int, 16>(x, y, total, g, cip, d, rank, mode, adaptive);
  else run<int, 32>(x, y, total, g, cip, d, rank, mode, adaptive);
}
"""

@pytest.fixture(scope="module")
def warp_kernel(tmp_path_factory):
    return host_kernel.build(tmp_path_factory, "pool_warp_host", WARP_DRIVER,
                             {"common/dtypes.cuh": host_kernel.FLOAT_DTYPES}, std="c++20", flags=("-pthread",))


@pytest.mark.parametrize("bits,lanes", [(32, 8), (32, 16), (32, 32), (64, 16)])
@pytest.mark.parametrize("stem,shape,params", WIDE_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(WIDE_CASES)])
def test_warp_kernel_matches_torch_on_host(warp_kernel, stem, shape, params, bits, lanes):
    pool = BY_STEM[stem]
    torch.manual_seed(sum(shape))
    x = sample(shape, torch.float32, nan=pool.kind != "avg").contiguous()
    if pool.kind != "avg":
        x.view(-1)[5] = float("nan")  # a NaN in one window wins there
    expect = reference(pool, x, params)
    g = geometry(pool, x, params, expect.shape)
    y = torch.full(expect.shape, 12345.0)
    warp_kernel.pool_warp_run(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()),
                              ctypes.c_longlong(y.numel()), ctypes.byref(g),
                              ctypes.c_int(int(params.get("count_include_pad", True))),
                              ctypes.c_longlong(params.get("divisor_override") or 0), ctypes.c_int(pool.rank),
                              ctypes.c_int(0 if "avg" in stem else 1), ctypes.c_int(pool.kind == "adaptive"),
                              ctypes.c_int(bits), ctypes.c_int(lanes))
    if "avg" in stem:
        torch.testing.assert_close(y, expect, rtol=1e-5, atol=1e-5, equal_nan=True)
    else:
        torch.testing.assert_close(y, expect, rtol=0, atol=0, equal_nan=True)
        assert torch.isnan(y).any()


# pool_fwd_wide: float32 (2 outputs from a 4-element vector) and a 16-bit storage type with
# bfloat16's bits (4 outputs from an 8-element vector; from_float rounds to nearest even, as
# __float2bfloat16 does), avg and max, for the windows pool_wide_outputs admits.
WIDE_LOAD_DRIVER = r"""
#include <cstring>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
struct Dim { unsigned x; };
static Dim blockIdx{0}, blockDim{1}, gridDim{1}, threadIdx{0};
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
float __shfl_xor_sync(unsigned, float, int);  // pool_fwd_warp's, not instantiated here
#include "common/dtypes.cuh"
namespace tileops {
struct b16 { unsigned short bits; };
inline float to_float(b16 v) { unsigned u = unsigned(v.bits) << 16; float f; std::memcpy(&f, &u, 4); return f; }
template <> inline b16 from_float<b16>(float f) {  // finite values only (the cases have no NaN in avg windows)
  unsigned u; std::memcpy(&u, &f, 4);
  if (f != f) return b16{static_cast<unsigned short>(u >> 16 | 0x40)};
  return b16{static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}
}
#include "pool/pool_fwd.cuh"
using namespace tileops;
template <typename T, typename I, int R, int M, class W>
void wide_grid(const void* x, void* y, long long total, const PoolGeometry* g, int cip, long long d) {
  constexpr int P = 16 / sizeof(T) / W::stride(2);
  const long long units = total == 0 ? 0 : total / g->out[2] * ((g->out[2] + P - 1) / P);
  PoolDividers dv{};
  for (int j = 0; j < 3; ++j) dv.out[j] = make_int_divider(static_cast<unsigned>(j == 2 ? (g->out[2] + P - 1) / P : g->out[j]));
  blockDim.x = 3;  // 2 CTAs of 3 threads: most work items come from the grid-stride loop
  gridDim.x = 2;
  for (unsigned b = 0; b < gridDim.x; ++b)
    for (unsigned t = 0; t < blockDim.x; ++t) {
      blockIdx.x = b;
      threadIdx.x = t;
      pool_fwd_wide<T, I, R, M, W>(static_cast<const T*>(x), static_cast<T*>(y), units, *g, dv, cip, d);
    }
}
"""

def wide_outputs(g, itemsize):
    """pool_wide_outputs in pool.cpp for an aligned x and a call large enough (its size rule left out:
    these cases run the kernel directly): the outputs a work item, or 0."""
    v = 16 // itemsize
    k, s, p, d = g.kernel[2], g.stride[2], g.pad[2], g.dil[2]
    if d != 1 or s < 1 or v % s or v // s < 2 or p >= v or k - p - s >= v or g.inn[2] % v:
        return 0
    return v // s


def wide_load_cases():
    """(pool, x float32, params, expected float32, geometry, window) of each case."""
    out = []
    for stem, shape, params in WIDE_LOAD_CASES:
        pool = BY_STEM[stem]
        torch.manual_seed(sum(shape))
        x = sample(shape, torch.float32, nan=pool.kind != "avg").to(torch.bfloat16).float().contiguous()
        expect = reference(pool, x, params)
        g = geometry(pool, x, params, expect.shape)
        out.append((pool, x, params, expect, g, window_of(g)))
    return out


@pytest.fixture(scope="module")
def wide_kernel(tmp_path_factory):
    entries = []
    for i, (pool, x, params, expect, g, w) in enumerate(wide_load_cases()):
        mode = 0 if pool.kind == "avg" else 1
        for itemsize, t in ((4, "float"), (2, "b16")):
            if not wide_outputs(g, itemsize):
                continue
            for bits, index in ((32, "int"), (64, "long long")):
                entries.append(f'extern "C" void wide{itemsize}_{bits}_{i}(const void* x, void* y, long long total, '
                               f'const PoolGeometry* g, int cip, long long d) {{ wide_grid<{t}, {index}, '
                               f'{pool.rank}, {mode}, PoolWindow<{", ".join(map(str, w))}>>(x, y, total, g, cip, d); }}')
    return host_kernel.build(tmp_path_factory, "pool_wide_host", WIDE_LOAD_DRIVER + "\n".join(entries) + "\n",
                             {"common/dtypes.cuh": host_kernel.FLOAT_DTYPES})


def run_wide(wide_kernel, i, x, params, shape, dtype, bits):
    xs = x.to(dtype).contiguous()
    assert xs.data_ptr() % 16 == 0
    y = torch.full(shape, 7.0, dtype=dtype)  # every output written over this
    getattr(wide_kernel, f"wide{dtype.itemsize}_{bits}_{i}")(
        ctypes.c_void_p(xs.data_ptr()), ctypes.c_void_p(y.data_ptr()), ctypes.c_longlong(y.numel()),
        ctypes.byref(wide_load_cases()[i][4]), ctypes.c_int(int(params.get("count_include_pad", True))),
        ctypes.c_longlong(params.get("divisor_override") or 0))
    return y


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_wide_load_kernel_matches_torch_on_host(wide_kernel, kernel, dtype, bits):
    checked = {"avg": 0, "max": 0}
    for i, (pool, x, params, expect, g, w) in enumerate(wide_load_cases()):
        p = wide_outputs(g, dtype.itemsize)
        if not p:
            continue
        y = run_wide(wide_kernel, i, x, params, expect.shape, dtype, bits)
        what = f"{pool.stem} {tuple(x.shape)} {params} {dtype} (P={p})"
        if pool.kind != "avg":
            torch.testing.assert_close(y.float(), expect, rtol=0, atol=0, equal_nan=True, msg=what)
        elif dtype == torch.float32:  # float32 sums in another order than torch's loops
            torch.testing.assert_close(y, expect, rtol=1e-5, atol=1e-5, msg=what)
        else:  # the same float32 sums as pool_fwd's, in its order, rounded once
            fixed = run_kernel(kernel, pool, x, params, expect.shape, f"fixed{bits}")
            torch.testing.assert_close(y, fixed.to(torch.bfloat16), rtol=0, atol=0, msg=what)
        checked[pool.kind if pool.kind == "avg" else "max"] += 1
    assert checked["max"] >= (9 if dtype == torch.bfloat16 else 6) and checked["avg"] >= 5, checked
