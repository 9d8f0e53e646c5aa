"""What the fuzzer calls: per operator a draw of valid arguments with a float64 oracle, then bad-input
mutations over every manifest rule. Everything is a function of (seed, index), so any call can be
replayed alone: `python tests/fuzz/fuzz_ops.py --seed S --only INDEX`.

A Call names its operator, holds positional args and kwargs, the indices of the tensors it writes
(written inputs or out), an oracle (float64 formulas independent of the library, from the original
args) and `expect_refusal` when a mutation broke a rule the op must enforce."""
from __future__ import annotations

import dataclasses
import math
import random
from typing import Callable

import torch
import torch.nn.functional as F

FLOATS = (torch.float16, torch.bfloat16, torch.float32)
OTHER_DTYPES = (torch.float64, torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64)
# Elementwise tolerance of a result rounded once to its dtype, against the float64 oracle rounded the
# same way (tests/support/reference.py's TOL, times 4 as its elementwise check).
TOL = {torch.float32: 4e-5, torch.float16: 8e-3, torch.bfloat16: 6.4e-2}
ROPE_COMBOS = {(torch.float16, torch.float16), (torch.float16, torch.float32), (torch.bfloat16, torch.bfloat16),
               (torch.bfloat16, torch.float32), (torch.float32, torch.float32)}
HUGE_ROWS = 2 ** 30 + 1  # an expanded view this tall is over the copy limit (2^35 bytes) for any row of 32+ bytes


@dataclasses.dataclass
class Call:
    op: str                        # operator name without the namespace, e.g. norm_rms_norm_fwd
    args: list
    kwargs: dict
    oracle: Callable               # (args, kwargs) -> list of expected tensors; raises when the call is invalid
    results: Callable              # (args, returned) -> list of result tensors, in the oracle's order
    dtypes: dict                   # arg index -> allowed dtypes (tuple), index of the arg whose dtype it takes,
                                   # or a function of the args giving the allowed dtypes
    written: tuple = ()            # arg indices the op writes
    out: int | None = None         # arg index of out=
    expect_refusal: str = ""       # why the call must be refused ('' when it must succeed)
    mutation: str = "valid"


# ---- float64 oracles --------------------------------------------------------------------------------

def need(cond, what):
    if not cond:
        raise ValueError(what)


def trailing(x, ns):
    need(len(ns) >= 1 and x.dim() >= len(ns) and list(x.shape[x.dim() - len(ns):]) == list(ns), "shape")
    need(math.prod(ns) <= 1048576, "row too long")
    return tuple(range(-len(ns), 0))


def rms64(x, ns, w, eps):
    dims = trailing(x, ns)
    if w is not None:
        need(list(w.shape) == list(ns), "weight shape")
    xf = x.double()
    e = torch.finfo(torch.float32).eps if eps is None else eps
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=dims, keepdim=True) + e)
    return y * w.double() if w is not None else y


def ln64(x, ns, w, b, eps):
    trailing(x, ns)
    for t in (w, b):
        if t is not None:
            need(list(t.shape) == list(ns), "weight/bias shape")
    return F.layer_norm(x.double(), ns, None if w is None else w.double(), None if b is None else b.double(), eps)


def norm_grads(fwd, dy, x, ns, w):
    """(dx, dweight, dbias) of fwd(x, weight) in float64; weight None means ones."""
    trailing(x, ns)
    need(dy.shape == x.shape, "dy shape")
    x64 = x.double().requires_grad_()
    w64 = (torch.ones(ns, dtype=torch.float64) if w is None else w.double()).requires_grad_()
    b64 = torch.zeros(ns, dtype=torch.float64, requires_grad=True)
    with torch.enable_grad():
        y = fwd(x64, w64, b64)
        return torch.autograd.grad(y, (x64, w64, b64), dy.double(), allow_unused=True)


