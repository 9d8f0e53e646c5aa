"""The pool family's ops beside their torch.nn.functional references, and the param combinations
the CPU and GPU tests run (ceil_mode edge cases, padding, dilation, count_include_pad,
divisor_override, odd sizes, one-int and per-dim lists)."""
from dataclasses import dataclass

import torch
import torch.nn.functional as F

ops = torch.ops.tileops


@dataclass(frozen=True)
class Pool:
    stem: str        # avg_pool2d: operator tileops::pool_<stem>_fwd, class AvgPool2dFwdOp
    cls: str
    ref: object      # torch.nn.functional.<stem>
    rank: int        # spatial dims
    kind: str        # avg | max | adaptive
    dtypes: tuple

    @property
    def op(self):
        return getattr(ops, f"pool_{self.stem}_fwd")

    @property
    def name(self):
        return f"pool_{self.stem}_fwd"


FLOATS = (torch.float32, torch.float16, torch.bfloat16)
POOLS = [
    Pool("avg_pool1d", "AvgPool1dFwdOp", F.avg_pool1d, 1, "avg", FLOATS),
    Pool("avg_pool2d", "AvgPool2dFwdOp", F.avg_pool2d, 2, "avg", FLOATS),
    Pool("avg_pool3d", "AvgPool3dFwdOp", F.avg_pool3d, 3, "avg", FLOATS),
    Pool("max_pool1d", "MaxPool1dFwdOp", F.max_pool1d, 1, "max", FLOATS),
    Pool("max_pool2d", "MaxPool2dFwdOp", F.max_pool2d, 2, "max", FLOATS),
    Pool("max_pool3d", "MaxPool3dFwdOp", F.max_pool3d, 3, "max", FLOATS),
    Pool("adaptive_avg_pool2d", "AdaptiveAvgPool2dFwdOp", F.adaptive_avg_pool2d, 2, "adaptive",
         (torch.float16, torch.bfloat16)),
    Pool("adaptive_max_pool2d", "AdaptiveMaxPool2dFwdOp", F.adaptive_max_pool2d, 2, "adaptive",
         (torch.float16, torch.bfloat16)),
]
BY_STEM = {p.stem: p for p in POOLS}
SIZES = {1: [(7,), (16,), (33,)], 2: [(7, 9), (16, 16), (5, 13)], 3: [(5, 6, 7), (4, 4, 9)]}

