"""The dim reductions (SumFwdOp ... LogSumExpFwdOp) as one table, shared by the CPU and GPU tests.

Each entry: the operator, a torch function computing ref_api with the op's params, the x dtypes the
manifest lists, the kind of its `dim` param ('list', 'listed' (an empty list reduces none), 'int',
'nonempty' (a list of at least one dim)), its extra params and its GPU tolerance (float32 accumulation
then one rounding to y's dtype: rtol per dtype of y; count-like and index outputs are exact)."""
import math

import torch

FLOATS = (torch.float16, torch.bfloat16, torch.float32)
ANY = FLOATS + (torch.bool, torch.int32, torch.int64)


def _dims(dim):
    return None if dim is None else list(dim) if isinstance(dim, (list, tuple)) else dim


def _vector_norm(ord_):
    def ref(x, dim=None, keepdim=False):
        return torch.linalg.vector_norm(x, ord_, _dims(dim), keepdim)
    return ref


def _prod(x, dim=None, keepdim=False, dtype=None):
    if dim is None:  # torch.prod has no dim=None overload taking keepdim
        r = torch.prod(x, dtype=dtype)
        return r.reshape([1] * x.dim()) if keepdim else r
    return torch.prod(x, dim, keepdim, dtype=dtype)


def _argext(fn):
    def ref(x, dim=None, keepdim=False):
        return fn(x, dim, keepdim)
    return ref


def _count_nonzero(x, dim=None):
    return torch.count_nonzero(x, _dims(dim))


class Case:
    def __init__(self, stem, ref, dtypes=FLOATS, dim="list", extra=None, rtol=None, atol=None, refuses_empty=False,
                 outputs=1):
        self.stem, self.ref, self.dtypes, self.dim = stem, ref, dtypes, dim
        self.extra = extra or {}            # param -> values the tests try besides the default
        self.rtol = rtol or {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
        self.atol = atol or {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 1e-2}
        self.refuses_empty = refuses_empty  # torch refuses a reduction over no elements
        self.outputs = outputs

    @property
    def op(self):
        return getattr(torch.ops.tileops, f"reduction_{self.stem}_fwd")

    @property
    def name(self):
        return f"reduction_{self.stem}_fwd"

    def __repr__(self):
        return self.stem

    def dims(self, ndim):
        """dim values worth trying on an x of `ndim` dims."""
        if self.dim == "int":
            return [None] + list(range(-max(ndim, 1), max(ndim, 1)))
        out = [None, [], [-1], [0]] if self.dim != "nonempty" else [[-1], [0]]
        if ndim >= 2:
            out += [[0, 1], [1, -1], [ndim - 1, 0]]
        if ndim >= 3:
            out += [[0, 2], [1], [0, 1, 2]]
        return out

    def call(self, x, dim, keepdim=None, **extra):
        kwargs = dict(extra)
        if keepdim is not None and self.stem != "count_nonzero":
            kwargs["keepdim"] = keepdim
        return self.op(x, dim, **kwargs)

    def expect(self, x, dim, keepdim=None, **extra):
        kwargs = dict(extra)
        if keepdim is not None and self.stem != "count_nonzero":
            kwargs["keepdim"] = keepdim
        return self.ref(x, _dims(dim), **kwargs)


def _moment(fn):
    def ref(x, dim=None, keepdim=False, correction=1):
        return fn(x, dim, correction=correction, keepdim=keepdim)
    return ref


def _all_any(fn):
    def ref(x, dim=None, keepdim=False):
        return fn(x, dim=dim, keepdim=keepdim) if dim is not None else fn(x, dim=None, keepdim=keepdim)
    return ref


def _logsumexp(x, dim, keepdim=False):
    return torch.logsumexp(x, dim, keepdim)


DTYPE_VALUES = {"dtype": [torch.float32, torch.bfloat16]}
CORRECTION = {"correction": [0, 2]}
EXACT = {d: 0.0 for d in ANY}

CASES = [
    Case("sum", lambda x, dim=None, keepdim=False, dtype=None: torch.sum(x, dim, keepdim, dtype=dtype),
         extra=DTYPE_VALUES),
    Case("mean", lambda x, dim=None, keepdim=False, dtype=None: torch.mean(x, dim, keepdim, dtype=dtype),
         extra=DTYPE_VALUES),
    Case("amax", lambda x, dim=None, keepdim=False: torch.amax(x, [] if dim is None else dim, keepdim),
         rtol=EXACT, atol=EXACT, refuses_empty=True),
    Case("amin", lambda x, dim=None, keepdim=False: torch.amin(x, [] if dim is None else dim, keepdim),
         rtol=EXACT, atol=EXACT, refuses_empty=True),
    Case("prod", _prod, dim="int", extra=DTYPE_VALUES),
    Case("var", _moment(torch.var), extra=CORRECTION),
    Case("std", _moment(torch.std), extra=CORRECTION),
    Case("var_mean", _moment(torch.var_mean), extra=CORRECTION, outputs=2),
    Case("argmax", _argext(torch.argmax), dim="int", rtol=EXACT, atol=EXACT, refuses_empty=True),
    Case("argmin", _argext(torch.argmin), dim="int", rtol=EXACT, atol=EXACT, refuses_empty=True),
    Case("all", _all_any(torch.all), dtypes=ANY, dim="listed", rtol=EXACT, atol=EXACT),
    Case("any", _all_any(torch.any), dtypes=ANY, dim="listed", rtol=EXACT, atol=EXACT),
    Case("count_nonzero", _count_nonzero, dtypes=ANY, rtol=EXACT, atol=EXACT),
    Case("l1_norm", _vector_norm(1)),
    Case("l2_norm", _vector_norm(2)),
    Case("inf_norm", _vector_norm(math.inf), rtol=EXACT, atol=EXACT, refuses_empty=True),
    Case("log_sum_exp", _logsumexp, dim="nonempty"),
]
BY_STEM = {c.stem: c for c in CASES}


def sample(shape, dtype, device="cpu", scale=3.0):
    """x with zeros among its values (for all/any/count_nonzero) and both signs."""
    if dtype == torch.bool:
        return torch.rand(shape, device=device) > 0.3
    if not dtype.is_floating_point:
        return torch.randint(-2, 3, shape, device=device, dtype=dtype)
    x = torch.randn(shape, device=device) * scale
    x[torch.rand(shape, device=device) < 0.1] = 0
    return x.to(dtype)