def rope64(pos, x, cache, neox):
    need(pos.dim() == 1 and x.dim() == 3 and cache.dim() == 2 and x.shape[0] == pos.shape[0], "rope shapes")
    rot = cache.shape[1]
    need(rot >= 2 and rot % 2 == 0 and rot <= x.shape[2], "rot_dim")
    need(bool(((pos >= 0) & (pos < cache.shape[0])).all()), "position out of range")
    cs = cache.double()[pos]
    cos, sin = cs[:, None, : rot // 2], cs[:, None, rot // 2:]
    out = x.double().clone()
    r = out[..., :rot]
    if neox:
        x1, x2 = r[..., : rot // 2], r[..., rot // 2:]
        out[..., :rot] = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
    else:
        x1, x2 = r[..., 0::2], r[..., 1::2]
        out[..., :rot] = torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).flatten(-2)
    return out


def alibi64(n):
    need(n >= 1, "num_heads")
    p = 2 ** math.floor(math.log2(n))
    s = [2.0 ** (-8.0 * (i + 1) / p) for i in range(p)] + [2.0 ** (-4.0 * (2 * j + 1) / p) for j in range(n - p)]
    return torch.tensor(s, dtype=torch.float64)


def sinusoidal64(n, dim, base):
    need(n >= 0 and dim >= 2 and dim % 2 == 0, "sinusoidal params")
    if n == 0:
        return torch.zeros(0, dim, dtype=torch.float64)  # without the dim-long frequency vector
    ang = torch.arange(n, dtype=torch.float64)[:, None] * base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    return torch.stack([ang.sin(), ang.cos()], -1).flatten(-2)


def gelu_tanh64(x):
    return F.gelu(x, approximate="tanh")


# ---- valid draws, one per operator --------------------------------------------------------------------

def rand(rng, shape, dtype, g):
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g, dtype=torch.float32) * rng.choice([0.5, 1.0, 3.0])).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) < 0.5
    info = torch.iinfo(dtype)
    return torch.randint(max(info.min, -50), min(info.max, 50) + 1, shape, generator=g, dtype=dtype)


def lead(rng):
    return [rng.choice([1, 2, 3, 5]) for _ in range(rng.choice([0, 1, 1, 2]))]


def ns_of(rng):
    return [rng.choice([1, 7, 32, 130])] if rng.random() < 0.8 else [rng.choice([2, 3]), rng.choice([4, 8])]


def first(r):
    return [r] if isinstance(r, torch.Tensor) else list(r)


def x_or_float32(tied=None):
    """A norm weight's (or bias') dtypes: x's (arg 0) or float32; the same as arg `tied` when it is given
    (LayerNorm's weight and bias share one dtype)."""
    def allowed(a):
        want = {a[0].dtype, torch.float32} if isinstance(a[0], torch.Tensor) else set(FLOATS)
        if tied is not None and isinstance(a[tied], torch.Tensor):
            want &= {a[tied].dtype}
        return tuple(want)
    return allowed


def draw_norm(rng, g, name):
    dt = rng.choice(FLOATS)
    ns = ns_of(rng)
    shape = lead(rng) + ns
    x = rand(rng, shape, dt, g)
    wt = torch.float32 if rng.random() < 0.3 else dt  # a float32 weight beside any x
    w = rand(rng, ns, wt, g) if rng.random() < 0.7 else None
    eps = rng.choice([None, 1e-6, 0.1]) if name != "layer_norm" else rng.choice([1e-5, 1e-3])
    if name == "rms_norm_fwd":
        return Call("norm_rms_norm_fwd", [x, w, ns, eps], {}, lambda a, k: [rms64(a[0], a[2], a[1], a[3])],
                    lambda a, r: first(r), {0: FLOATS, 1: x_or_float32()})
    if name == "layer_norm":
        b = rand(rng, ns, wt, g) if rng.random() < 0.5 else None
        return Call("norm_layer_norm_fwd", [x, w, b, ns, eps], {},
                    lambda a, k: [ln64(a[0], a[3], a[1], a[2], a[4])], lambda a, r: first(r),
                    {0: FLOATS, 1: x_or_float32(tied=2), 2: x_or_float32(tied=1)})
    res = rand(rng, shape, dt, g)
    if w is not None and rng.random() < 0.3:
        w = rand(rng, ns, torch.float32, g)  # the fused add takes a float32 weight beside any x
    w_rule = (dt, torch.float32)

    def fused(a, k):
        need(a[1].shape == a[0].shape, "residual shape")
        s = (a[0].double() + a[1].double()).to(a[0].dtype)  # the sum is rounded to x's dtype first
        return [rms64(s, a[3], a[2], a[4]), s.double()]
    if rng.random() < 0.5:
        return Call("norm_fused_add_rms_norm_fwd", [x, res, w, ns, eps], {}, fused, lambda a, r: first(r),
                    {0: FLOATS, 1: 0, 2: w_rule})
    return Call("norm_fused_add_rms_norm_fwd_writes_residual", [x, res, w, ns, eps], {}, fused,
                lambda a, r: [r, a[1]], {0: FLOATS, 1: 0, 2: w_rule}, written=(1,))


