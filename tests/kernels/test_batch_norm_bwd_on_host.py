"""src/kernels/norm/batch_norm_bwd.cuh compiled as host C++, a CTA's threads run as real threads (barriers
and warp shuffles emulated), on float32 inputs: batch_norm_bwd_channel (one launch, a channel in
registers) and the chunked path (batch_norm_bwd_partial, batch_norm_bwd_reduce, batch_norm_bwd_dx) give
dx, dweight and dbias of a float64 computation of the manifest's formula; 2-d x with several channels a
CTA (a partial last CTA), 3-d to 5-d x with vector and scalar accesses, one and several warps, one chunk
and several (a short last one, chunks past the end). Which calls take which path:
test_batch_norm_bwd_plan.py. Needs a host C++ compiler (skipped without one) with C++20's <barrier>."""
import ctypes

import pytest
import torch

from support import host_kernel

DRIVER = host_kernel.CTA_THREADS + r"""
#include "norm/batch_norm_bwd.cuh"
using namespace tileops;

template <int VEC, int CPB, int TPB, int CACHE>
void channel_path(const float* dy, const float* x, const float* w, const float* mean, const float* rstd, float* dx,
                  float* dw, float* db, long long n, long long c, long long hv) {
  run<TPB>((c + CPB - 1) / CPB, [=] {
    batch_norm_bwd_channel<float, VEC, CPB, TPB, CACHE>(dy, x, w, mean, rstd, dx, dw, db, n, c, hv);
  });
}

template <int VEC, int CPB, int TPB>
void chunk_path(const float* dy, const float* x, const float* w, const float* mean, const float* rstd, float* dx,
                float* dw, float* db, long long n, long long c, long long hv, int splits) {
  const long long lv = n * hv, chunk = (lv + splits - 1) / splits, grid = (c + CPB - 1) / CPB * splits;
  std::vector<float> ws(static_cast<size_t>(c * splits * 2), NAN);
  float* wsp = ws.data();
  run<TPB>(grid, [=] {
    batch_norm_bwd_partial<float, VEC, CPB, TPB>(dy, x, mean, rstd, wsp, c, hv, lv, chunk, splits);
  });
  run<32>((c + 31) / 32, [=] { batch_norm_bwd_reduce<32>(wsp, dw, db, c, splits); });
  run<TPB>(grid, [=] {
    batch_norm_bwd_dx<float, VEC, CPB, TPB>(dy, x, w, mean, rstd, dw, db, dx, c, hv, lv, chunk, splits);
  });
}

extern "C" void channel(int cfg, const float* dy, const float* x, const float* w, const float* mean,
                        const float* rstd, float* dx, float* dw, float* db, long long n, long long c, long long hv) {
  switch (cfg) {
    case 0: channel_path<1, 32, 64, 4>(dy, x, w, mean, rstd, dx, dw, db, n, c, hv); break;
    case 1: channel_path<1, 4, 32, 4>(dy, x, w, mean, rstd, dx, dw, db, n, c, hv); break;
    case 2: channel_path<4, 1, 64, 2>(dy, x, w, mean, rstd, dx, dw, db, n, c, hv); break;
    case 3: channel_path<1, 1, 32, 8>(dy, x, w, mean, rstd, dx, dw, db, n, c, hv); break;
    case 4: channel_path<1, 1, 128, 1>(dy, x, w, mean, rstd, dx, dw, db, n, c, hv); break;
  }
}

extern "C" void chunks(int cfg, const float* dy, const float* x, const float* w, const float* mean,
                       const float* rstd, float* dx, float* dw, float* db, long long n, long long c, long long hv,
                       int splits) {
  switch (cfg) {
    case 0: chunk_path<1, 32, 64>(dy, x, w, mean, rstd, dx, dw, db, n, c, hv, splits); break;
    case 1: chunk_path<1, 4, 32>(dy, x, w, mean, rstd, dx, dw, db, n, c, hv, splits); break;
    case 2: chunk_path<4, 1, 64>(dy, x, w, mean, rstd, dx, dw, db, n, c, hv, splits); break;
    case 3: chunk_path<1, 1, 32>(dy, x, w, mean, rstd, dx, dw, db, n, c, hv, splits); break;
    case 4: chunk_path<2, 1, 128>(dy, x, w, mean, rstd, dx, dw, db, n, c, hv, splits); break;
  }
}
"""
# channel cfg: (VEC, CPB, TPB, CACHE); chunk cfg: (VEC, CPB, TPB), as in DRIVER.
CHANNEL = {0: (1, 32, 64, 4), 1: (1, 4, 32, 4), 2: (4, 1, 64, 2), 3: (1, 1, 32, 8), 4: (1, 1, 128, 1)}
CHUNK = {0: (1, 32, 64), 1: (1, 4, 32), 2: (4, 1, 64), 3: (1, 1, 32), 4: (2, 1, 128)}
CHANNEL_CASES = [
    (0, (8, 70)),          # 2-d: 32 channels a CTA, the last CTA 6 of them; N fills the cache exactly
    (0, (5, 33)),          # 2-d: a partial last vector row
    (1, (32, 4)),          # 2-d, 4 channels a CTA: butterflies across 8 lanes of a channel
    (1, (7, 3)),           # fewer channels than the CTA's
    (2, (3, 5, 40)),       # 4-wide accesses: 10 a sample, 30 a channel
    (2, (2, 3, 256)),      # 128 vectors: the cache full
    (3, (3, 4, 7)),        # scalar, one warp
    (3, (5, 2, 3, 17)),    # 255 of 256
    (3, (200, 1)),         # 2-d with one channel: a channel a CTA, HW 1
    (4, (2, 5, 9, 7)),     # scalar, 4 warps: the cross-warp sums
    (4, (2, 3, 2, 3, 4)),  # 5-d
    (3, (0, 3, 5)),        # an empty batch: zero sums, nothing written to dx
]
CHUNK_CASES = [
    (0, (300, 70), 1),       # 2-d, 32 channels a CTA, one chunk
    (0, (301, 40), 4),       # a short last chunk
    (1, (50, 6), 3),
    (2, (3, 5, 40), 2),      # 4-wide accesses, chunks crossing samples
    (2, (4, 3, 64), 7),
    (3, (5, 2, 3, 17), 5),   # scalar, one warp
    (3, (2, 3, 5), 16),      # more chunks than vectors: empty chunks add zeros
    (4, (3, 4, 6, 10), 3),   # 2-wide, 4 warps
    (4, (2, 3, 2, 3, 4), 2),  # 5-d
]


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    return host_kernel.build(tmp_path_factory, "bn_bwd_host", DRIVER,
                             {"common/dtypes.cuh": host_kernel.FLOAT_DTYPES,
                              "common/reduce.cuh": host_kernel.REDUCE_DECLARATIONS}, std="c++20", flags=("-pthread",))


