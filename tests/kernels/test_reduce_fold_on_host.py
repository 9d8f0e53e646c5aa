"""src/kernels/reduction/reduce.cuh's reducers compiled as host C++ and run as the kernels use them:
emulated threads fold K elements at a time (a row's contiguous vectors, or a column's four rows
strided by the thread count, then single rows), then merge their states (a tree for rows, in order
for columns); every op's result against torch on CPU, on inputs with NaNs, infinities, ties and
zeros placed inside and across the folds. Needs a host C++ compiler (skipped without one)."""
import ctypes
import math

import pytest
import torch

from support import host_kernel

DRIVER = r"""
#include <math.h>
#include <cstring>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
#define __launch_bounds__(n)
struct Dim { unsigned x; };
static Dim blockIdx{0}, threadIdx{0};
inline void __syncthreads() {}  // named by the kernels, which this test does not run
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
#include "reduction/reduce.cuh"
using namespace tileops;

// mode 0: thread t folds vectors t, t + T, ... of K contiguous elements (reduce_rows);
// mode 1: thread t folds rows t, t + T, t + 2T, t + 3T four at a time, then one at a time (reduce_cols).
template <int OP, int K, typename Y>
void run(int mode, const float* x, long long n, int threads, float corr, Y* y, float* y2) {
  using R = reduce_detail::Reducer<OP>;
  using S = typename R::State;
  std::vector<S> st(threads, R::init());
  for (int t = 0; t < threads; ++t) {
    if (mode == 0) {
      for (long long k = t; k < n / K; k += threads) {
        float v[K];
        for (int j = 0; j < K; ++j) v[j] = x[k * K + j];
        st[t] = R::fold(st[t], v, k * K, 1);
      }
    } else {
      long long i = t;
      for (; i + 3LL * threads < n; i += 4LL * threads) {
        const float v[4] = {x[i], x[i + threads], x[i + 2LL * threads], x[i + 3LL * threads]};
        st[t] = R::fold(st[t], v, i, threads);
      }
      for (; i < n; i += threads) {
        const float v[1] = {x[i]};
        st[t] = R::fold(st[t], v, i, threads);
      }
    }
  }
  if (mode == 0) {
    for (int half = threads / 2; half > 0; half /= 2)  // the tree of a warp's shuffles
      for (int t = 0; t < half; ++t) st[t] = R::merge(st[t], st[t + half]);
  } else {
    for (int t = 1; t < threads; ++t) st[0] = R::merge(st[0], st[t]);  // warp 0 merges the warps in order
  }
  R::write(st[0], n, corr, y, y2);
}

template <int OP, typename Y>
void run_k(int k, int mode, const float* x, long long n, int threads, float corr, void* y, float* y2) {
  Y* out = static_cast<Y*>(y);
  if (k == 8) run<OP, 8>(mode, x, n, threads, corr, out, y2);
  else run<OP, 2>(mode, x, n, threads, corr, out, y2);
}

// bool all (10) / any (11) of n bytes (n % 16 == 0) by fold_vec, 16 bytes a vector as the row kernel
// reads them (whole words, not widened elements); 1 or 0.
template <int OP> int fold_bool_words_of(const unsigned char* x, int n) {
  auto s = reduce_detail::Reducer<OP>::init();
  for (int k = 0; k < n / 16; ++k) {
    Vec<bool, 16> v;
    std::memcpy(&v, x + 16 * k, 16);
    s = reduce_detail::fold_vec<OP, bool>(s, v, 16LL * k);
  }
  return static_cast<int>(s.c);
}
extern "C" int fold_bool_words(int op, const unsigned char* x, int n) {
  return op == kReduceAll ? fold_bool_words_of<kReduceAll>(x, n) : fold_bool_words_of<kReduceAny>(x, n);
}

extern "C" void reduce(int op, int k, int mode, const float* x, long long n, int threads, float corr, void* y,
                       float* y2) {
  switch (op) {
    case kReduceSum: return run_k<kReduceSum, float>(k, mode, x, n, threads, corr, y, y2);
    case kReduceMean: return run_k<kReduceMean, float>(k, mode, x, n, threads, corr, y, y2);
    case kReduceAmax: return run_k<kReduceAmax, float>(k, mode, x, n, threads, corr, y, y2);
    case kReduceAmin: return run_k<kReduceAmin, float>(k, mode, x, n, threads, corr, y, y2);
    case kReduceProd: return run_k<kReduceProd, float>(k, mode, x, n, threads, corr, y, y2);
    case kReduceVar: return run_k<kReduceVar, float>(k, mode, x, n, threads, corr, y, y2);
    case kReduceStd: return run_k<kReduceStd, float>(k, mode, x, n, threads, corr, y, y2);
    case kReduceVarMean: return run_k<kReduceVarMean, float>(k, mode, x, n, threads, corr, y, y2);
    case kReduceArgmax: return run_k<kReduceArgmax, long long>(k, mode, x, n, threads, corr, y, y2);
    case kReduceArgmin: return run_k<kReduceArgmin, long long>(k, mode, x, n, threads, corr, y, y2);
    case kReduceAll: return run_k<kReduceAll, bool>(k, mode, x, n, threads, corr, y, y2);
    case kReduceAny: return run_k<kReduceAny, bool>(k, mode, x, n, threads, corr, y, y2);
    case kReduceCountNonzero: return run_k<kReduceCountNonzero, long long>(k, mode, x, n, threads, corr, y, y2);
    case kReduceL1: return run_k<kReduceL1, float>(k, mode, x, n, threads, corr, y, y2);
    case kReduceL2: return run_k<kReduceL2, float>(k, mode, x, n, threads, corr, y, y2);
    case kReduceInf: return run_k<kReduceInf, float>(k, mode, x, n, threads, corr, y, y2);
    case kReduceLogSumExp: return run_k<kReduceLogSumExp, float>(k, mode, x, n, threads, corr, y, y2);
  }
}
"""

