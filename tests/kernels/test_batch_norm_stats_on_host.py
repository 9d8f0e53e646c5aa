"""src/kernels/norm/batch_norm_fwd.cuh's batch_norm_fwd_stats compiled as host C++ (emulated CTAs and
threads) and run on the chunk moments of a real input: each channel's merged mean and biased variance
match torch's over (N, *), and the running stats move as F.batch_norm moves them; without a GPU.
Needs a host C++ compiler (skipped without one)."""
import ctypes

import pytest
import torch

from support import host_kernel

DRIVER = r"""
#include <cmath>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
#define __launch_bounds__(n)
struct Dim { unsigned x; };
static Dim blockIdx{0}, blockDim{1}, gridDim{1}, threadIdx{0};
inline void __syncthreads() {}
float __shfl_xor_sync(unsigned mask, float v, int offset);  // batch_norm_fwd_channel's, not instantiated here
inline float rsqrtf(float v) { return 1.f / std::sqrt(v); }
#include "norm/batch_norm_fwd.cuh"
using namespace tileops;
extern "C" void stats(const float* ws, float* out, float* rm, float* rv, long long samples, long long channels,
                      int splits, float momentum, int update) {
  constexpr int kT = 4;  // small CTAs: several, and a partial last one
  blockDim.x = kT;
  gridDim.x = static_cast<unsigned>((channels + kT - 1) / kT);
  for (unsigned b = 0; b < gridDim.x; ++b)
    for (unsigned t = 0; t < kT; ++t) {
      blockIdx.x = b;
      threadIdx.x = t;
      if (update) batch_norm_fwd_stats<kT, true>(ws, out, rm, rv, samples, channels, splits, momentum);
      else batch_norm_fwd_stats<kT, false>(ws, out, rm, rv, samples, channels, splits, momentum);
    }
}
"""


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    return host_kernel.build(tmp_path_factory, "bn_host", DRIVER,
                             {"common/dtypes.cuh": host_kernel.FLOAT_DTYPES,
                              "common/reduce.cuh": host_kernel.REDUCE_DECLARATIONS})


def chunk_moments(x, splits):
    """What group_norm_fwd_stats leaves in ws: per row (n * C + c) and chunk, (count, mean, M2)."""
    rows = x.reshape(x.shape[0] * x.shape[1], -1).double()
    chunk = (rows.shape[1] + splits - 1) // splits
    out = torch.zeros(rows.shape[0], splits, 3, dtype=torch.float64)
    for k in range(splits):
        part = rows[:, k * chunk:(k + 1) * chunk]
        if part.shape[1] == 0:
            continue
        mean = part.mean(1)
        out[:, k, 0] = part.shape[1]
        out[:, k, 1] = mean
        out[:, k, 2] = ((part - mean[:, None]) ** 2).sum(1)
    return out.float().contiguous()


@pytest.mark.parametrize("shape,splits", [((3, 5), 1), ((4, 7, 9), 1), ((2, 9, 4, 5), 3), ((5, 6, 11), 4),
                                          ((1, 3, 64), 8)])
@pytest.mark.parametrize("update", [True, False])
def test_stats_merge_matches_torch_and_moves_running_stats(kernel, shape, splits, update):
    torch.manual_seed(0)
    x = torch.randn(shape) * 3 + 1.5
    n, c = shape[0], shape[1]
    ws = chunk_moments(x, splits)
    out = torch.full((2 * c,), float("nan"))
    rm, rv = torch.randn(c), torch.rand(c) + 0.5
    rm_ref, rv_ref = rm.clone(), rv.clone()
    kernel.stats(ctypes.c_void_p(ws.data_ptr()), ctypes.c_void_p(out.data_ptr()), ctypes.c_void_p(rm.data_ptr()),
                 ctypes.c_void_p(rv.data_ptr()), ctypes.c_longlong(n), ctypes.c_longlong(c), ctypes.c_int(splits),
                 ctypes.c_float(0.25), ctypes.c_int(int(update)))
    dims = [0] + list(range(2, x.dim()))
    var, mean = torch.var_mean(x.double(), dim=dims, correction=0)
    torch.testing.assert_close(out[:c].double(), mean, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out[c:].double(), var, rtol=1e-5, atol=1e-5)
    if update:
        torch.nn.functional.batch_norm(x, rm_ref, rv_ref, training=True, momentum=0.25)
        torch.testing.assert_close(rm, rm_ref, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(rv, rv_ref, rtol=1e-5, atol=1e-6)
    else:  # no running stats to move: the kernel never touches them
        assert torch.equal(rm, rm_ref) and torch.equal(rv, rv_ref)