def grad_dtypes(n):
    """dx in dy's dtype, then the n - 1 weight/bias gradients in the weight's (dy's without one)."""
    def dtypes(a):
        w = a[2] if isinstance(a[2], torch.Tensor) else a[0]
        return [a[0].dtype] + [w.dtype] * (n - 1)
    return dtypes


def draw_norm_bwd(rng, g, name):
    dt = rng.choice(FLOATS)
    ns = ns_of(rng)
    shape = lead(rng) + ns
    dy, x = rand(rng, shape, dt, g), rand(rng, shape, dt, g)
    w = rand(rng, ns, torch.float32 if rng.random() < 0.3 else dt, g) if rng.random() < 0.7 else None
    if name == "rms":
        eps = rng.choice([None, 1e-5])
        branch = rng.choice(["", "_without_dweight"])

        def oracle(a, k):
            gx, gw, _ = norm_grads(lambda x64, w64, b64: rms64(x64, a[3], w64, a[4]), a[0], a[1], a[3], a[2])
            return [gx] if branch else [gx, gw]
        c = Call("norm_rms_norm_bwd" + branch, [dy, x, w, ns, eps], {}, oracle, lambda a, r: first(r),
                 {0: FLOATS, 1: 0, 2: x_or_float32()})
        c.out_dtype = grad_dtypes(1 if branch else 2)
        return c
    eps = rng.choice([1e-5, 1e-3])
    branch = rng.choice(["", "_without_dbias", "_without_dweight", "_without_dbias_without_dweight"])

    def oracle(a, k):
        gx, gw, gb = norm_grads(lambda x64, w64, b64: F.layer_norm(x64, a[3], w64, b64, a[4]), a[0], a[1], a[3], a[2])
        return [gx] + ([gw] if "dweight" not in branch else []) + ([gb] if "dbias" not in branch else [])
    c = Call("norm_layer_norm_bwd" + branch, [dy, x, w, ns, eps], {}, oracle, lambda a, r: first(r),
             {0: FLOATS, 1: 0, 2: x_or_float32()})
    c.out_dtype = grad_dtypes(1 + ("dweight" not in branch) + ("dbias" not in branch))
    return c


UNARY = {"relu": torch.relu, "silu": F.silu, "gelu": None, "sigmoid": torch.sigmoid}


def draw_unary(rng, g, name):
    dtypes = FLOATS + ((torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool)
                       if name == "sigmoid" else ())
    dt = rng.choice(dtypes)
    x = rand(rng, lead(rng) + [rng.choice([1, 7, 64, 1000])], dt, g)
    params, fn = [], UNARY[name]
    if name == "gelu":
        approx = rng.choice(["none", "tanh", None])
        params = [] if approx is None else [approx]
        fn = gelu_tanh64 if approx == "tanh" else F.gelu

    def oracle(a, k):
        if len(a) > 1:
            need(a[1] in ("none", "tanh"), "approximate")
        return [fn(a[0].double())]
    out_dt = (lambda a: a[0].dtype if a[0].dtype.is_floating_point else torch.float32)
    if name != "sigmoid" and rng.random() < 0.5:
        c = Call(f"activation_{name}_fwd_writes_x", [x] + params, {}, oracle, lambda a, r: [a[0]],
                 {0: FLOATS}, written=(0,))
        return c
    c = Call(f"activation_{name}_fwd", [x] + params, {}, oracle, lambda a, r: first(r), {0: dtypes})
    c.out_dtype = out_dt
    return c


