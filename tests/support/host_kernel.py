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
