"""The dim reductions on the GPU (nvrtc target, tests/support/reduce_cases.py) against torch on the
GPU: every op and listed dtype over rows, columns, a middle dim, interleaved dims (gathered) and every
dim, at sizes that take the warp, CTA and split plans; NaN/inf semantics, dtype=, correction=,
misaligned x, empty reductions. Skipped without a GPU (conftest)."""
import pytest
import torch

from support.reduce_cases import CASES, sample

pytestmark = pytest.mark.gpu
IDS = [c.stem for c in CASES]
# (shape, dim lists): short rows (a warp slice), rows of a CTA, few long rows (split), columns (and
# split columns), a middle dim, interleaved dims, every dim.
SHAPES = [
    ((300, 7), [[1], [0], None]),
    ((64, 4096), [[1], [0], None]),
    ((3, 300000), [[1], None]),
    ((2, 2048, 96), [[1], [0, 2], [0, 1], [2]]),
    ((1, 100003), [[1]]),
]


def _int_dim(case, dim):
    if case.dim != "int":
        return dim
    return None if dim is None else (dim[0] if len(dim) == 1 else "skip")


def _close(case, got, want, dtype):
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            _close(case, g, w, dtype)
        return
    assert got.shape == want.shape and got.dtype == want.dtype
    rtol, atol = case.rtol.get(want.dtype, 0.0), case.atol.get(want.dtype, 0.0)
    if want.dtype.is_floating_point:
        # float32 accumulation in a different order than torch: one rounding of y plus the sum's
        # relative error, a few ulps of float32 times the terms' magnitude
        torch.testing.assert_close(got.float(), want.float(), rtol=max(rtol, 1e-4), atol=max(atol, 1e-3),
                                   equal_nan=True)
    else:
        assert torch.equal(got, want)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_matches_torch_on_gpu(case):
    for dtype in case.dtypes:
        for shape, dims in SHAPES:
            x = sample(shape, dtype, device="cuda")
            if case.stem in ("prod",):
                x = 1 + x / 64 if dtype.is_floating_point else x  # keep products finite
            for dim in dims:
                d = _int_dim(case, dim)
                if d == "skip" or (case.dim == "nonempty" and d is None):
                    continue
                for keepdim in (False, True):
                    want = case.expect(x, d, keepdim)
                    if case.stem in ("argmax", "argmin"):  # ties: torch on the GPU picks the first too
                        assert torch.equal(case.call(x, d, keepdim), want)
                        continue
                    _close(case, case.call(x, d, keepdim), want, dtype)


@pytest.mark.parametrize("case", [c for c in CASES if c.extra], ids=[c.stem for c in CASES if c.extra])
def test_extra_params_on_gpu(case):
    x = sample((16, 5000), torch.bfloat16, device="cuda")
    if case.stem == "prod":
        x = 1 + x / 64
    for name, values in case.extra.items():
        for v in values:
            for dim in ([1], [0]) if case.dim != "int" else (1, 0):
                _close(case, case.call(x, dim, False, **{name: v}), case.expect(x, dim, False, **{name: v}), x.dtype)


def test_nan_and_inf_semantics_on_gpu():
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[1.0, nan, 3.0, 3.0], [2.0, 5.0, 5.0, -inf], [nan, 1.0, nan, 0.0], [-inf, -inf, -inf, -inf]],
                     device="cuda")
    ops = torch.ops.tileops
    torch.testing.assert_close(ops.reduction_amax_fwd(x, [1]), torch.amax(x, 1), equal_nan=True)
    torch.testing.assert_close(ops.reduction_amin_fwd(x, [1]), torch.amin(x, 1), equal_nan=True)
    assert ops.reduction_argmax_fwd(x, 1).tolist() == torch.argmax(x, 1).tolist()
    assert ops.reduction_argmin_fwd(x, 1).tolist() == torch.argmin(x, 1).tolist()
    torch.testing.assert_close(ops.reduction_log_sum_exp_fwd(x, [1]), torch.logsumexp(x, 1), equal_nan=True)
    big = torch.full((2, 70000), 1.0, device="cuda")
    big[0, 50000] = nan  # a NaN inside a split row
    torch.testing.assert_close(ops.reduction_amax_fwd(big, [1]), torch.amax(big, 1), equal_nan=True)
    assert ops.reduction_argmax_fwd(big, 1).tolist() == [50000, 0]  # first NaN; first of equal maxima


def test_log_sum_exp_of_nan_then_inf_is_nan_on_gpu():
    # row 0: a thread folds a NaN (element 1), then an inf (33) in a later vector; row 1: two infs in
    # one vector. The same data transposed runs the column kernel (rows 1 and 33 of one warp's lane).
    nan, inf = float("nan"), float("inf")
    rows = torch.randn(8, 64, device="cuda")
    rows[0, 1], rows[0, 33] = nan, inf
    rows[1, 8], rows[1, 9] = inf, inf
    rows[2, 33] = inf
    ops = torch.ops.tileops
    expect = torch.logsumexp(rows, 1)
    assert expect[0].isnan() and expect[1] == inf
    torch.testing.assert_close(ops.reduction_log_sum_exp_fwd(rows, [1]), expect, equal_nan=True)
    cols = rows.t().contiguous()
    torch.testing.assert_close(ops.reduction_log_sum_exp_fwd(cols, [0]), expect, equal_nan=True)