GATED = {"silu_and_mul": F.silu, "gelu_and_mul": F.gelu, "gelu_tanh_and_mul": gelu_tanh64}


def draw_gated(rng, g, name):
    dt = rng.choice(FLOATS)
    d = rng.choice([1, 7, 64, 300])
    x = rand(rng, lead(rng) + [2 * d], dt, g)

    def oracle(a, k):
        need(a[0].dim() >= 1 and a[0].shape[-1] % 2 == 0, "2*d")
        h = a[0].shape[-1] // 2
        return [GATED[name](a[0].double()[..., :h]) * a[0].double()[..., h:]]
    if rng.random() < 0.5:
        c = Call(f"activation_{name}_fwd_out", [x, torch.empty(list(x.shape[:-1]) + [d], dtype=dt)], {}, oracle,
                 lambda a, r: [a[1]], {0: FLOATS, 1: 0}, written=(1,), out=1)
    else:
        c = Call(f"activation_{name}_fwd", [x], {}, oracle, lambda a, r: first(r), {0: FLOATS})
    return c


def draw_softmax(rng, g, name):
    dt = rng.choice(FLOATS)
    shape = [rng.choice([1, 3, 5, 17, 300]) for _ in range(rng.choice([0, 1, 2, 3]))]
    x = rand(rng, shape, dt, g)
    dim = rng.randrange(-max(x.dim(), 1), max(x.dim(), 1))
    fn = torch.softmax if name == "softmax" else torch.log_softmax
    args = [x] if (dim == -1 and rng.random() < 0.5) else [x, dim]
    return Call(f"reduction_{name}_fwd", args, {}, lambda a, k: [fn(a[0].double(), a[1] if len(a) > 1 else -1)],
                lambda a, r: first(r), {0: FLOATS})


def draw_rope(rng, g, name):
    dt = rng.choice(FLOATS)
    cdt = rng.choice([dt, torch.float32])
    t, hq, hk = rng.choice([0, 1, 3, 9]), rng.choice([1, 2, 4]), rng.choice([1, 2])
    head = rng.choice([2, 8, 64, 128])
    rot = rng.choice([r for r in (2, 8, 32, 64, 128) if r <= head])
    max_pos = rng.choice([1, 16, 100])
    pos = torch.randint(0, max_pos, (t,), generator=g)
    q, k = rand(rng, [t, hq, head], dt, g), rand(rng, [t, hk, head], dt, g)
    cache = rand(rng, [max_pos, rot], cdt, g)
    neox = name == "neox"

    def combo(a):
        need((a[1].dtype, a[3].dtype) in ROPE_COMBOS, "dtype_combos")
    if name == "qk_norm":
        wq, wk = rand(rng, [head], dt, g), rand(rng, [head], dt, g)
        eps = rng.choice([None, 1e-6])

        def oracle(a, k_):
            need((a[1].dtype, a[5].dtype) in ROPE_COMBOS, "dtype_combos")
            need(a[1].dim() == 3 and a[2].dim() == 3 and a[1].shape[2] == a[2].shape[2], "head_dim")
            qn = rms64(a[1], [a[1].shape[2]], a[3], a[6]).to(a[1].dtype)
            kn = rms64(a[2], [a[2].shape[2]], a[4], a[6]).to(a[1].dtype)
            return [rope64(a[0], qn, a[5], True), rope64(a[0], kn, a[5], True)]
        return Call("position_qk_norm_rope_fwd_writes_k_writes_q", [pos, q, k, wq, wk, cache, eps], {}, oracle,
                    lambda a, r: [a[1], a[2]], {0: (torch.int64,), 1: FLOATS, 2: 1, 3: 1, 4: 1, 5: FLOATS},
                    written=(1, 2))

    def oracle(a, k_):
        combo(a)
        if a[2] is None:  # key=None: q alone
            return [rope64(a[0], a[1], a[3], neox)]
        need(a[2].dim() == 3 and a[1].shape[2] == a[2].shape[2], "head_dim")
        return [rope64(a[0], a[1], a[3], neox), rope64(a[0], a[2], a[3], neox)]
    op = "position_rope_neox_cached_fwd_writes_k_writes_q" if neox else "position_rope_non_neox_cached_fwd_writes_k_writes_q"
    return Call(op, [pos, q, k, cache], {}, oracle, lambda a, r: [x for x in (a[1], a[2]) if x is not None],
                {0: (torch.int64,), 1: FLOATS, 2: 1, 3: FLOATS}, written=(1, 2))


