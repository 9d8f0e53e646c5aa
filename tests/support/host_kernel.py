"""Kernel headers of src/kernels compiled as host C++, for tests that run a kernel's logic without a
GPU: float32 stand-ins for the headers a kernel includes, and the build of a test's driver (which
defines the CUDA words it needs and includes the kernel header) into a shared library."""
import ctypes
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CXX = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")

# common/dtypes.cuh for float32 storage only (the f16/bf16 conversions are inline PTX).
FLOAT_DTYPES = """#pragma once
namespace tileops {
inline float to_float(float v) { return v; }
template <typename T> inline T from_float(float f);
template <> inline float from_float<float>(float f) { return f; }
template <typename T, int VEC> struct Vec { T v[VEC]; };
}
"""
# common/reduce.cuh's declarations, for headers that name them in kernels a test does not instantiate.
REDUCE_DECLARATIONS = """#pragma once
namespace tileops {
template <int TPR> float group_sum(float v, float* scratch);
template <int TPR, typename S, typename F> S group_reduce(S v, S* scratch, F combine);
}
"""

# common/fast_math.cuh: the MUFU approximations as the C library's exact functions.
FAST_MATH = """#pragma once
#include <cmath>
namespace tileops {
inline float exp2_approx(float x) { return std::exp2(x); }
inline float rcp_approx(float x) { return 1.f / x; }
inline float fmax_nan(float a, float b) { return (a != a || a > b) ? a : b; }
inline float fmin_nan(float a, float b) { return (a != a || a < b) ? a : b; }
constexpr float kLog2e = 1.4426950408889634f;
inline float fast_exp(float x) { return exp2_approx(x * kLog2e); }
}
"""

# CUDA words for src/kernels/elementwise/elementwise.cuh's device functions (its loops are not run):
# a driver appends its own #include of the header and the functions it calls. __expf / __logf are
# exp2 / log2 of the scaled argument, the rounding the hardware's approximate forms start from.
ELEMENTWISE_WORDS = r"""
#include <cmath>
#include <cstring>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
#define __launch_bounds__(n)
#define __align__(n) __attribute__((aligned(n)))
#define __noinline__ __attribute__((noinline))
struct Dim { unsigned x, y; };
static Dim blockIdx, blockDim, gridDim, threadIdx;  // named by the kernels, which these tests do not run
inline void __syncthreads() {}
inline float rsqrtf(float v) { return 1.f / std::sqrt(v); }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned i; std::memcpy(&i, &f, 4); return i; }
inline float __expf(float x) { return std::exp2(x * 1.44269504f); }
inline float __logf(float x) { return std::log2(x) * 0.693147181f; }
float erfinvf(float);  // named by functions these tests do not call
"""
# common/dtypes.cuh's names for elementwise.cuh, whose float functions these tests call.
ELEMENTWISE_DTYPES = """#pragma once
namespace tileops {
struct f16 { unsigned short bits; };
struct bf16 { unsigned short bits; };
float to_float(f16);
float to_float(bf16);
template <typename T> T from_float(float f);
}
"""

# CUDA words for a kernel whose CTA runs as real threads, one CTA after another: barriers, float warp
# shuffles (a CTA-wide exchange, so every thread of the CTA must shuffle together), and
# run<TPB>(ctas, body). A driver adds its own #include of the kernel header after it.
CTA_THREADS = r"""
#include <barrier>
#include <cmath>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static  // one CTA runs at a time: a function's statics are its shared memory
#define __launch_bounds__(n)
struct Dim { unsigned x; };
static Dim blockIdx{0};
static thread_local Dim threadIdx{0};
static std::barrier<>* cta_barrier = nullptr;
static float lanes[1024];
inline void __syncthreads() { cta_barrier->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float v, int offset) {
  lanes[threadIdx.x] = v;
  __syncthreads();
  const float r = lanes[threadIdx.x ^ offset];
  __syncthreads();
  return r;
}
inline float rsqrtf(float v) { return 1.f / std::sqrt(v); }
template <int TPB, class F>
void run(long long ctas, F body) {
  for (long long g = 0; g < ctas; ++g) {
    blockIdx.x = static_cast<unsigned>(g);
    std::barrier<> bar(TPB);
    cta_barrier = &bar;
    std::vector<std::thread> threads;
    for (int t = 0; t < TPB; ++t)
      threads.emplace_back([=] {
        threadIdx.x = static_cast<unsigned>(t);
        body();
      });
    for (auto& t : threads) t.join();
  }
}
"""


def build(tmp_path_factory, name: str, driver: str, shims: dict, std: str = "c++17", flags=()) -> ctypes.CDLL:
    """driver.cpp compiled with `shims` ({"common/dtypes.cuh": text, ...}) found before src/kernels'
    own headers; skips the test without a host C++ compiler."""
    if CXX is None:
        pytest.skip("no host C++ compiler")
    d = tmp_path_factory.mktemp(name)
    for rel, text in shims.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)
    (d / "driver.cpp").write_text(driver)
    lib = d / f"lib{name}.so"
    r = subprocess.run([CXX, f"-std={std}", "-O1", "-shared", "-fPIC", *flags, f"-I{d}",
                        f"-I{os.path.join(ROOT, 'src', 'kernels')}", str(d / "driver.cpp"), "-o", str(lib)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return ctypes.CDLL(str(lib))
