"""The elementwise family's test cases, read from manifests/elementwise.yaml (through the code
generator's model), so that one parametrised test covers every entry: its dtypes, its params, its
ref_api, broadcast sample shapes and sample values with the special cases (NaN, +-inf, -0.0,
denormals, integer extremes)."""
import glob
import os
import sys
from dataclasses import dataclass

import torch

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "scripts"))
from codegen.__main__ import load_ops  # noqa: E402

# Values for params the entry has no default for, or whose default would not exercise them. Ints:
# valid for every dtype an entry takes.
PARAMS = {
    "AddFwdOp": {"alpha": 2},
    "ClampScalarFwdOp": {"min": -3, "max": 5},
    "ClampMinFwdOp": {"min": -3},
    "ClampMaxFwdOp": {"max": 5},
    "MaskedFillScalarFwdOp": {"value": 2},
    "LeakyReluFwdOp": {"negative_slope": 0.2},
    "EluFwdOp": {"alpha": 0.7},
    "HardtanhFwdOp": {"min_val": -0.5, "max_val": 2.0},
    "SoftplusFwdOp": {"beta": 2.0, "threshold": 4.0},
    "LerpFwdOp": {"weight": 0.7},
}

# ref_api calls that need a word more: torch.round takes `decimals` for floating inputs only.
REFS = {"RoundFwdOp": lambda x, decimals=0: torch.round(x) if decimals == 0 else torch.round(x, decimals=decimals)}

# Broadcast sample shapes by arity: every input broadcasts in some dim; entries whose inputs have a
# fixed rank (masked_fill's 0-dim value) name theirs.
SHAPES = {1: [(4, 33)], 2: [(3, 1, 33), (4, 33)], 3: [(4, 33), (3, 1, 33), (33,)], 4: [(4, 33), (3, 1, 33), (33,), (3, 4, 1)]}
ENTRY_SHAPES = {"MaskedFillFwdOp": [(3, 1, 33), (4, 33), ()], "PreluFwdOp": [(3, 5, 7), (5,)]}


@dataclass(frozen=True)
class Case:
    cls: str
    stem: str
    inputs: tuple  # (name, dtypes) per input; one dtype = fixed (e.g. a bool condition)
    params: dict
    ref_api: str
    in_place: bool
    has_out: bool
    along: tuple = ()  # names of the inputs of shape along(<input>, <dim>) (prelu's weight)

    def ref(self, *args, **params):
        if self.cls in REFS:
            return REFS[self.cls](*args, **params)
        fn = eval(self.ref_api, {"torch": torch})  # a name in the torch namespace, e.g. torch.add
        return fn(*args, **params)

    @property
    def dtypes(self):
        """The dtypes of the entry's first promoted input (each sample uses one for all of them)."""
        return next(d for _, d in self.inputs if len(d) > 1) if any(len(d) > 1 for _, d in self.inputs) else self.inputs[0][1]

    def params_for(self, dtype):
        """The test params for a dtype: bool inputs take bool numbers (torch refuses others)."""
        if dtype != torch.bool:
            return dict(self.params)
        return {k: bool(v) if isinstance(v, int) else v for k, v in self.params.items()}

    @property
    def float_dtype(self):
        """A floating dtype of the entry if it has one (in-place results must cast into the input)."""
        return next((d for d in self.dtypes if d.is_floating_point), self.dtypes[-1])

    @property
    def shapes(self):
        return ENTRY_SHAPES.get(self.cls, SHAPES[len(self.inputs)])

    def in_place_shapes(self, shape):
        """Sample shapes where the written first input has `shape` and the others broadcast into it."""
        return [shape] + [() if s == () else shape[len(shape) - min(len(s), len(shape)):] for s in self.shapes[1:]]

    def op(self, branch=""):
        return getattr(torch.ops.tileops, self.stem + branch)


def _cases():
    ops = load_ops(glob.glob(os.path.join(_ROOT, "manifests", "*.yaml")), _ROOT)
    out = {}
    for op in ops:
        if not op.elementwise or op.status != "implemented":
            continue
        dts = tuple(tuple(getattr(torch, n) for n in (i.dtype.names if i.dtype.kind == "union" else ())) for i in op.inputs)
        # same_as(x) inputs take x's dtypes
        names = [i.name for i in op.inputs]
        dts = tuple(d if d else dts[names.index(i.dtype.ref)] for d, i in zip(dts, op.inputs))
        params = {p.name: PARAMS.get(op.cls, {}).get(p.name, p.default) for p in op.params}
        out[op.cls] = Case(op.cls, op.base_name, tuple(zip(names, dts)), params, op.ref_api,
                           any(i.mutated == "optional" for i in op.inputs), any(o.buffer for o in op.outputs),
                           tuple(i.name for i in op.inputs if type(i.shape).__name__ == "Along"))
    return out


