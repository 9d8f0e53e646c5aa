"""The manifests' workloads as complete operator calls, compiled into libtileops for the offline
warm-up (python -m tileops.warmup --workloads): one call per workload, dtype and operator branch,
with every argument in schema order.

A workload names some input shapes, dtypes and params. The rest follows from the signature: each
given shape binds the names of its pattern ("[..., *normalized_shape]" binds normalized_shape once
its length is known), then every other input's shape is evaluated from the bound names. An optional
input whose shape cannot be evaluated, or that the workload gives as null, is left out (None); a
required one is an error naming what the workload must give. Dtypes: the workload's dtype for every input whose dtype union holds it, else
the union's first; same_as inputs follow. Shape rules and dtype combos are checked by the boundary
itself when the warm-up makes the call.
"""
from __future__ import annotations

import json

from . import exprs
from .emit_cpp import banner
from .model import NO_DEFAULT, Op
from .parse import ManifestError


def _fail(op: Op, workload: dict, msg: str):
    raise ManifestError(op.path, op.line, op.cls, f"workload '{workload['name']}': {msg}")


def _eval(node, env: dict):
    """Integer value of a shape expression over bound names; None while a name is unbound."""
    if isinstance(node, exprs.Num):
        return node.value
    if isinstance(node, exprs.Name):
        v = env.get(node.id)
        return v if isinstance(v, int) else None
    if isinstance(node, exprs.Bin):
        a, b = _eval(node.lhs, env), _eval(node.rhs, env)
        if a is None or b is None:
            return None
        return {"+": a + b, "-": a - b, "*": a * b, "//": a // b if b else None, "%": a % b if b else None}.get(node.op)
    return None


def _bind_dim(op, w, inp, node, dim: int, env: dict):
    """Binds the one unknown name of `node` (a name, or num * name) so that it evaluates to dim."""
    if _eval(node, env) is not None:
        if _eval(node, env) != dim:
            _fail(op, w, f"input '{inp}' has {dim} where its shape says {exprs.render(node)} = {_eval(node, env)}")
        return
    if isinstance(node, exprs.Name):
        env[node.id] = dim
        return
    if isinstance(node, exprs.Bin) and node.op == "*":
        for k, n in ((node.lhs, node.rhs), (node.rhs, node.lhs)):
            factor = _eval(k, env)
            if factor and isinstance(n, exprs.Name) and dim % factor == 0:
                env[n.id] = dim // factor
                return
    _fail(op, w, f"cannot solve {exprs.render(node)} = {dim} for input '{inp}'; give the names it uses as params")


def _bind(op: Op, w: dict, inp, shape: list, env: dict):
    pat = inp.shape
    if isinstance(pat, (exprs.SameAs, exprs.AnyShape, exprs.Along)):  # any: the workload's shape, nothing to bind
        return
    def length(d):
        if isinstance(d, exprs.Splice):
            return len(env[d.param]) if isinstance(env.get(d.param), list) else None
        return None if isinstance(d, exprs.Ellipsis_) else 1
    unknown = [d for d in pat.dims if length(d) is None]
    if len(unknown) > 1:
        names = [d.param for d in unknown if isinstance(d, exprs.Splice)]
        _fail(op, w, f"input '{inp.name}' {inp.shape_text} does not fix {', '.join(names)}; give it in params")
    known = sum(length(d) or 0 for d in pat.dims)
    rest = len(shape) - known
    if rest < 0 or (not unknown and rest != 0):
        _fail(op, w, f"input '{inp.name}' has shape {shape}, which does not match {inp.shape_text}")
    i = 0
    for d in pat.dims:
        n = length(d)
        n = rest if n is None else n
        part = shape[i:i + n]
        if isinstance(d, exprs.Splice):
            if d.param in env and env[d.param] != part:
                _fail(op, w, f"input '{inp.name}' ends in {part}, but {d.param} is {env[d.param]}")
            env[d.param] = list(part)
        elif not isinstance(d, exprs.Ellipsis_):
            _bind_dim(op, w, inp.name, d, part[0], env)
        i += n


def _shape_of(inp, env: dict, shapes: dict):
    """The shape an input not given by the workload gets from the bound names; None if it cannot."""
    if isinstance(inp.shape, exprs.SameAs):
        return shapes.get(inp.shape.input)
    if isinstance(inp.shape, exprs.AnyShape):
        return None  # an elementwise input the workload does not give: no shape to derive
    if isinstance(inp.shape, exprs.Along):  # one element per index of that dim
        ref = shapes.get(inp.shape.input)
        return None if ref is None else ([ref[inp.shape.dim]] if len(ref) > inp.shape.dim else [1])
    out = []
    for d in inp.shape.dims:
        if isinstance(d, exprs.Ellipsis_):
            return None
        if isinstance(d, exprs.Splice):
            if not isinstance(env.get(d.param), list):
                return None
            out += env[d.param]
        else:
            v = _eval(d, env)
            if v is None:
                return None
            out.append(v)
    return out


def _dtypes(op: Op, dtype: str | None) -> dict:
    out = {}
    for inp in op.inputs:
        rule = inp.dtype
        if rule.kind == "union":
            out[inp.name] = dtype if dtype in rule.names else rule.names[0]
    for inp in op.inputs:
        name = inp.name
        while op.input(name) is not None and op.input(name).dtype.kind != "union":
            name = op.input(name).dtype.ref
        out[inp.name] = out.get(name)
    return out


def resolve(op: Op, w: dict) -> list[dict]:
    """The calls of one workload: one per dtype and per operator branch that takes no `out`."""
    env = {}
    for p in op.params:
        if p.name in (w.get("params") or {}):
            v = w["params"][p.name]
            env[p.name] = list(v) if isinstance(v, (list, tuple)) else v
    for k in w.get("params") or {}:
        if op.param(k) is None:
            _fail(op, w, f"unknown param '{k}' (params: {', '.join(p.name for p in op.params) or 'none'})")
    # An optional input given as null is left out of the calls (e.g. a norm without its affine weight).
    absent = {i.name for i in op.inputs if i.name in w and w[i.name] is None}
    for name in absent:
        if not op.input(name).optional:
            _fail(op, w, f"input '{name}' is not optional; give its shape, not null")
    given = {i.name: list(w[i.name]) for i in op.inputs if i.name in w and i.name not in absent}
    for inp in op.inputs:
        if inp.name in given:
            _bind(op, w, inp, given[inp.name], env)
    shapes = dict(given)
    for _ in op.inputs:  # same_as chains resolve in a few rounds
        for inp in op.inputs:
            if inp.name not in shapes and inp.name not in absent:
                s = _shape_of(inp, env, shapes)
                if s is not None:
                    shapes[inp.name] = s
    for inp in op.inputs:
        if inp.name not in shapes and not inp.optional:
            _fail(op, w, f"cannot tell the shape of input '{inp.name}' ({inp.shape_text}); give it")
    params = []
    for p in op.params:
        if p.name in env:
            v = env[p.name]
        elif p.default is not NO_DEFAULT:
            v = list(p.default) if isinstance(p.default, tuple) else p.default
        elif p.type == "Device":
            v = None  # the warm-up's CPU device
        else:
            _fail(op, w, f"give params.{p.name} (no default, and no input shape fixes it)")
        params.append({"device": True} if p.type == "Device" else
                      {"dtype": v} if p.type == "ScalarType" and v is not None else {"value": v})
    calls = []
    for dtype in w.get("dtypes") or [None]:
        dts = _dtypes(op, dtype)
        args = [{"shape": shapes[i.name], "dtype": dts[i.name]} if i.name in shapes else {"value": None}
                for i in op.inputs]
        for branch in op.branches:
            if branch.out:
                continue
            if op.elementwise and "_writes_" in op.operator_name(branch):
                continue  # in place holds only when the input can take the result's shape and dtype
            calls.append({"op_class": op.cls, "operator": op.operator_name(branch), "workload": w["name"],
                          "dtype": dtype, "args": args + params})
    return calls


def workload_calls(ops) -> list[dict]:
    calls = []
    for op in ops:
        if op.status == "implemented":  # a composite's call plans the sub-ops it makes
            for w in op.workloads:
                calls += resolve(op, w)
    return calls


def emit(ops) -> str:
    table = json.dumps(workload_calls(ops), sort_keys=True)
    return "\n".join([
        banner(o.path for o in ops).rstrip("\n"),
        "// The manifests' workloads as complete operator calls (scripts/codegen/emit_workloads.py).",
        "namespace {",
        f'const char kJson[] = R"tileops_json({table})tileops_json";',
        "}  // namespace",
        "",
        'extern "C" __attribute__((visibility("default"))) const char* tileops_workload_calls_json() { return kJson; }',
    ]) + "\n"
