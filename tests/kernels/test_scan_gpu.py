"""The scans (CumsumFwdOp, CumprodFwdOp, LogCumSumExpFwdOp) on the GPU (nvrtc target) against torch: every x dtype and dim
at sizes that take each plan (a few threads a row, a CTA a row in one chunk, rows of many chunks, split
rows, columns, split columns), dtype=, long rows of odd length, non-contiguous and misaligned x, a
misaligned out, NaN/inf inside split rows and columns, 0-dim and empty x. Skipped without a GPU (conftest).

Tolerances: integer results equal torch's exactly. A floating y is compared with the scan of x cast to
y's dtype in float64: |got - want| <= eps(y) * |want| (one rounding of y) + the spacing of y's subnormals
+ acc * scale (a prefix beyond y's range must be inf of its sign), where the scan
accumulates in float32 (acc = 4e-5; float64 y: 1e-12) and scale is the running sum of |x| (cumsum) or
|want| (cumprod): float32 rounding of a sum in another order than a sequential one. logcumsumexp: acc =
4e-4 (float64 y: 1e-12) of |want| + 1, the rounding of each step's max + log1p(exp(min - max)).
A float32 chain of 10^5+ roundings drifts past that bound as a random walk (cumprod of 300000 factors
near 1 does); such a result passes when its worst error is within 1.5x of torch's own on the GPU."""
import pytest
import torch

from support.scan_cases import CUMS, DTYPE_CHOICES, LOGCUMSUMEXP, SCANS, sample

pytestmark = pytest.mark.gpu

# (shape, dims): short rows (a segment of a warp a row), rows of one CTA chunk, rows of many chunks,
# few long rows (split), columns and a middle dim, few long columns (split), an odd-length long row
# (scalar accesses), size-1 dims.
SHAPES = [
    ((4096, 7), [1, 0]),
    ((300, 4096), [1, 0]),
    ((512, 40000), [1]),
    ((3, 300000), [1]),
    ((2, 2048, 96), [0, 1, 2]),
    ((100003, 3), [0]),
    ((1, 100003), [1, -1]),
    ((5, 1, 3), [1, 0]),
]


def check(scan, got, x, dim, dtype=None):
    want = scan.ref(x.cpu(), dim, dtype=dtype) if dtype is not None else scan.ref(x.cpu(), dim)
    assert got.shape == want.shape and got.dtype == want.dtype and got.is_cuda
    if not want.dtype.is_floating_point:
        assert torch.equal(got.cpu(), want)
        return
    worst = error_ratio(scan, got.cpu(), x, dim, want.dtype)
    if worst > 1.0:  # long float32 chains drift as a random walk: as accurate as torch on the same GPU
        theirs = scan.ref(x, dim, dtype=dtype) if dtype is not None else scan.ref(x, dim)
        torch_worst = error_ratio(scan, theirs.cpu(), x, dim, want.dtype)
        assert worst <= 1.5 * torch_worst, \
            f"error {worst:.2f}x the bound, torch's on this GPU {torch_worst:.2f}x"


def error_ratio(scan, got, x, dim, y_dtype):
    """The worst |got - exact| over the bound below, after NaN and inf positions are checked equal."""
    xc = x.cpu().to(y_dtype).double()  # torch casts x to y's dtype first
    exact = scan.ref(xc, dim)
    if scan.stem == "cumsum":
        scale, acc = torch.cumsum(xc.abs(), dim), 4e-5
    elif scan.stem == "cumprod":
        scale, acc = exact.abs(), 4e-5
    else:
        scale, acc = exact.abs().nan_to_num(posinf=0.0) + 1, 4e-4
    if y_dtype == torch.float64:
        acc = 1e-12
    g = got.double()
    assert torch.equal(g.isnan(), exact.isnan()), "NaN positions differ"
    info = torch.finfo(y_dtype)
    # beyond y's range (float16 sums of long integer rows) y is inf as torch's rounding of the prefix gives
    over = exact.abs() > info.max * (1 + info.eps)
    inf = exact.isinf() | over
    assert torch.equal(g[inf], exact[inf].sign() * float("inf")), \
        "inf positions or signs differ"
    fin = ~(exact.isnan() | inf | (exact.abs() > info.max * (1 - info.eps)))
    # a subnormal y is exact to half its spacing only
    bound = info.eps * exact.abs() + acc * scale + info.smallest_normal * info.eps
    err = (g - exact).abs()
    return (err[fin] / bound[fin]).max().item() if fin.any() else 0.0


@pytest.mark.parametrize("scan", SCANS, ids=str)
def test_matches_torch_on_gpu_for_every_dtype_and_plan(scan):
    for dtype in scan.dtypes:
        for shape, dims in SHAPES:
            x = sample(scan, shape, dtype, device="cuda")
            for dim in dims:
                check(scan, scan.op(x, dim), x, dim)


@pytest.mark.parametrize("scan", CUMS, ids=str)
def test_dtype_casts_first_on_gpu(scan):
    for x_dtype in (torch.bfloat16, torch.int32, torch.float32, torch.bool, torch.float64):
        for shape, dim in (((64, 5000), 1), ((3, 200000), 1), ((4000, 64), 0)):
            x = sample(scan, shape, x_dtype, device="cuda")
            for dtype in DTYPE_CHOICES:
                check(scan, scan.op(x, dim, dtype=dtype), x, dim, dtype)


