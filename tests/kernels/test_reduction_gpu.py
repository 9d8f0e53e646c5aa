"""Softmax / log-softmax on the GPU (nvrtc target): correctness against float64 torch, -inf/NaN rows
against torch on the GPU, non-last dims, misaligned/non-contiguous inputs, the split path for long
rows, build keys, CUDA graphs and torch.compile. Skipped without a GPU (conftest)."""
import pytest
import torch
import torch._dynamo

import tileops
from tileops.reduction import LogSoftmaxFwdOp, SoftmaxFwdOp
from support.graphs import GraphRecorder

pytestmark = pytest.mark.gpu
SOFTMAX = torch.ops.tileops.reduction_softmax_fwd
LOG_SOFTMAX = torch.ops.tileops.reduction_log_softmax_fwd
OPS = [(SOFTMAX, torch.softmax), (LOG_SOFTMAX, torch.log_softmax)]
IDS = ["softmax", "log_softmax"]
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
# Output rounding of the dtype (one or two ulps). Softmax values of long rows are tiny (~1/n), so
# they are compared relatively (atol only covers flushed subnormals); log_softmax's error is absolute
# (eps times |x - max| + log(sum)), so it gets an atol of the same size as its rtol.
TOL = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
TINY = {torch.float32: 1e-30, torch.float16: 1.2e-7, torch.bfloat16: 1e-30}


def check(y, x, ref_fn, dim=-1):
    """y against ref_fn computed in float64 on the same (rounded) inputs, rounded to x's dtype."""
    ref = ref_fn(x.double(), dim).to(x.dtype)
    assert y.shape == x.shape and y.dtype == x.dtype and y.is_contiguous()
    atol = 2 * TOL[x.dtype] if ref_fn is torch.log_softmax else TINY[x.dtype]
    torch.testing.assert_close(y.float(), ref.float(), rtol=2 * TOL[x.dtype], atol=atol, equal_nan=True)


@pytest.mark.parametrize("op,ref", OPS, ids=IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 7, 128, 1000, 4096, 4104, 32000, 32768, 100003, 128256])
@pytest.mark.parametrize("m", [1, 4, 300])
def test_last_dim_matches_float64(op, ref, dtype, n, m):
    x = (torch.randn(m, n, device="cuda") * 3).to(dtype)
    check(op(x), x, ref)


