"""Pool family on the GPU (nvrtc target, src/kernels/pool/pool_fwd.cuh) against torch on CUDA: every
op, dtype and param combination of tests/support/pool_cases.py, so every plan (dtype x rank x
avg/max x adaptive); max pools exactly (NaN included), avg pools within the output dtype's rounding
(both sum in float32, in possibly other orders); unbatched, empty, non-contiguous, 64-bit-indexed
inputs; build keys, CUDA graphs and torch.compile. Skipped without a GPU (conftest)."""
import os

import pytest
import torch
import torch._dynamo
import yaml

import tileops
import tileops.pool as pool_classes
from support.pool_cases import (BY_STEM, POOLS, SIZES, WIDE_CASES, WIDE_LOAD_CASES, WIDE_LOAD_LARGE, call, params_for,
                                reference, sample)
from support.graphs import GraphRecorder

pytestmark = pytest.mark.gpu
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IDS = [p.stem for p in POOLS]
# avg: both sides sum in float32 and round once, so they differ by the float32 sum's order (a few
# float32 ulps of the sum) plus one rounding step of the output dtype.
AVG_TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float16: dict(rtol=1e-3, atol=1e-3),
           torch.bfloat16: dict(rtol=8e-3, atol=8e-3)}


def check(pool, y, x, params):
    expect = reference(pool, x, params)
    assert y.shape == expect.shape and y.dtype == x.dtype and y.is_contiguous() and y.device == x.device
    if pool.stem.startswith("max") or pool.stem.startswith("adaptive_max"):
        torch.testing.assert_close(y, expect, rtol=0, atol=0, equal_nan=True)  # exact: the chosen element
    else:
        torch.testing.assert_close(y, expect, equal_nan=True, **AVG_TOL[x.dtype])  # a NaN in a window: NaN


def cases():
    for pool in POOLS:
        for size in SIZES[pool.rank]:
            for params in params_for(pool, size):
                yield pytest.param(pool, size, params, id=f"{pool.stem}-{'x'.join(map(str, size))}-{params}")


@pytest.mark.parametrize("pool,size,params", list(cases()))
def test_matches_torch_on_cuda(pool, size, params):
    for dtype in pool.dtypes:
        x = sample((2, 3, *size), dtype, device="cuda", nan=pool.kind != "avg")
        try:
            reference(pool, x, params)
        except RuntimeError:
            with pytest.raises((RuntimeError, ValueError), match=f"tileops::{pool.name}"):
                call(pool, x, params)
            continue
        check(pool, call(pool, x, params), x, params)


@pytest.mark.parametrize("pool", POOLS, ids=IDS)
def test_manifest_workloads(pool):
    with open(os.path.join(ROOT, "manifests", "pool.yaml")) as f:
        workloads = yaml.safe_load(f)[pool.cls]["workloads"]
    for wl in workloads:
        for d in wl["dtypes"]:
            x = sample(wl["input"], getattr(torch, d), device="cuda", nan=pool.kind != "avg")
            check(pool, call(pool, x, wl["params"]), x, wl["params"])


@pytest.mark.parametrize("pool", POOLS, ids=IDS)
def test_unbatched_empty_and_non_contiguous(pool, counters):
    size = SIZES[pool.rank][1]
    params = params_for(pool, size)[1]
    dtype = pool.dtypes[-1]
    x = sample((3, *size), dtype, device="cuda")
    check(pool, call(pool, x, params), x, params)
    e = sample((0, 3, *size), dtype, device="cuda")
    before = counters()["kernel_builds"]
    assert call(pool, e, params).numel() == 0
    assert counters()["kernel_builds"] == before  # an empty output consults no target
    big = sample((2, 3, *[2 * d for d in size]), dtype, device="cuda")
    nc = big[..., *([slice(1, None, 2)] * pool.rank)]
    assert not nc.is_contiguous()
    check(pool, call(pool, nc, params), nc, params)
    ch_last = sample((2, 3, *size), dtype, device="cuda").movedim(1, -1).contiguous().movedim(-1, 1)
    check(pool, call(pool, ch_last, params), ch_last, params)