# (op id of reduce.cuh, output dtype, torch reference of a 1-d float64 x)
OPS = {
    "sum": (0, torch.float32, lambda x: x.sum()),
    "mean": (1, torch.float32, lambda x: x.mean()),
    "amax": (2, torch.float32, lambda x: x.amax()),
    "amin": (3, torch.float32, lambda x: x.amin()),
    "prod": (4, torch.float32, lambda x: x.prod()),
    "var": (5, torch.float32, lambda x: x.var(correction=1)),
    "std": (6, torch.float32, lambda x: x.std(correction=0)),
    "var_mean": (7, torch.float32, lambda x: x.var(correction=1)),
    "argmax": (8, torch.int64, lambda x: x.argmax()),
    "argmin": (9, torch.int64, lambda x: x.argmin()),
    "all": (10, torch.bool, lambda x: x.all()),
    "any": (11, torch.bool, lambda x: x.any()),
    "count_nonzero": (12, torch.int64, lambda x: torch.count_nonzero(x)),
    "l1_norm": (13, torch.float32, lambda x: x.abs().sum()),
    "l2_norm": (14, torch.float32, lambda x: x.norm()),
    "inf_norm": (15, torch.float32, lambda x: x.abs().amax()),
    "logsumexp": (16, torch.float32, lambda x: torch.logsumexp(x, 0)),
}
CORRECTION = {"var": 1.0, "std": 0.0, "var_mean": 1.0}


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    lib = host_kernel.build(tmp_path_factory, "reduce_fold_host", DRIVER,
                            {"common/dtypes.cuh": host_kernel.FLOAT_DTYPES,
                             "common/reduce.cuh": host_kernel.REDUCE_DECLARATIONS,
                             "common/fast_math.cuh": host_kernel.FAST_MATH})
    lib.reduce.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int,
                           ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p]
    return lib


def inputs():
    """(name, x) of 64 float32 elements: values placed at both ends of a fold and across folds."""
    g = torch.Generator().manual_seed(3)
    base = torch.randn(64, generator=g)
    yield "random", base
    yield "shifted", base * 0.01 + 1000.0  # variance of a large mean
    ties = torch.zeros(64)
    ties[[5, 13, 40]] = 2.0
    ties[[7, 50]] = -2.0
    yield "ties", ties
    ties = torch.zeros(64)
    ties[[3, 6]] = 2.0  # two maxima in one fold of 8, in different halves of it
    ties[[1, 2]] = -2.0
    yield "ties in a fold", ties
    yield "ints", torch.randint(-3, 4, (64,), generator=g).float()
    for at in (0, 7, 9, 33, 63):
        x = base.clone()
        x[at] = float("nan")
        yield f"nan@{at}", x
    two = base.clone()
    two[[10, 41]] = float("nan")
    yield "two nans", two
    two = base.clone()
    two[[6, 2]] = float("nan")
    yield "two nans in a fold", two
    for at in ((3,), (3, 4), (3, 60)):
        x = base.clone()
        x[list(at)] = float("inf")
        yield f"inf@{at}", x
    x = base.clone()
    x[3], x[35] = float("nan"), float("inf")  # a NaN, then an inf in a later fold of the same thread
    yield "nan then inf", x
    x = base.clone()
    x[[2, 30]] = float("-inf")
    yield "-inf", x
    yield "all -inf", torch.full((64,), float("-inf"))
    x = torch.full((64,), float("-inf"))
    x[17] = float("inf")
    yield "inf among -inf", x
    yield "all zero", torch.zeros(64)
    yield "ones", torch.ones(64)
    x = torch.ones(64)
    x[37] = 0.0
    yield "one zero", x
    x = torch.zeros(64)
    x[62] = -0.5
    yield "one nonzero", x


CASES = list(inputs())