def draw_factory(rng, g, name):
    if name == "alibi":
        n = rng.choice([1, 3, 8, 12, 112])
        return Call("position_alibi_fwd", [n, "cpu"], {}, lambda a, k: [alibi64(a[0])], lambda a, r: first(r), {})
    n, dim = rng.choice([0, 1, 50, 513]), rng.choice([2, 8, 64])
    kw = {}
    if rng.random() < 0.5:
        kw["base"] = rng.choice([100.0, 10000.0])
    if rng.random() < 0.5:
        kw["dtype"] = rng.choice(FLOATS)
    c = Call("position_sinusoidal_fwd", [n, dim, "cpu"], kw,
             lambda a, k: [sinusoidal64(a[0], a[1], k.get("base", 10000.0))], lambda a, r: first(r), {})
    c.out_dtype = lambda a: kw.get("dtype", torch.float32)
    return c


DRAWS = [
    (draw_norm, "rms_norm_fwd"), (draw_norm, "layer_norm"), (draw_norm, "fused"),
    (draw_norm_bwd, "rms"), (draw_norm_bwd, "layer"),
    (draw_unary, "relu"), (draw_unary, "silu"), (draw_unary, "gelu"), (draw_unary, "sigmoid"),
    (draw_gated, "silu_and_mul"), (draw_gated, "gelu_and_mul"), (draw_gated, "gelu_tanh_and_mul"),
    (draw_softmax, "softmax"), (draw_softmax, "log_softmax"),
    (draw_rope, "neox"), (draw_rope, "non_neox"), (draw_rope, "qk_norm"),
    (draw_factory, "alibi"), (draw_factory, "sinusoidal"),
]


# ---- mutations: each breaks (or stresses) one manifest rule ---------------------------------------------

def tensor_slots(c):
    return [i for i, a in enumerate(c.args) if isinstance(a, torch.Tensor)]


def m_dtype(rng, c, g):
    i = rng.choice(tensor_slots(c))
    c.args[i] = c.args[i].to(rng.choice(OTHER_DTYPES + FLOATS))


def m_rank(rng, c, g):
    i = rng.choice(tensor_slots(c))
    t = c.args[i]
    c.args[i] = t.unsqueeze(0) if (rng.random() < 0.5 or t.dim() == 0) else t.select(0, 0) if t.shape[0] else t.sum(0)


def m_shape(rng, c, g):
    i = rng.choice(tensor_slots(c))
    t = c.args[i]
    if t.dim() == 0:
        return m_rank(rng, c, g)
    d = rng.randrange(t.dim())
    shape = list(t.shape)
    shape[d] = max(0, shape[d] + rng.choice([-1, 1, 2]))
    c.args[i] = rand(rng, shape, t.dtype, g) if t.dtype != torch.int64 else torch.zeros(shape, dtype=t.dtype)


def m_strides(rng, c, g):
    """A non-contiguous view with the same values: transposed storage, every other element, an offset."""
    i = rng.choice(tensor_slots(c))
    t = c.args[i]
    kind = rng.choice(["t", "step", "offset"])
    if kind == "t" and t.dim() >= 2:
        c.args[i] = t.transpose(-1, -2).contiguous().transpose(-1, -2)
    elif kind == "step" and t.dim() >= 1:
        wide = torch.zeros(list(t.shape[:-1]) + [2 * t.shape[-1]], dtype=t.dtype)
        wide[..., ::2] = t
        c.args[i] = wide[..., ::2]
    else:
        flat = torch.zeros(t.numel() + 3, dtype=t.dtype)
        flat[3:] = t.reshape(-1)
        c.args[i] = flat[3:].view(t.shape)
    c.mutation = "strides"