CASES = _cases()


def values(shape, dtype, seed=0):
    """Sample values of a dtype: spread floats with NaN/inf/-0.0/denormals, or integers up to the extremes."""
    g = torch.Generator().manual_seed(seed)
    n = 1
    for s in shape:
        n *= s
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        x = (torch.randn(n, generator=g) * 3).to(dtype)
        tiny = torch.finfo(dtype).tiny
        special = torch.tensor([float("nan"), float("inf"), float("-inf"), -0.0, 0.0, tiny / 4, -tiny / 2, 1.0, -1.0,
                                0.5, 2.5, -2.5], dtype=torch.float32).to(dtype)
        k = min((n + 2) // 3, special.numel())
        x[0: 3 * k: 3] = special[:k]
        return x.reshape(shape)
    info = torch.iinfo(dtype)
    x = torch.randint(max(info.min, -100), min(info.max, 100) + 1, (n,), generator=g, dtype=torch.int64).to(dtype)
    ext = torch.tensor([info.min, info.max, 0, 1, -1 if info.min < 0 else 2], dtype=torch.int64).to(dtype)
    k = min((n + 4) // 5, ext.numel())
    x[0: 5 * k: 5] = ext[:k]
    return x.reshape(shape)


def sample(case, dtype, device="cpu", shapes=None, seed=0):
    shapes = shapes or case.shapes
    args = []
    for k, ((_, dts), shape) in enumerate(zip(case.inputs, shapes)):
        d = dts[0] if len(dts) == 1 else dtype
        args.append(values(shape, d, seed + k).to(device))
    return args


def _special_values():
    f = torch.finfo(torch.float32)
    v = [0.0, -0.0, 1.0, -1.0, 3.0, -7.5, 0.1, 1e-3, 1e30, -1e30, f.max, -f.max, f.tiny, f.tiny * 0.5, -f.tiny * 0.25,
         float("inf"), float("-inf"), float("nan"), 8388608.0, 8388607.0, 16777216.0, 2.0 ** 100]
    return torch.tensor(v, dtype=torch.float32)


def modulo_pairs():
    """float32 (dividend, divisor) pairs for fmod, remainder and floor_divide: every bfloat16 dividend
    against 24 bfloat16 divisors, random pairs, quotients just below an integer that a / b rounds
    onto it, and every pair of special values."""
    g = torch.Generator().manual_seed(7)
    # every bfloat16 bit pattern as the dividend, each against 24 divisors spread over bfloat16's range
    every = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).float()
    div = torch.tensor([1.0, -1.0, 3.0, -0.375, 0.1, 7.0e-3, 1.5e5, -2.5e-30, 6.0e37, 1.2e-38, 9.2e-41, 1.0e10,
                        0.0, -0.0, float("inf"), float("nan"), 255.0, -128.0, 1.0e-20, 3.1e20, 2.0, -5.0, 0.5,
                        1.0e-6]).to(torch.bfloat16).float()
    a1 = every.repeat(len(div))
    b1 = div.repeat_interleave(len(every))
    # random float32 pairs, magnitudes 2^-30 .. 2^30 each
    a2 = torch.randn(200000, generator=g) * torch.exp2(torch.randint(-30, 30, (200000,), generator=g).float())
    b2 = torch.randn(200000, generator=g) * torch.exp2(torch.randint(-30, 30, (200000,), generator=g).float())
    # a just below a multiple of b: a / b rounds up onto the integer (the one-step correction)
    k = torch.randint(1, 1 << 22, (100000,), generator=g).float()
    b3 = torch.rand(100000, generator=g) * 10 + 0.01
    a3 = torch.nextafter(k * b3, torch.zeros_like(b3)) * torch.where(torch.rand(100000, generator=g) < 0.5, -1.0, 1.0)
    s = _special_values()
    a4, b4 = s.repeat_interleave(len(s)), s.repeat(len(s))
    return torch.cat([a1, a2, a3, a4]), torch.cat([b1, b2, b3, b4])