def test_chained_rows_of_thousands_of_tiles():
    # one row of 2^24 elements: 4096 tiles of the chained kernel waiting on each other in turn
    x = torch.randint(-3, 4, (1 << 24,), device="cuda", dtype=torch.int32)
    check(CUMS[0], CUMS[0].op(x, 0), x, 0)
    f = sample(CUMS[0], (2, 1 << 22), torch.bfloat16, device="cuda")
    check(CUMS[0], CUMS[0].op(f, 1, dtype=torch.float32), f, 1, torch.float32)
    for scan in SCANS:  # rows of many tiles whose length is no multiple of a tile, odd row counts
        x = sample(scan, (3, 123457 * 8), torch.float32, device="cuda")
        check(scan, scan.op(x, 1), x, 1)


def test_integer_wrap_equals_torch_on_gpu():
    x = torch.randint(-100, 100, (4, 70000), device="cuda", dtype=torch.int32)
    for dtype in (torch.int8, torch.int16, torch.int32, torch.int64):
        for dim in (0, 1):
            for scan in CUMS:
                check(scan, scan.op(x, dim, dtype=dtype), x, dim, dtype)


@pytest.mark.parametrize("scan", CUMS, ids=str)
def test_non_contiguous_and_misaligned_x_and_out(scan):
    xt = sample(scan, (512, 384), torch.float32, device="cuda").t()
    for dim in (0, 1):
        check(scan, scan.op(xt, dim), xt, dim)
    base = sample(scan, (4 * 4096 + 1,), torch.bfloat16, device="cuda")
    x = base[1:].view(4, 4096)  # 2-byte aligned: scalar accesses
    check(scan, scan.op(x, 1), x, 1)
    check(scan, scan.op(x, 0), x, 0)
    store = torch.empty(4 * 4096 + 1, device="cuda", dtype=torch.float32)
    out = store[1:].view(4, 4096)  # 4-byte aligned out
    scan.op_out(x, out, 1, dtype=torch.float32)
    check(scan, out, x, 1, torch.float32)
    wide = torch.empty(4 * 4096 + 1, device="cuda", dtype=torch.int64)[1:].view(4, 4096)
    xi = sample(scan, (4, 4096), torch.int16, device="cuda")
    scan.op_out(xi, wide, 1)  # an int64 out aligned to 8 bytes only
    check(scan, wide, xi, 1)


def test_nan_and_inf_inside_split_rows_and_columns():
    nan, inf = float("nan"), float("inf")
    row = torch.ones(3, 300000, device="cuda")
    row[0, 123456] = nan
    row[1, 1000] = inf
    row[1, 250000] = -inf  # inf + -inf: NaN from there on
    row[2, 5] = 0.0
    row[2, 290000] = inf   # 0 * inf in the product
    cols = row.t().contiguous()
    for scan in SCANS:
        check(scan, scan.op(row, 1), row, 1)
        check(scan, scan.op(cols, 0), cols, 0)
    y = torch.ops.tileops.reduction_cumsum_fwd(row, 1).cpu()
    assert not y[0, :123456].isnan().any() and y[0, 123456:].isnan().all()
    assert (y[1, 1000:250000] == inf).all() and y[1, 250000:].isnan().all()
    neg = torch.full((2, 300000), -float("inf"), device="cuda")
    neg[0, 200000] = 0.5  # -inf adds nothing: -inf up to it, then 0.5 on
    neg[1, 7] = inf
    neg[1, 150000] = nan
    for x in (neg, neg.t().contiguous()):
        d = 1 if x is neg else 0
        check(LOGCUMSUMEXP, LOGCUMSUMEXP.op(x, d), x, d)


def test_logcumsumexp_misaligned_and_non_contiguous():
    base = sample(LOGCUMSUMEXP, (4 * 4096 + 1,), torch.float16, device="cuda")
    x = base[1:].view(4, 4096)
    check(LOGCUMSUMEXP, LOGCUMSUMEXP.op(x, 1), x, 1)
    xt = sample(LOGCUMSUMEXP, (512, 384), torch.float32, device="cuda").t()
    for dim in (0, 1):
        check(LOGCUMSUMEXP, LOGCUMSUMEXP.op(xt, dim), xt, dim)


@pytest.mark.parametrize("scan", SCANS, ids=str)
def test_zero_dim_and_empty_on_gpu(scan):
    x0 = torch.tensor(2.5, device="cuda")
    for dim in (0, -1):
        check(scan, scan.op(x0, dim), x0, dim)
    xi = torch.tensor(3, device="cuda", dtype=torch.int8 if scan.takes_dtype else torch.float64)
    check(scan, scan.op(xi, 0), xi, 0)
    for shape, dim in (((0, 3), 0), ((3, 0), 1), ((2, 0, 4), -1)):
        x = torch.randn(shape, device="cuda")
        check(scan, scan.op(x, dim), x, dim)
