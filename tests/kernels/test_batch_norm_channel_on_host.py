"""src/kernels/norm/batch_norm_fwd.cuh's batch_norm_fwd_channel (training in one launch) compiled as host
C++, a CTA's threads run as real threads (barriers and warp shuffles emulated), on float32 inputs: each
channel's output, normalised by its batch mean and biased variance, matches a float64 computation, and
the running stats move as F.batch_norm moves them (or stay untouched without UPDATE); 2-d x with several
channels a CTA (a partial last CTA), 3-d to 5-d x with vector and scalar accesses, one and several warps,
weight and bias each present or absent. Which calls take this kernel: test_batch_norm_plan.py. Needs a
host C++ compiler (skipped without one) with C++20's <barrier>."""
import ctypes

import pytest
import torch

from support import host_kernel

DRIVER = host_kernel.CTA_THREADS + r"""
#include "norm/batch_norm_fwd.cuh"
using namespace tileops;

template <int VEC, int CPB, int TPB, int CACHE, bool U, bool W, bool B>
void grid(const float* x, const float* w, const float* b, float* rm, float* rv, float* y, long long n, long long c,
          long long hv, float momentum, float eps) {
  run<TPB>((c + CPB - 1) / CPB, [=] {
    batch_norm_fwd_channel<float, VEC, CPB, TPB, CACHE, U, W, B>(x, w, b, rm, rv, y, n, c, hv, momentum, eps);
  });
}

template <int VEC, int CPB, int TPB, int CACHE>
void config(int flags, const float* x, const float* w, const float* b, float* rm, float* rv, float* y, long long n,
            long long c, long long hv, float momentum, float eps) {
  using F = void (*)(const float*, const float*, const float*, float*, float*, float*, long long, long long,
                     long long, float, float);
  static const F table[8] = {
      grid<VEC, CPB, TPB, CACHE, false, false, false>, grid<VEC, CPB, TPB, CACHE, false, false, true>,
      grid<VEC, CPB, TPB, CACHE, false, true, false>,  grid<VEC, CPB, TPB, CACHE, false, true, true>,
      grid<VEC, CPB, TPB, CACHE, true, false, false>,  grid<VEC, CPB, TPB, CACHE, true, false, true>,
      grid<VEC, CPB, TPB, CACHE, true, true, false>,   grid<VEC, CPB, TPB, CACHE, true, true, true>};
  table[flags](x, w, b, rm, rv, y, n, c, hv, momentum, eps);
}

// flags: 4 update, 2 weight, 1 bias.
extern "C" void channel(int cfg, int flags, const float* x, const float* w, const float* b, float* rm, float* rv,
                        float* y, long long n, long long c, long long hv, float momentum, float eps) {
  switch (cfg) {
    case 0: config<1, 32, 64, 4>(flags, x, w, b, rm, rv, y, n, c, hv, momentum, eps); break;
    case 1: config<1, 4, 32, 4>(flags, x, w, b, rm, rv, y, n, c, hv, momentum, eps); break;
    case 2: config<4, 1, 64, 2>(flags, x, w, b, rm, rv, y, n, c, hv, momentum, eps); break;
    case 3: config<1, 1, 32, 8>(flags, x, w, b, rm, rv, y, n, c, hv, momentum, eps); break;
    case 4: config<1, 1, 128, 1>(flags, x, w, b, rm, rv, y, n, c, hv, momentum, eps); break;
  }
}
"""
# cfg: (VEC, CPB, TPB, CACHE), as in DRIVER.
CONFIGS = {0: (1, 32, 64, 4), 1: (1, 4, 32, 4), 2: (4, 1, 64, 2), 3: (1, 1, 32, 8), 4: (1, 1, 128, 1)}
CASES = [
    (0, (8, 70)),         # 2-d: 32 channels a CTA, the last CTA 6 of them; N fills the cache exactly
    (0, (5, 33)),         # 2-d: a partial last vector row
    (1, (32, 4)),         # 2-d, 4 channels a CTA: butterflies across 8 lanes of a channel
    (1, (7, 3)),          # fewer channels than the CTA's
    (2, (3, 5, 40)),      # 4-wide accesses: 10 a sample, 30 a channel
    (2, (4, 6, 4, 8)),
    (2, (2, 3, 256)),     # 128 vectors: the cache full
    (3, (3, 4, 7)),       # scalar, one warp
    (3, (5, 2, 3, 17)),   # 255 of 256
    (3, (200, 1)),        # 2-d with one channel: a channel a CTA, HW 1
    (4, (2, 5, 9, 7)),    # scalar, 4 warps: the cross-warp sum
    (4, (2, 3, 2, 3, 4)),  # 5-d
]


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    return host_kernel.build(tmp_path_factory, "bn_channel_host", DRIVER,
                             {"common/dtypes.cuh": host_kernel.FLOAT_DTYPES,
                              "common/reduce.cuh": host_kernel.REDUCE_DECLARATIONS}, std="c++20", flags=("-pthread",))