def m_zero(rng, c, g):
    """Zero rows: every tensor with the first tensor's leading size is cut to 0 there (valid)."""
    slots = [i for i in tensor_slots(c) if c.args[i].dim() >= 1]
    if not slots:
        return m_param(rng, c, g)
    n = c.args[slots[0]].shape[0]
    for i in slots:
        if c.args[i].shape[0] == n:
            c.args[i] = c.args[i][:0]


def m_nonfinite(rng, c, g):
    i = rng.choice(tensor_slots(c))
    t = c.args[i]
    if not t.dtype.is_floating_point or t.numel() == 0:
        return
    t = t.clone()
    flat = t.view(-1)
    for _ in range(rng.choice([1, 3])):
        flat[rng.randrange(flat.numel())] = rng.choice([float("nan"), float("inf"), float("-inf")])
    c.args[i] = t


def m_huge(rng, c, g):
    """A read input expanded to 2^30 rows: its contiguous copy is over the size limit."""
    cands = [i for i in tensor_slots(c) if i not in c.written and c.args[i].dim() >= 1
             and c.args[i].shape[-1] * c.args[i].element_size() >= 32]
    if not cands:
        return m_dtype(rng, c, g)
    i = rng.choice(cands)
    t = c.args[i]
    c.args[i] = t.reshape(-1)[: t.shape[-1]].expand(HUGE_ROWS, t.shape[-1])
    c.expect_refusal = c.expect_refusal or "huge"


def m_meta(rng, c, g):
    for i in tensor_slots(c):
        c.args[i] = c.args[i].to("meta")
    if "cpu" in c.args:
        c.args[c.args.index("cpu")] = "meta"
    c.mutation = "meta"


def m_mixed_device(rng, c, g):
    slots = tensor_slots(c)
    if len(slots) < 2:
        return m_meta(rng, c, g)
    i = rng.choice(slots[1:])
    c.args[i] = c.args[i].to("meta")
    c.expect_refusal = "mixed devices"


def m_param(rng, c, g):
    """A bad or odd param: normalized_shape, eps, dim, approximate, num_heads, dim, dtype, base."""
    ints = [i for i, a in enumerate(c.args) if isinstance(a, int) and not isinstance(a, bool)]
    lists = [i for i, a in enumerate(c.args) if isinstance(a, list)]
    strs = [i for i, a in enumerate(c.args) if isinstance(a, str) and a not in ("cpu", "meta")]
    choice = rng.random()
    if lists and choice < 0.5:
        i = rng.choice(lists)
        c.args[i] = rng.choice([[], [0], [-1], [c.args[i][-1] + 1], [2 ** 21], c.args[i] * 2])
    elif ints and choice < 0.8:
        i = rng.choice(ints)
        c.args[i] = rng.choice([-1, 0, 1, 3, -7, 2 ** 40, c.args[i] + 1])
    elif strs:
        c.args[rng.choice(strs)] = rng.choice(["sigmoid", "", "TANH"])
    elif "dtype" in c.kwargs or c.op == "position_sinusoidal_fwd":
        c.kwargs["dtype"] = rng.choice([torch.float64, torch.int32])
    elif c.kwargs.get("base") is not None or c.op == "position_sinusoidal_fwd":
        c.kwargs["base"] = rng.choice([0.0, -1.0, float("nan")])
    else:
        floats = [i for i, a in enumerate(c.args) if isinstance(a, float)]
        if floats:
            c.args[rng.choice(floats)] = rng.choice([-1.0, 0.0, float("nan")])
    c.mutation = "param"