# (stem, input shape, params): pools whose neighbouring outputs read one 16-byte vector a row
# (pool_fwd_wide): the resnet stem's 3x3 / 2 / 1 and VGG's 2x2 / 2 in 1-3 dims, a padded
# 2-wide stride-1 window (8 bfloat16 outputs a vector), ceil_mode windows that leave the input, rows
# whose last vector is cut short (out * stride past the input), rows of one vector, windows ending
# past the vector (kernel - padding > stride), and avg pools with each divisor rule. (The GPU plan
# gives the small ones whose windows share no tap to pool_fwd; the host test runs pool_fwd_wide.)
WIDE_LOAD_CASES = [
    ("max_pool2d", (2, 3, 16, 16), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ("max_pool2d", (2, 3, 9, 24), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ("max_pool2d", (2, 3, 7, 8), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ("max_pool2d", (1, 2, 5, 8), {"kernel_size": [3, 3], "stride": [1, 2], "padding": [1, 1]}),
    ("max_pool2d", (2, 3, 6, 16), {"kernel_size": 2, "stride": 2}),
    ("max_pool2d", (2, 3, 7, 24), {"kernel_size": 2, "stride": 2, "ceil_mode": True}),
    ("max_pool2d", (2, 2, 4, 16), {"kernel_size": 2, "stride": 1, "padding": 1}),
    ("max_pool1d", (2, 3, 32), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ("max_pool1d", (2, 3, 8), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ("max_pool3d", (1, 2, 5, 6, 16), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ("max_pool3d", (1, 2, 4, 4, 8), {"kernel_size": 2, "stride": 2}),
    ("max_pool2d", (2, 3, 7, 16), {"kernel_size": 4, "stride": 2, "padding": 1, "ceil_mode": True}),
    ("max_pool1d", (2, 3, 32), {"kernel_size": 3, "stride": 2}),
    ("avg_pool2d", (2, 3, 16, 16), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ("avg_pool2d", (2, 3, 9, 24), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True,
                                   "count_include_pad": False}),
    ("avg_pool2d", (2, 3, 10, 16), {"kernel_size": 5, "stride": 2, "padding": 2, "divisor_override": 7}),
    ("avg_pool2d", (2, 2, 4, 16), {"kernel_size": 2, "stride": 1, "padding": 1}),
    ("avg_pool1d", (2, 3, 32), {"kernel_size": 5, "stride": 4, "padding": 2}),
    ("avg_pool1d", (2, 3, 24), {"kernel_size": 4, "stride": 2, "padding": 1, "ceil_mode": True,
                                "count_include_pad": False}),
    ("avg_pool1d", (2, 3, 8), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ("avg_pool3d", (1, 2, 5, 6, 16), {"kernel_size": 2, "stride": 2, "ceil_mode": True}),
    ("avg_pool3d", (1, 2, 4, 5, 8), {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}),
]

# Calls large enough (2^17 work items) that windows sharing no tap take pool_fwd_wide too.
WIDE_LOAD_LARGE = [
    ("avg_pool2d", (8, 64, 64, 128), {"kernel_size": 2, "stride": 2}),
    ("max_pool3d", (4, 64, 4, 64, 128), {"kernel_size": 2, "stride": 2, "ceil_mode": True}),
]

# (stem, input shape, params): windows of 32+ taps in a row, the ones the plan gives a warp each
# (pool_wide_window), with padding, ceil_mode, dilation, count_include_pad and divisor_override, and
# the joined runs: a window covering the last dim (and the next) whole, global adaptive bins.
WIDE_CASES = [
    ("max_pool1d", (2, 3, 128), {"kernel_size": 128, "stride": 1}),
    ("avg_pool1d", (4, 7, 200), {"kernel_size": 32, "stride": 4}),  # 1204 outputs: groups past the end
    ("max_pool1d", (2, 3, 101), {"kernel_size": 32, "stride": 7, "padding": 16, "ceil_mode": True}),
    ("max_pool1d", (2, 3, 101), {"kernel_size": 33, "stride": 5, "dilation": 2, "padding": 3}),
    ("avg_pool1d", (2, 3, 101), {"kernel_size": 40, "stride": 9, "padding": 20, "ceil_mode": True}),
    ("avg_pool1d", (2, 3, 101), {"kernel_size": 40, "stride": 9, "padding": 20, "count_include_pad": False}),
    ("avg_pool2d", (2, 3, 9, 70), {"kernel_size": [3, 35], "stride": [2, 11], "padding": [1, 17],
                                   "divisor_override": 5}),
    ("avg_pool2d", (2, 3, 7, 7), {"kernel_size": 7}),
    ("max_pool2d", (2, 3, 7, 7), {"kernel_size": 7}),
    ("max_pool2d", (2, 3, 6, 40), {"kernel_size": [2, 40], "stride": 1}),
    ("avg_pool3d", (1, 3, 8, 6, 5), {"kernel_size": [2, 6, 5]}),
    ("max_pool3d", (1, 3, 4, 5, 70), {"kernel_size": [2, 2, 33], "stride": [1, 2, 9], "padding": [1, 0, 16]}),
    ("adaptive_avg_pool2d", (2, 3, 7, 7), {"output_size": [1, 1]}),
    ("adaptive_max_pool2d", (2, 3, 7, 7), {"output_size": [1, 1]}),
    ("adaptive_avg_pool2d", (2, 3, 11, 77), {"output_size": [3, 2]}),
    ("adaptive_max_pool2d", (2, 3, 11, 77), {"output_size": [5, 1]}),
]


def per_dim(rank, *values):
    """A per-dim list from the first `rank` values (one spatial dim each)."""
    return list(values[:rank])


def params_for(pool: Pool, size):
    """Param dicts for one spatial size: every combination listed is valid for torch there."""
    r = pool.rank
    if pool.kind == "adaptive":
        return [{"output_size": o} for o in ([1, 1], [3, 2], [size[0], size[1]], [size[0] + 3, 2], [7, 5], 4)]
    out = []
    for k, s, p in ((2, None, 0), (3, 2, 1), (3, 1, 1), (per_dim(r, 3, 2, 1), per_dim(r, 2, 1, 2), per_dim(r, 1, 0, 0)),
                    (2, 2, 1), (4, 3, 2), (1, 1, 0), (3, [], 0)):
        if any(d < (max(k) if isinstance(k, list) else k) for d in size):
            continue
        for ceil_mode in (False, True):
            base = {"kernel_size": k, "stride": s, "padding": p, "ceil_mode": ceil_mode}
            if pool.kind == "avg":
                out.append({**base, "count_include_pad": True})
                out.append({**base, "count_include_pad": False})
                if r > 1:
                    out.append({**base, "count_include_pad": False, "divisor_override": 3})
                    out.append({**base, "divisor_override": -2})
            else:
                out.append(base)
                d = 2 if r == 1 else per_dim(r, 2, 1, 3)
                eff = [(kk - 1) * dd + 1 for kk, dd in zip(k if isinstance(k, list) else [k] * r,
                                                           d if isinstance(d, list) else [d] * r)]
                if all(e <= n + 2 * (p if isinstance(p, int) else pp) for e, n, pp in
                       zip(eff, size, p if isinstance(p, list) else [p] * r)):
                    out.append({**base, "dilation": d})
    return out


def our_args(pool: Pool, params: dict):
    """Positional args of the operator from a param dict (torch's names, None -> schema default)."""
    p = dict(params)
    if pool.kind == "adaptive":
        return (p["output_size"],)
    names = ["kernel_size", "stride", "padding"]
    names += ["ceil_mode", "count_include_pad"] if pool.kind == "avg" else ["dilation", "ceil_mode"]
    if pool.kind == "avg" and pool.rank > 1:
        names.append("divisor_override")
    defaults = {"stride": None, "padding": 0, "dilation": 1, "ceil_mode": False, "count_include_pad": True,
                "divisor_override": None}
    return tuple(p.get(n, defaults.get(n)) for n in names)


def reference(pool: Pool, x, params: dict):
    p = dict(params)
    if pool.kind == "adaptive":
        out = pool.ref(x, p["output_size"])
        return out[0] if isinstance(out, tuple) else out
    if p.get("stride") is None:
        p.pop("stride", None)
    return pool.ref(x, **p)


def call(pool: Pool, x, params: dict, **kw):
    return pool.op(x, *our_args(pool, params), **kw)


def sample(shape, dtype, device="cpu", nan=False):
    x = torch.randn(shape, device=device) * 3
    if nan and x.numel() > 2:
        x.view(-1)[x.numel() // 3] = float("nan")
    return x.to(dtype)
