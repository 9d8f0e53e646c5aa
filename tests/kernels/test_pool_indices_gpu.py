"""The max pools with indices on the GPU (nvrtc target) against torch's CUDA kernels with
return_indices=True: values and int64 indices equal on every param combination of the pool tests,
on inputs full of ties and NaNs, on the manifest's workloads, windows of 32+ taps in a row and windows too
large to be written into a kernel, unbatched, non-contiguous and empty-batch inputs, and under CUDA
graph replay. Skipped without a GPU (conftest)."""
import pytest
import torch

import tileops
from support.pool_cases import BY_STEM, SIZES, WIDE_CASES, params_for
from support.pool_indices_cases import STEMS, assert_same, call, cases, reference, ties_and_nans

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("stem,size,params", [pytest.param(*c, id=f"{c[0]}-{'x'.join(map(str, c[1]))}-{c[2]}")
                                              for c in cases()])
def test_matches_torch_cuda(stem, size, params):
    for dtype in BY_STEM[stem].dtypes:
        x = ties_and_nans((2, 3, *size), dtype, device="cuda", seed=sum(size))
        assert_same(call(stem, x, params), reference(stem, x, params))
        xr = torch.randn(2, 3, *size, device="cuda").to(dtype)  # spread values: few ties
        assert_same(call(stem, xr, params), reference(stem, xr, params))


WORKLOADS = [
    ("max_pool1d", (32, 80, 4096), {"kernel_size": 3, "stride": 3}),
    ("max_pool1d", (16, 128, 2048), {"kernel_size": 5, "stride": 2, "padding": 2, "dilation": 2, "ceil_mode": True}),
    ("max_pool2d", (32, 64, 112, 112), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ("max_pool2d", (8, 64, 224, 224), {"kernel_size": 2, "stride": 2}),
    ("max_pool3d", (4, 128, 16, 56, 56), {"kernel_size": 2, "stride": 2}),
    ("adaptive_max_pool2d", (2, 128, 56, 56), {"output_size": [6, 6]}),
    ("adaptive_max_pool2d", (2, 64, 55, 57), {"output_size": [7, 7]}),
]


@pytest.mark.parametrize("stem,shape,params", WORKLOADS, ids=[f"{w[0]}-{'x'.join(map(str, w[1]))}" for w in WORKLOADS])
def test_workloads(stem, shape, params):
    for dtype in BY_STEM[stem].dtypes:
        x = ties_and_nans(shape, dtype, device="cuda", seed=len(shape))
        assert_same(call(stem, x, params), reference(stem, x, params))


# windows of 32+ taps in a row (the value pools' warp cases), and windows past what pool_small_window
# writes into a kernel (over 128 taps, or a value of 256 or more): the window a launch argument
LARGE_WINDOWS = [c for c in WIDE_CASES if "max" in c[0]] + [
    ("max_pool1d", (2, 3, 700), {"kernel_size": 300, "stride": 7, "padding": 150}),
    ("max_pool1d", (2, 3, 400), {"kernel_size": 130, "stride": 5, "padding": 60, "dilation": 2, "ceil_mode": True}),
    ("max_pool2d", (2, 3, 20, 21), {"kernel_size": 12, "stride": 3, "padding": 5}),
    ("max_pool3d", (1, 3, 6, 9, 10), {"kernel_size": [3, 5, 9], "stride": [1, 2, 3], "padding": [1, 2, 4],
                                      "ceil_mode": True}),
]


@pytest.mark.parametrize("stem,shape,params", LARGE_WINDOWS,
                         ids=[f"{c[0]}-{'x'.join(map(str, c[1]))}-{c[2]}" for c in LARGE_WINDOWS])
def test_large_windows(stem, shape, params):
    for dtype in BY_STEM[stem].dtypes:
        x = ties_and_nans(shape, dtype, device="cuda", seed=3)
        assert_same(call(stem, x, params), reference(stem, x, params))


def test_a_small_window_is_in_the_code_a_large_one_a_launch_argument(counters):
    tileops.clear_kernel_caches()
    x = ties_and_nans((2, 3, 40, 40), torch.float16, device="cuda")
    call("max_pool2d", x, {"kernel_size": 3, "stride": 2, "padding": 1})
    assert counters()["kernel_builds"] == 1
    # sizes, ceil_mode and the index's plane are launch arguments: the same kernel
    call("max_pool2d", ties_and_nans((5, 9, 33), torch.float16, device="cuda"),
         {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True})
    assert counters()["kernel_builds"] == 1
    call("max_pool2d", x, {"kernel_size": 2})  # another window in the code: a kernel of its own
    assert counters()["kernel_builds"] == 2
    call("max_pool2d", x, {"kernel_size": 12})  # 144 taps: the window is a launch argument
    call("max_pool2d", x, {"kernel_size": [13, 11], "stride": 1})  # so this one shares that kernel
    assert counters()["kernel_builds"] == 3


@pytest.mark.parametrize("stem", STEMS)
def test_unbatched_non_contiguous_empty_and_graph_replay(stem):
    pool = BY_STEM[stem]
    size = SIZES[pool.rank][0]
    params = params_for(pool, size)[1]
    dtype = pool.dtypes[0]
    x = ties_and_nans((3, *size), dtype, device="cuda", seed=5)
    assert_same(call(stem, x, params), reference(stem, x, params))
    big = ties_and_nans((2, 3, *[2 * d for d in size]), dtype, device="cuda", seed=6)
    nc = big[..., *([slice(None, None, 2)] * pool.rank)]
    assert_same(call(stem, nc, params), reference(stem, nc.contiguous(), params))
    y, i = call(stem, torch.empty(0, 3, *size, device="cuda", dtype=dtype), params)
    assert y.numel() == 0 and i.numel() == 0
    x = ties_and_nans((4, 3, *size), dtype, device="cuda", seed=7)
    call(stem, x, params)  # warm-up: builds the kernel
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        got = call(stem, x, params)
    x.copy_(ties_and_nans((4, 3, *size), dtype, device="cuda", seed=8))
    g.replay()
    torch.cuda.synchronize()
    assert_same(got, reference(stem, x, params))


def test_64_bit_index_math_past_2_pow_30_elements():
    # 2^30 + 1024 input elements: past what the int index path takes (pool_index_bits), so the
    # long long kernel runs; the last outputs lie past 2^29.
    x = torch.randn(1, 1, (1 << 30) + 1024, device="cuda", dtype=torch.float16)
    assert_same(call("max_pool1d", x, {"kernel_size": 3, "stride": 2, "padding": 1}),
                reference("max_pool1d", x, {"kernel_size": 3, "stride": 2, "padding": 1}))