def m_alias(rng, c, g):
    """A written tensor passed again as another argument, or overlapping one."""
    if not c.written:
        return m_requires_grad(rng, c, g)
    w = rng.choice(c.written)
    others = [i for i in tensor_slots(c) if i != w and c.args[i].dtype == c.args[w].dtype]
    if c.out is not None and c.args[0].dtype == c.args[c.out].dtype:
        x = c.args[0]
        c.args[c.out] = x[..., : x.shape[-1] // 2]
    elif others:
        c.args[rng.choice(others)] = c.args[w]
    else:
        return m_requires_grad(rng, c, g)
    # Not necessarily refused: an overlap torch cannot tell cheaply (a strided view) may be computed,
    # and then the written results must still be what the oracle gives from the original values.


def m_internal_overlap(rng, c, g):
    if not c.written:
        return m_strides(rng, c, g)
    w = rng.choice(c.written)
    t = c.args[w]
    if t.dim() == 0 or t.shape[0] < 2:
        return m_strides(rng, c, g)
    c.args[w] = t[:1].expand(t.shape)
    c.expect_refusal = "internal overlap"


def m_out(rng, c, g):
    if c.out is None:
        return m_param(rng, c, g)
    o = c.args[c.out]
    kind = rng.choice(["shape", "dtype", "grad", "noncontig"])
    if kind == "shape":
        c.args[c.out] = torch.empty(list(o.shape) + [1], dtype=o.dtype)
    elif kind == "dtype":
        c.args[c.out] = o.to(torch.float64)
    elif kind == "grad":
        c.args[c.out] = o.clone().requires_grad_()
        c.expect_refusal = "out requires grad"
    else:
        c.args[c.out] = torch.empty(list(o.shape[:-1]) + [2 * o.shape[-1]], dtype=o.dtype)[..., ::2]
    c.mutation = "out"


def m_requires_grad(rng, c, g):
    slots = [i for i in tensor_slots(c) if c.args[i].dtype.is_floating_point]
    if not slots:
        return m_dtype(rng, c, g)
    i = rng.choice(slots)
    c.args[i] = c.args[i].detach().clone().requires_grad_()
    c.expect_refusal = "requires grad"


def m_device(rng, c, g):
    if "cpu" not in c.args:
        return m_meta(rng, c, g)
    c.args[c.args.index("cpu")] = "cuda" if not torch.cuda.is_available() else "cuda:%d" % (torch.cuda.device_count() + 1)
    c.expect_refusal = "no such device"


def m_types(rng, c, g):
    """Arguments of the wrong Python type, a missing one, an unknown keyword (the schema refuses)."""
    kind = rng.choice(["type", "none", "missing", "keyword"])
    if kind == "keyword":
        c.kwargs["bogus"] = 1
        c.expect_refusal = "unknown keyword"
    elif kind == "missing":  # dropping a trailing param with a default is a valid call
        schema = getattr(torch.ops.tileops, c.op).default._schema
        dropped = schema.arguments[len(c.args) - 1]
        if dropped.has_default_value():
            c.pad = [list(dropped.default_value) if isinstance(dropped.default_value, (list, tuple))
                     else dropped.default_value]
        else:
            c.expect_refusal = "missing argument"
        c.args = c.args[:-1]
    else:
        # Not a string where a Device goes: torch parses device strings before the operator is
        # known, and its error cannot name it (docs/RELIABILITY.md).
        i = rng.choice([i for i, a in enumerate(c.args) if a not in ("cpu", "meta")] or [0])
        c.args[i] = None if kind == "none" and isinstance(c.args[i], torch.Tensor) else rng.choice(
            [2.5, "x", [1.5], (torch.ones(1),), object()])


MUTATIONS = [(None, 30), (m_dtype, 8), (m_rank, 5), (m_shape, 8), (m_strides, 8), (m_zero, 4), (m_nonfinite, 6),
             (m_huge, 3), (m_meta, 4), (m_mixed_device, 4), (m_param, 8), (m_alias, 8), (m_internal_overlap, 6),
             (m_out, 12), (m_requires_grad, 3), (m_device, 2), (m_types, 3)]


def make_call(seed: int, index: int) -> Call:
    rng = random.Random(seed * 1_000_003 + index)
    g = torch.Generator().manual_seed(seed * 7919 + index)
    draw, name = DRAWS[index % len(DRAWS)] if index < len(DRAWS) else rng.choice(DRAWS)
    c = draw(rng, g, name)
    muts = MUTATIONS if tensor_slots(c) else [(m, w) for m, w in MUTATIONS if m in (None, m_param, m_device, m_meta, m_types)]
    muts = [(m, w) for m, w in muts if (m is not m_out or c.out is not None)
            and (m not in (m_alias, m_internal_overlap) or c.written)]
    mut = rng.choices([m for m, _ in muts], weights=[w for _, w in muts])[0]
    if mut is not None:
        c.mutation = mut.__name__[2:]
        mut(rng, c, g)
    return c