# cols-t3: 64 rows over 3 threads end in single-row folds (the column kernel's tail)
@pytest.mark.parametrize("k,mode,threads", [(8, 0, 2), (8, 0, 4), (2, 0, 8), (2, 1, 4), (2, 1, 2), (2, 1, 3)],
                         ids=["rows-k8-t2", "rows-k8-t4", "rows-k2-t8", "cols-t4", "cols-t2", "cols-t3"])
@pytest.mark.parametrize("op", list(OPS))
def test_folds_match_torch(kernel, op, k, mode, threads):
    op_id, dtype, ref = OPS[op]
    for name, x in CASES:
        if op == "prod":
            x = 1.0 + 0.01 * torch.tanh(x) if x.isfinite().all() else x  # a product of 64 that stays finite
        y = torch.empty((), dtype=dtype)
        y2 = torch.empty((), dtype=torch.float32)
        kernel.reduce(op_id, k, mode, x.data_ptr(), x.numel(), threads, CORRECTION.get(op, 0.0), y.data_ptr(),
                      y2.data_ptr())
        expect = ref(x.double())
        if dtype == torch.float32:
            exact = op in ("amax", "amin", "inf_norm")
            rtol, atol = (0, 0) if exact else (2e-5, 1e-5)
            if name == "shifted" and op in CORRECTION:
                # a spread of 1e-2 about 1000, whose float32 ulp is 6e-5: each fold's mean is off by
                # up to half of it, 1e-3 of the variance (E[x^2] - E[x]^2 would miss it entirely)
                rtol, atol = 5e-3, 0
            torch.testing.assert_close(y.double(), expect, equal_nan=True, rtol=rtol, atol=atol,
                                       msg=lambda m: f"{op} on {name}: {m}")
        else:
            assert y.item() == expect.item(), f"{op} on {name}: {y.item()} != {expect.item()}"
        if op == "var_mean":
            # torch's Welford mean with an inf: NaN or inf by where the inf falls, as ours
            mean = torch.var_mean(x.double(), correction=1)[1]
            torch.testing.assert_close(y2.double(), mean, equal_nan=True, rtol=2e-5, atol=1e-5)


def test_logsumexp_of_two_infinities_in_one_fold_is_inf(kernel):
    x = torch.full((8,), float("-inf"))
    x[[1, 2]] = float("inf")
    y = torch.empty(())
    kernel.reduce(16, 8, 0, x.data_ptr(), 8, 1, 0.0, y.data_ptr(), y.data_ptr())
    assert y.item() == math.inf == torch.logsumexp(x, 0).item()


@pytest.mark.parametrize("k,mode,threads", [(8, 0, 4), (2, 0, 8), (2, 1, 4), (2, 1, 3)],
                         ids=["rows-k8-t4", "rows-k2-t8", "cols-t4", "cols-t3"])
def test_moments_near_the_float_range_are_inf_not_nan(kernel, k, mode, threads):
    # Values of either sign near 3e38: a fold's plain sum overflows, and so does d * d in a merge with
    # an empty state (times its count of 0: NaN). The variance (~1e76) is past the float range: inf,
    # the float64 variance rounded; std is inf too, as its float32 sum of squared deviations
    # overflows (torch's own float32 kernels give inf or NaN here, by path: 1-d var NaN, var_mean
    # inf on CPU); the mean is finite.
    g = torch.Generator().manual_seed(5)
    x = torch.where(torch.rand(64, generator=g) > 0.5, 1.0, -1.0) * (1.5e38 + 1.5e38 * torch.rand(64, generator=g))
    y, y2 = torch.empty(()), torch.empty(())
    for op, want in ((5, math.inf), (6, math.inf), (7, math.inf)):
        kernel.reduce(op, k, mode, x.data_ptr(), 64, threads, 1.0, y.data_ptr(), y2.data_ptr())
        assert y.item() == want, f"op {op}: {y.item()}"
    mean = x.double().mean()
    assert math.isclose(y2.item(), mean.item(), rel_tol=0, abs_tol=3e38 * 1e-6), (y2.item(), mean.item())


@pytest.mark.parametrize("op,ref", [(10, all), (11, any)], ids=["all", "any"])
def test_bool_words_match_bytes(kernel, op, ref):
    # whole 32-bit words of bool bytes: a byte is true when nonzero (2, 0x80 and 0xff too, as torch
    # reads a bool's byte), false only when 0, wherever it sits in its word and vector
    kernel.fold_bool_words.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    for fill in (0, 1):
        for at in (0, 3, 5, 14, 17, 31):
            for value in (0, 1, 2, 0x7f, 0x80, 0xff):
                x = torch.full((32,), fill, dtype=torch.uint8)
                x[at] = value
                want = ref(int(b) != 0 for b in x.tolist())
                assert kernel.fold_bool_words(op, x.data_ptr(), 32) == want, (fill, at, value)