def test_windows_of_every_size_and_large_kernels():
    for dtype in (torch.float16, torch.float32):
        x = sample((4, 8, 301), dtype, device="cuda", nan=False)
        for k in (1, 2, 5, 64, 128, 301):
            for stem in ("avg_pool1d", "max_pool1d"):
                params = {"kernel_size": k, "stride": 1 + k // 3, "padding": k // 2, "ceil_mode": True}
                check(BY_STEM[stem], call(BY_STEM[stem], x, params), x, params)
        # 2-D and 3-D windows either side of the 128 taps the code can hold (121 and 125 in the code,
        # 144 and 150 read from the geometry)
        for stem, shape, ks in (("avg_pool2d", (2, 8, 40, 41), ([11, 11], [12, 12])),
                                ("max_pool2d", (2, 8, 40, 41), ([11, 11], [12, 12])),
                                ("avg_pool3d", (2, 4, 12, 13, 14), ([5, 5, 5], [5, 5, 6])),
                                ("max_pool3d", (2, 4, 12, 13, 14), ([5, 5, 5], [5, 5, 6]))):
            v = sample(shape, dtype, device="cuda")
            for k in ks:
                params = {"kernel_size": k, "stride": 2, "padding": 2, "ceil_mode": True}
                check(BY_STEM[stem], call(BY_STEM[stem], v, params), v, params)
        a = sample((2, 16, 55, 57), torch.bfloat16 if dtype == torch.float32 else dtype, device="cuda")
        for o in ([1, 1], [7, 7], [55, 57], [60, 100], [3, 56]):
            for stem in ("adaptive_avg_pool2d", "adaptive_max_pool2d"):
                check(BY_STEM[stem], call(BY_STEM[stem], a, {"output_size": o}), a, {"output_size": o})


@pytest.mark.parametrize("stem,shape,params", WIDE_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(WIDE_CASES)])
def test_wide_windows_a_warp_an_output(stem, shape, params):
    """Windows of 32+ taps in a row (pool_fwd_warp): each dtype, a NaN in one window, and a
    channels-last copy (the boundary makes it contiguous)."""
    pool = BY_STEM[stem]
    for dtype in pool.dtypes:
        x = sample(shape, dtype, device="cuda", nan=pool.kind != "avg")
        check(pool, call(pool, x, params), x, params)
        if len(shape) == 4:
            cl = x.contiguous(memory_format=torch.channels_last)
            check(pool, call(pool, cl, params), cl, params)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("stem,shape,params", WIDE_LOAD_CASES + WIDE_LOAD_LARGE,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(WIDE_LOAD_CASES + WIDE_LOAD_LARGE)])
def test_vector_rows(stem, shape, params, dtype):
    """pool_fwd_wide's windows (one 16-byte vector a row for P outputs; max exactly, avg within the
    dtype's rounding), and the same call with x one element off 16-byte alignment (pool_fwd)."""
    pool = BY_STEM[stem]
    x = sample(shape, dtype, "cuda", nan=pool.kind != "avg").contiguous()
    check(pool, call(pool, x, params), x, params)
    off = torch.empty(x.numel() + 1, device="cuda", dtype=dtype)[1:].view(shape)
    off.copy_(x)
    assert off.data_ptr() % 16 != 0
    check(pool, call(pool, off, params), off, params)


