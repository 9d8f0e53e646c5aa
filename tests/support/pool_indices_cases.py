"""The max pools with indices (MaxPool{1,2,3}dIndicesFwdOp, AdaptiveMaxPool2dIndicesFwdOp) beside
torch.nn.functional's return_indices=True, on the param combinations of pool_cases, with inputs that
make ties (few distinct values) and windows of several NaNs."""
import torch

from support.pool_cases import BY_STEM, SIZES, our_args, params_for

STEMS = ["max_pool1d", "max_pool2d", "max_pool3d", "adaptive_max_pool2d"]


def op(stem):
    return getattr(torch.ops.tileops, f"pool_{stem}_indices_fwd")


def call(stem, x, params, **kw):
    return op(stem)(x, *our_args(BY_STEM[stem], params), **kw)


def reference(stem, x, params):
    pool, p = BY_STEM[stem], dict(params)
    if pool.kind == "adaptive":
        return pool.ref(x, p["output_size"], return_indices=True)
    if p.get("stride") is None:
        p.pop("stride", None)
    return pool.ref(x, **p, return_indices=True)


def ties_and_nans(shape, dtype, device="cpu", seed=0):
    """Values in {-2, ..., 2} (ties in most windows), about 1 in 16 NaN (several in some windows)."""
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randint(-2, 3, shape, generator=g, device=device).float()
    x[torch.rand(shape, generator=g, device=device) < 1 / 16] = float("nan")
    return x.to(dtype)


def cases():
    for stem in STEMS:
        pool = BY_STEM[stem]
        for size in SIZES[pool.rank]:
            for params in params_for(pool, size):
                yield stem, size, params


def assert_same(got, want):
    (y, i), (y_ref, i_ref) = got, want
    assert y.shape == y_ref.shape and i.shape == i_ref.shape and i.dtype == torch.int64
    torch.testing.assert_close(y, y_ref, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(i, i_ref), f"{(i != i_ref).sum().item()} of {i.numel()} indices differ"
