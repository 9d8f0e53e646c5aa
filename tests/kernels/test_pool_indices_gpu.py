"""The max pools with indices on the GPU (nvrtc target) against torch's CUDA kernels with
return_indices=True: values and int64 indices equal on every param combination of the pool tests,
on inputs full of ties and NaNs, on the manifest's workloads, unbatched, non-contiguous and
empty-batch inputs, and under CUDA graph replay. Skipped without a GPU (conftest)."""
import pytest
import torch

from support.pool_cases import BY_STEM, SIZES, params_for
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