def test_wide_windows_share_one_kernel(counters):
    """The warp kernel reads its window from the call: windows of 32+ taps of one (op, dtype, index
    type) build once for each lanes an output (8 up to 64 taps, 16 up to 256, else 32); 31 taps go to
    the thread kernel, its window in the code."""
    tileops.clear_kernel_caches()
    pool = BY_STEM["max_pool1d"]
    x = sample((4, 8, 301), torch.float16, device="cuda", nan=True)
    for k, expect in ((32, 1), (64, 1), (40, 1), (128, 2), (200, 2), (301, 3), (31, 4)):
        params = {"kernel_size": k, "stride": 3, "padding": k // 2}
        check(pool, call(pool, x, params), x, params)
        assert counters()["kernel_builds"] == expect, k


def test_max_pool_nan_and_infinities_exactly():
    x = torch.full((2, 4, 9, 9), float("-inf"), device="cuda", dtype=torch.bfloat16)
    x[0, 0, 4, 4] = float("nan")
    x[1, 1, 0, 0] = float("inf")
    for stem, params in (("max_pool2d", {"kernel_size": 3, "stride": 2, "padding": 1}),
                         ("adaptive_max_pool2d", {"output_size": [4, 4]})):
        y = call(BY_STEM[stem], x, params)
        check(BY_STEM[stem], y, x, params)
        assert torch.isnan(y[0, 0]).any() and torch.isinf(y[1, 1]).any()


def test_indices_past_32_bits():
    # 2^31 + 2^20 elements of float16 (4 GiB): the plane and window offsets need 64-bit math
    n = (1 << 31) + (1 << 20)
    try:
        x = torch.empty((1, 1, n), device="cuda", dtype=torch.float16)
    except torch.OutOfMemoryError:
        pytest.skip("needs 4 GiB of GPU memory")
    x.uniform_(-1, 1)
    x[0, 0, -3] = 7.0
    for stem in ("max_pool1d", "avg_pool1d"):
        params = {"kernel_size": 4, "stride": 4}
        y = call(BY_STEM[stem], x, params)
        # torch on slices of 2^30 elements (whole windows): an oracle that needs no 64-bit index math
        expect = torch.cat([reference(BY_STEM[stem], x[..., s:s + (1 << 30)], params) for s in range(0, n, 1 << 30)],
                           dim=-1)
        assert y.shape == expect.shape
        tol = AVG_TOL[x.dtype] if stem == "avg_pool1d" else dict(rtol=0, atol=0)
        torch.testing.assert_close(y, expect, equal_nan=True, **tol)
        if stem == "max_pool1d":
            assert y[0, 0, -1] == 7.0  # the window of x[..., -3]
    del x, y
    big = torch.randn((1 << 16) + 1, 2, 128, 128, device="cuda", dtype=torch.bfloat16)  # > 2^31 elements
    check(BY_STEM["max_pool2d"], call(BY_STEM["max_pool2d"], big, {"kernel_size": 2}), big, {"kernel_size": 2})


@pytest.mark.parametrize("pool", POOLS, ids=IDS)
def test_long_long_index_plans(pool, counters):
    """Each op's long long plan on small tensors: a stride of 2^30 (non-adaptive) or an adaptive bin
    bound (o + 1) * in past 2^30 makes int index math unsafe (pool_index_bits), so the plan widens."""
    for dtype in pool.dtypes:
        if pool.kind == "adaptive":
            x = sample((1, 2, 3, 40000), dtype, device="cuda", nan=True)
            params = {"output_size": [2, 30000]}
            # torch's CUDA kernel forms the bin bounds in float32, which rounds at this size; its CPU
            # kernel and ours use exact integers
            expect = reference(pool, x.cpu(), params).cuda()
        else:
            x = sample((2, 3, *([5] * pool.rank)), dtype, device="cuda", nan=pool.kind == "max")
            params = {"kernel_size": 2, "stride": 1 << 30}
            expect = reference(pool, x, params)
        before = counters()["kernel_builds"]
        y = call(pool, x, params)
        assert counters()["kernel_builds"] <= before + 1
        assert y.shape == expect.shape
        if pool.kind == "max" or pool.stem == "adaptive_max_pool2d":
            torch.testing.assert_close(y, expect, rtol=0, atol=0, equal_nan=True)
        else:
            torch.testing.assert_close(y, expect, equal_nan=True, **AVG_TOL[dtype])


def test_reference_target_on_cuda_agrees():
    x = torch.randn(2, 8, 20, 21, device="cuda", dtype=torch.float32)
    for stem, params in (("avg_pool2d", {"kernel_size": 3, "padding": 1}), ("max_pool2d", {"kernel_size": 3})):
        torch.testing.assert_close(call(BY_STEM[stem], x, params), call(BY_STEM[stem], x, params, target="reference"),
                                   rtol=1e-5, atol=1e-6)


def test_build_keys(counters):
    tileops.clear_kernel_caches()
    avg = BY_STEM["avg_pool2d"]
    x = torch.randn(2, 3, 16, 16, device="cuda", dtype=torch.float16)
    call(avg, x, {"kernel_size": 2})
    assert counters()["kernel_builds"] == 1
    # sizes, ceil_mode, count_include_pad and divisor_override are launch arguments: the same kernel
    call(avg, torch.randn(5, 7, 9, 40, device="cuda", dtype=torch.float16),
         {"kernel_size": 2, "ceil_mode": True, "count_include_pad": False, "divisor_override": 2})
    assert counters()["kernel_builds"] == 1
    call(avg, x, {"kernel_size": 3, "padding": 1})  # a small window is in the code: a kernel of its own
    assert counters()["kernel_builds"] == 2
    call(avg, x, {"kernel_size": 12})  # 144 taps: the window is a launch argument
    call(avg, x, {"kernel_size": [13, 11], "stride": 1})  # so this one shares that kernel
    assert counters()["kernel_builds"] == 3
    call(avg, x.float(), {"kernel_size": 2})          # another dtype
    call(BY_STEM["max_pool2d"], x, {"kernel_size": 2})  # max
    call(BY_STEM["adaptive_avg_pool2d"], x, {"output_size": 2})  # adaptive
    call(BY_STEM["avg_pool3d"], x.view(2, 3, 1, 16, 16), {"kernel_size": [1, 2, 2]})  # rank 3
    assert counters()["kernel_builds"] == 7


# Max pools with a window in the code whose output rows hold 64 outputs or more: two neighbouring
# outputs a thread (the cases above have shorter rows, one a thread); odd row lengths leave a last
# pair of one output. Dilation 2 or a padded window keeps them off the 16-byte rows of pool_fwd_wide.
LONG_ROW_CASES = [
    ("max_pool1d", (2, 3, 301), {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2}),
    ("max_pool2d", (2, 3, 5, 150), {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2}),
    ("max_pool2d", (1, 4, 9, 131), {"kernel_size": [2, 3], "stride": 1, "dilation": [1, 2], "ceil_mode": True}),
    ("max_pool3d", (1, 2, 3, 4, 140), {"kernel_size": 2, "stride": [1, 2, 1], "dilation": [1, 1, 2]}),
    ("max_pool3d", (2, 2, 5, 6, 133), {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2,
                                      "ceil_mode": True}),
]


@pytest.mark.parametrize("stem,shape,params", LONG_ROW_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(LONG_ROW_CASES)])
def test_long_rows_two_outputs_a_thread(stem, shape, params, counters):
    pool = BY_STEM[stem]
    tileops.clear_kernel_caches()
    for dtype in pool.dtypes:
        x = sample(shape, dtype, device="cuda", nan=True)
        check(pool, call(pool, x, params), x, params)
    builds = counters()["kernel_builds"]
    # the same window on rows of under 64 outputs: one output a thread, a kernel of its own
    short = sample((*shape[:-1], 40), torch.float32, device="cuda", nan=True)
    check(pool, call(pool, short, params), short, params)
    assert counters()["kernel_builds"] == builds + 1


def test_cuda_graph_after_warm_up_replays_correctly():
    pool = BY_STEM["max_pool2d"]
    params = {"kernel_size": 3, "stride": 2, "padding": 1}
    x = torch.randn(4, 16, 33, 33, device="cuda", dtype=torch.bfloat16)
    call(pool, x, params)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = call(pool, x, params)
    for _ in range(2):
        x.copy_(torch.randn_like(x))
        g.replay()
        torch.cuda.synchronize()
        check(pool, y, x, params)


def test_compile_one_node_dynamic_batch():
    torch._dynamo.reset()
    rec = GraphRecorder(inductor=True)

    op = pool_classes.AvgPool2dFwdOp(kernel_size=3, stride=2, padding=1, count_include_pad=False)
    fn = torch.compile(op, fullgraph=True, backend=rec, dynamic=True)
    for n in (2, 3, 5):
        x = torch.randn(n, 8, 24, 24, device="cuda", dtype=torch.float16)
        check(BY_STEM["avg_pool2d"], fn(x), x, {"kernel_size": 3, "stride": 2, "padding": 1,
                                                 "count_include_pad": False})
    assert len(rec.graphs) == 1