@pytest.mark.parametrize("op,ref", OPS, ids=IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_non_last_dims(op, ref, dtype):
    x = (torch.randn(3, 257, 5, 64, device="cuda") * 2).to(dtype)
    for d in range(-4, 4):
        check(op(x, d), x, ref, d)


@pytest.mark.parametrize("op,ref", OPS, ids=IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_non_contiguous_and_misaligned_inputs(op, ref, dtype):
    base = torch.randn(512, 300, device="cuda", dtype=dtype)
    x = base[:, 1:257]  # non-contiguous rows starting off 16-byte alignment
    check(op(x), x, ref)
    flat = torch.randn(1 + 8 * 256, device="cuda", dtype=dtype)[1:].view(8, 256)
    assert flat.is_contiguous() and flat.data_ptr() % 16 != 0  # the narrow-access kernel
    check(op(flat), flat, ref)
    xt = torch.randn(256, 512, device="cuda", dtype=dtype).t()
    check(op(xt, 0), xt, ref, 0)


@pytest.mark.parametrize("op,ref", OPS, ids=IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [256, 1000, 4096, 8192])
def test_more_rows_than_resident_ctas(op, ref, dtype, n):
    # 9001 rows: several waves of CTAs (and, for a grid that walks rows, several rows a CTA, a row
    # count no multiple of the grid). Special rows spread over it check that no row's result leaks
    # into another's.
    inf = float("inf")
    m = 9001
    x = (torch.randn(m, n, device="cuda") * 3 + torch.arange(m, device="cuda")[:, None] % 17).to(dtype)
    x[1::997] = -inf                 # all -inf: NaN rows, as torch
    x[2::1009, n // 2] = float("nan")
    x[3::1013, : n - 1] = -inf       # one finite element
    y, expect = op(x), ref(x, -1)
    special = torch.zeros(m, dtype=torch.bool, device="cuda")
    special[1::997] = special[2::1009] = True
    torch.testing.assert_close(y[special], expect[special], equal_nan=True)
    assert y[special].isnan().all()
    check(y[~special], x[~special], ref)


@pytest.mark.parametrize("op,ref", OPS, ids=IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [7, 1000, 4096, 65536, 128256])
def test_inf_and_nan_rows_match_torch(op, ref, dtype, n):
    inf = float("inf")
    x = torch.randn(6, n, device="cuda").to(dtype)
    x[0, ::3] = -inf            # some -inf: they get 0 (softmax) / -inf (log_softmax)
    x[1] = -inf                 # all -inf: NaN, as torch
    x[2, n // 2] = inf          # a +inf: NaN row, as torch
    x[3, n - 1] = float("nan")  # a NaN: NaN row, as torch
    x[4, : n - 1] = -inf        # one finite element: softmax 1, log_softmax 0
    y, expect = op(x), ref(x, -1)
    torch.testing.assert_close(y[[1, 2, 3]], expect[[1, 2, 3]], equal_nan=True)
    assert y[1].isnan().all() and y[2].isnan().all() and y[3].isnan().all()
    check(y[[0, 4, 5]], x[[0, 4, 5]], ref)


@pytest.mark.parametrize("op,ref", OPS, ids=IDS)
def test_few_rows_longer_than_a_cluster_split(op, ref):
    # 4 MB float32 rows: too long for a cluster's registers, so few of them take the two-launch split.
    x = torch.randn(3, 1 << 20, device="cuda")
    check(op(x), x, ref)


@pytest.mark.parametrize("op,ref", OPS, ids=IDS)
def test_zero_dim_and_empty(op, ref):
    x = torch.tensor(0.75, device="cuda")
    torch.testing.assert_close(op(x, 0), ref(x, 0))
    assert op(torch.randn(0, 33, device="cuda")).shape == (0, 33)


@pytest.mark.parametrize("op,ref", OPS, ids=IDS)
def test_reference_target_on_cuda_agrees(op, ref):
    x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    torch.testing.assert_close(op(x), op(x, target="reference"), rtol=2e-2, atol=1e-3)


def test_build_keys(counters):
    tileops.clear_kernel_caches()
    x = torch.randn(300, 3072, device="cuda", dtype=torch.float16)
    SOFTMAX(x)
    assert counters()["kernel_builds"] == 1
    SOFTMAX(torch.randn(17, 3072, device="cuda", dtype=torch.float16))  # other row count: same kernel
    assert counters()["kernel_builds"] == 1 and counters()["kernel_hits"] == 1
    LOG_SOFTMAX(x)  # other op: its own kernel
    SOFTMAX(torch.randn(3072, 5, device="cuda", dtype=torch.float16), 0)  # dim 0 of length 3072: moved last, hits
    assert counters()["kernel_builds"] == 2
    SOFTMAX(torch.randn(4, 65536, device="cuda", dtype=torch.float16))    # split
    SOFTMAX(torch.randn(256, 65536, device="cuda", dtype=torch.float16))  # one CTA a row
    assert counters()["kernel_builds"] == 4


def test_cuda_graph_after_warm_up_replays_correctly():
    for shape in [(32, 4096), (4, 128256)]:  # row kernel and split kernels
        x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
        SOFTMAX(x)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = SOFTMAX(x)
        for _ in range(2):
            x.copy_(torch.randn_like(x))
            g.replay()
            torch.cuda.synchronize()
            check(y, x, torch.softmax)


def test_compile_one_node_dynamic_rows(counters):
    torch._dynamo.reset()
    tileops.clear_kernel_caches()
    rec = GraphRecorder(inductor=True)

    op = LogSoftmaxFwdOp()
    fn = torch.compile(lambda x: op(x), fullgraph=True, dynamic=True, backend=rec)
    for m in (2048, 17, 300):
        x = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
        check(fn(x), x, torch.log_softmax)
    assert len(rec.graphs) == 1
    assert rec.calls() == [LOG_SOFTMAX.default]
    assert counters()["kernel_builds"] == 1
    assert SoftmaxFwdOp(dim=0)(torch.ones(3, 2, device="cuda")).sum().item() == pytest.approx(2.0)