def ptr(t):
    return ctypes.c_void_p(t.data_ptr())


def inputs(shape, seed):
    torch.manual_seed(seed)
    c = shape[1]
    x = torch.randn(shape) * 2 + 0.5
    dy = torch.randn(shape)
    dims = [0] + list(range(2, x.dim()))
    if x.numel():
        var, mean = torch.var_mean(x.double(), dim=dims, correction=0)
        mean, rstd = mean.float(), torch.rsqrt(var + 1e-5).float()
    else:
        mean, rstd = torch.randn(c), torch.rand(c) + 0.5
    return dy, x, torch.randn(c), mean, rstd


def expected(dy, x, w, mean, rstd):
    """The manifest's formula in float64."""
    c = x.shape[1]
    view = [1, c] + [1] * (x.dim() - 2)
    dims = [0] + list(range(2, x.dim()))
    dyd = dy.double()
    xh = (x.double() - mean.double().view(view)) * rstd.double().view(view)
    db, dw = dyd.sum(dims), (dyd * xh).sum(dims)
    m = max(x.numel() // c, 1)
    dx = w.double().view(view) * rstd.double().view(view) * (dyd - db.view(view) / m - xh * dw.view(view) / m)
    return dx, dw, db


def outputs(shape):
    c = shape[1]
    return torch.full(shape, float("nan")), torch.full((c,), float("nan")), torch.full((c,), float("nan"))


def check(got, want):
    for g, e in zip(got, want):
        torch.testing.assert_close(g.double(), e, rtol=1e-5, atol=1e-4)


def hv_of(shape, vec):
    hw = 1
    for s in shape[2:]:
        hw *= s
    assert hw % vec == 0
    return hw // vec


@pytest.mark.parametrize("cfg,shape", CHANNEL_CASES, ids=[f"cfg{c}-{'x'.join(map(str, s))}" for c, s in CHANNEL_CASES])
def test_channel_kernel_matches_float64(kernel, cfg, shape):
    vec, cpb, tpb, cache = CHANNEL[cfg]
    n, c = shape[0], shape[1]
    hv = hv_of(shape, vec)
    assert n * hv <= tpb // cpb * cache, "the case fits its config, as the plan ensures"
    dy, x, w, mean, rstd = inputs(shape, hash((cfg, shape)) % 1000)
    dx, dw, db = outputs(shape)
    kernel.channel(ctypes.c_int(cfg), ptr(dy), ptr(x), ptr(w), ptr(mean), ptr(rstd), ptr(dx), ptr(dw), ptr(db),
                   ctypes.c_longlong(n), ctypes.c_longlong(c), ctypes.c_longlong(hv))
    check((dx, dw, db), expected(dy, x, w, mean, rstd))


@pytest.mark.parametrize("cfg,shape,splits", CHUNK_CASES,
                         ids=[f"cfg{c}-{'x'.join(map(str, s))}-s{k}" for c, s, k in CHUNK_CASES])
def test_chunked_kernels_match_float64(kernel, cfg, shape, splits):
    vec, cpb, tpb = CHUNK[cfg]
    n, c = shape[0], shape[1]
    hv = hv_of(shape, vec)
    dy, x, w, mean, rstd = inputs(shape, hash((cfg, shape, splits)) % 1000)
    dx, dw, db = outputs(shape)
    kernel.chunks(ctypes.c_int(cfg), ptr(dy), ptr(x), ptr(w), ptr(mean), ptr(rstd), ptr(dx), ptr(dw), ptr(db),
                  ctypes.c_longlong(n), ctypes.c_longlong(c), ctypes.c_longlong(hv), ctypes.c_int(splits))
    check((dx, dw, db), expected(dy, x, w, mean, rstd))


def test_the_two_paths_agree_and_the_statistics_are_read_not_recomputed(kernel):
    """mean and rstd other than x's own batch statistics change the result as the formula says."""
    shape = (4, 3, 16)
    dy, x, w, _, _ = inputs(shape, 7)
    mean, rstd = torch.randn(3), torch.rand(3) + 0.5
    got = []
    for fn, cfg, extra in ((kernel.channel, 3, ()), (kernel.chunks, 3, (ctypes.c_int(3),))):
        dx, dw, db = outputs(shape)
        fn(ctypes.c_int(cfg), ptr(dy), ptr(x), ptr(w), ptr(mean), ptr(rstd), ptr(dx), ptr(dw), ptr(db),
           ctypes.c_longlong(4), ctypes.c_longlong(3), ctypes.c_longlong(16), *extra)
        check((dx, dw, db), expected(dy, x, w, mean, rstd))
        got.append((dx, dw, db))
    for a, b in zip(*got):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