def ptr(t):
    return ctypes.c_void_p(0 if t is None else t.data_ptr())


@pytest.mark.parametrize("cfg,shape", CASES, ids=[f"cfg{c}-{'x'.join(map(str, s))}" for c, s in CASES])
@pytest.mark.parametrize("update", [True, False], ids=["update", "no_update"])
@pytest.mark.parametrize("weight,bias", [(True, True), (False, False), (True, False), (False, True)],
                         ids=["wb", "plain", "w", "b"])
def test_channel_kernel_matches_float64_and_moves_running_stats(kernel, cfg, shape, update, weight, bias):
    vec, cpb, tpb, cache = CONFIGS[cfg]
    n, c = shape[0], shape[1]
    hw = 1
    for s in shape[2:]:
        hw *= s
    assert hw % vec == 0 and n * hw // vec <= tpb // cpb * cache, "the case fits its config, as the plan ensures"
    torch.manual_seed(hash((cfg, shape)) % 1000)
    x = torch.randn(shape) * 3 + 1.5
    w = torch.randn(c) if weight else None
    b = torch.randn(c) if bias else None
    rm, rv = torch.randn(c), torch.rand(c) + 0.5
    rm0, rv0 = rm.clone(), rv.clone()
    y = torch.full(shape, float("nan"))
    momentum, eps = 0.25, 1e-4
    flags = 4 * update + 2 * weight + bias
    kernel.channel(ctypes.c_int(cfg), ctypes.c_int(flags), ptr(x), ptr(w), ptr(b), ptr(rm), ptr(rv), ptr(y),
                   ctypes.c_longlong(n), ctypes.c_longlong(c), ctypes.c_longlong(hw // vec), ctypes.c_float(momentum),
                   ctypes.c_float(eps))
    xd = x.double()
    dims = [0] + list(range(2, x.dim()))
    var, mean = torch.var_mean(xd, dim=dims, correction=0)
    view = [1, c] + [1] * (x.dim() - 2)
    ref = (xd - mean.view(view)) / torch.sqrt(var.view(view) + eps)
    if w is not None:
        ref = ref * w.double().view(view)
    if b is not None:
        ref = ref + b.double().view(view)
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-5)
    if update:
        count = x.numel() // c
        torch.testing.assert_close(rm.double(), 0.75 * rm0.double() + 0.25 * mean, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(rv.double(), 0.75 * rv0.double() + 0.25 * var * count / (count - 1),
                                   rtol=1e-5, atol=1e-6)
        rm_t, rv_t = rm0.clone(), rv0.clone()
        torch.nn.functional.batch_norm(x, rm_t, rv_t, training=True, momentum=momentum)
        torch.testing.assert_close(rm, rm_t, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(rv, rv_t, rtol=1e-5, atol=1e-6)
    else:  # no running stats to move: the kernel never touches them
        assert torch.equal(rm, rm0) and torch.equal(rv, rv0)