def test_moments_near_the_float_range_are_inf_not_nan_on_gpu():
    # |x| in [1.5e38, 3e38], either sign: var (~1e76, the float64 variance rounded) and std are inf
    # (float32 sums of squared deviations overflow), never NaN; the mean is finite. Rows, a split
    # row, columns. (torch's float32 kernels give inf or NaN here, by path: not the reference.)
    g = torch.Generator(device="cuda").manual_seed(7)
    ops = torch.ops.tileops
    for shape, dim in (((64, 4096), [1]), ((2, 300000), [1]), ((4096, 64), [0])):
        sign = torch.where(torch.rand(shape, device="cuda", generator=g) > 0.5, 1.0, -1.0)
        x = sign * (1.5e38 + 1.5e38 * torch.rand(shape, device="cuda", generator=g))
        assert torch.isinf(ops.reduction_var_fwd(x, dim)).all()
        assert torch.isinf(ops.reduction_std_fwd(x, dim)).all()
        var, mean = ops.reduction_var_mean_fwd(x, dim)
        assert torch.isinf(var).all()
        torch.testing.assert_close(mean.double(), x.double().mean(dim), rtol=0, atol=3e38 * 1e-5)


def test_bool_all_any_whole_words_on_gpu():
    # bool x read as whole words (rows: 16 bytes a vector; columns: 8 a lane split, or 4 a lane
    # unsplit for 128x1024x512): any of a mostly
    # False x and all of a mostly True one, with the odd byte placed at every position of a word and
    # a vector, and bytes of 2 and 0x80 (true, as torch reads a bool), over rows, columns, a middle
    # dim and a split
    g = torch.Generator(device="cuda").manual_seed(11)
    ops = torch.ops.tileops
    for shape, dim in (((64, 4096), [1]), ((4096, 64), [0]), ((16384, 512), [0]), ((8, 1024, 512), [1]),
                       ((128, 1024, 512), [1]), ((2, 300000), [1])):
        for odd, fill in ((1, 0), (2, 0), (0x80, 0), (0, 1), (0, 2)):
            raw = torch.full(shape, fill, dtype=torch.uint8, device="cuda")
            hits = torch.rand(shape, device="cuda", generator=g) < 4.0 / shape[dim[0]]
            raw[hits] = odd
            x = raw.view(torch.bool)
            truth = raw != 0
            assert torch.equal(ops.reduction_any_fwd(x, dim), truth.any(dim[0])), (shape, odd, fill)
            assert torch.equal(ops.reduction_all_fwd(x, dim), truth.all(dim[0])), (shape, odd, fill)


def test_many_splits_keep_first_extremes_and_nans_on_gpu():
    # Two rows of 2^22 float32 split across some 264 CTAs each: the second pass merges the partial
    # states four loads at a time a lane. Row 0: equal maxima in three splits (the first wins);
    # row 1: NaNs in three splits (the first NaN wins; logsumexp and var NaN).
    n = 1 << 22
    x = torch.randn(2, n, device="cuda")
    tied, nans = [123457, 2000003, 3999999], [700001, 2500007, 4100000]
    x[0, tied] = 100.0
    x[1, nans] = float("nan")
    ops = torch.ops.tileops
    assert ops.reduction_argmax_fwd(x, 1).tolist() == [tied[0], nans[0]]
    assert ops.reduction_argmin_fwd(-x, 1).tolist() == [tied[0], nans[0]]
    torch.testing.assert_close(ops.reduction_log_sum_exp_fwd(x, [1]), torch.logsumexp(x, 1), equal_nan=True)
    torch.testing.assert_close(ops.reduction_var_fwd(x, [1]), torch.var(x, 1), equal_nan=True, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ops.reduction_sum_fwd(x, [1]), x.sum(1), equal_nan=True, rtol=1e-4, atol=1e-2)


def test_misaligned_and_non_contiguous_x():
    base = torch.randn(4 * 4096 + 1, device="cuda", dtype=torch.bfloat16)
    x = base[1:].view(4, 4096)  # 2-byte aligned: scalar accesses
    torch.testing.assert_close(torch.ops.tileops.reduction_sum_fwd(x, [1]).float(), x.float().sum(1).bfloat16().float(),
                               rtol=1.6e-2, atol=1e-2)
    xt = torch.randn(512, 384, device="cuda").t()
    torch.testing.assert_close(torch.ops.tileops.reduction_var_fwd(xt, [0]), torch.var(xt, 0), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_empty_reductions_on_gpu(case):
    x = torch.randn(3, 0, device="cuda")
    dim = 1 if case.dim == "int" else [1]
    if case.refuses_empty:
        with pytest.raises((IndexError, RuntimeError), match=rf"tileops::{case.name}"):  # as torch raises
            case.call(x, dim)
    else:
        _close(case, case.call(x, dim), case.expect(x, dim), x.dtype)
