"""Stage 2: turn parsed manifests into plain immutable records, checking the grammar.

Every rule broken raises ManifestError pointing at the manifest line, the entry, the rule and the fix.
Nothing here writes files or knows about C++.
"""
from __future__ import annotations

import keyword
import itertools
import math
import re
from dataclasses import dataclass, field

from . import exprs
from .parse import LList, LMap, ManifestError, RawManifest

# Manifest dtype name -> (ATen C++ constant, torch name). The manifest grammar accepts exactly these.
DTYPES = {
    "float16": "at::kHalf",
    "bfloat16": "at::kBFloat16",
    "float32": "at::kFloat",
    "float64": "at::kDouble",
    "int8": "at::kChar",
    "float8_e4m3fn": "at::kFloat8_e4m3fn",
    "uint8": "at::kByte",
    "int16": "at::kShort",
    "int32": "at::kInt",
    "int64": "at::kLong",
    "bool": "at::kBool",
    "complex64": "at::kComplexFloat",
    "complex128": "at::kComplexDouble",
}
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")

# Param type -> schema type. A trailing '?' makes a param nullable (None allowed).
PARAM_TYPES = {
    "int": "int",
    "float": "float",
    "bool": "bool",
    "str": "str",
    "int[]": "SymInt[]",
    "Device": "Device",
    "ScalarType": "ScalarType",
    "Scalar": "Scalar",  # a Python number (int, float or bool), as in torch.add's alpha
    # an int that torch.compile may keep symbolic: a graph input, so a new value (a dropout seed a
    # step) reuses the graph; only the kernel reads it (no rules, choices or None)
    "SymInt": "SymInt",
}
STATUSES = ("spec-only", "implemented")

ENTRY_KEYS = {"family", "ref_api", "status", "doc", "signature", "workloads", "roofline", "composition", "autograd",
              "elementwise", "sharding"}
# `sharding:` (docs/MANIFEST.md): which dims of a DTensor call shard without communication.
SHARDING_KINDS = ("free", "except", "reduce", "matmul", "replicate")
SHARDING_KEYS = {"free", "partial", "except", "reduce", "combine", "matmul"}
SHARDING_COMBINES = ("sum", "max", "min")  # DTensor Partial reduce ops a reduction's shards combine by
AUTOGRAD_KEYS = {"backward", "no_grad", "grad_names"}
SIGNATURE_KEYS = {"inputs", "outputs", "params", "shape_rules", "dtype_combos"}
INPUT_KEYS = {"dtype", "shape", "optional", "mutated", "reduced_once", "doc"}
OUTPUT_KEYS = {"dtype", "shape", "buffer", "optional", "aliases", "doc"}
PARAM_KEYS = {"type", "default", "choices", "doc", "none"}
# What None stands for in a nullable param of an elementwise entry (`none:`), substituted by the engine.
NONE_VALUES = ("-inf", "inf", "min", "max", "zero")
NO_DEFAULT = object()

# C++ keywords a lower_snake name could take (Python's are keyword.kwlist).
CPP_KEYWORDS = frozenset("""alignas alignof asm auto bool break case catch char class const constexpr const_cast
    continue decltype default delete do double dynamic_cast else enum explicit export extern float for friend goto
    if inline int long mutable namespace new noexcept nullptr operator private protected public register
    reinterpret_cast return short signed sizeof static static_assert static_cast struct switch template this
    thread_local throw try typedef typeid typename union unsigned using virtual void volatile wchar_t while and or
    not xor bitand bitor compl""".split())


@dataclass(frozen=True)
class DTypeRule:
    kind: str  # 'union' | 'same_as' | 'promote_int_to_float' | 'dtype_or' | 'promote' | 'promote_float' | 'select'
    names: tuple = ()  # for 'union'; for 'promote'/'promote_float' with `in <union>`: the dtypes allowed
    ref: str | None = None  # for 'same_as' / 'promote_int_to_float'; the ScalarType? param (or optional input) of 'dtype_or'
    fallback: str | None = None  # for 'dtype_or': the input whose dtype applies when the param is None (the input absent)
    widen_int: bool = False  # 'dtype_or' with promote_int_to_long(<input>): integer and bool inputs give int64
    text: str = ""
    refs: tuple = ()  # for 'promote' / 'promote_float': the inputs whose dtypes are promoted
    cases: tuple = ()  # for 'select': (value or None, DTypeRule) per value of the str param `ref`


@dataclass(frozen=True)
class Input:
    name: str
    dtype: DTypeRule
    shape: object  # exprs.ShapeList | exprs.SameAs
    shape_text: str
    optional: bool
    mutated: str  # 'no' | 'always' | 'optional'
    line: int
    reduced_once: bool = False  # repeats along its reduced dims leave the result alone (all, any, amax, amin)


@dataclass(frozen=True)
class Output:
    name: str
    dtype: DTypeRule
    shape: object
    shape_text: str
    buffer: bool
    optional: bool
    aliases: str | None
    line: int


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # key of PARAM_TYPES
    nullable: bool
    default: object  # NO_DEFAULT or a Python value (None allowed when nullable)
    choices: tuple | None
    line: int
    none: str | None = None  # elementwise: what None stands for (NONE_VALUES)
    # `int[N]`: a constant list (schema int[N], C++ IntArrayRef) that torch also takes as one int,
    # repeated N times (avg_pool2d's kernel_size); an int[] (SymInt[]) of any length otherwise. The
    # grammar treats both as int[].
    length: int | None = None

    @property
    def schema_type(self) -> str:
        base = f"int[{self.length}]" if self.length else PARAM_TYPES[self.type]
        return base + ("?" if self.nullable else "")


@dataclass(frozen=True)
class Rule:
    node: object  # exprs.Cmp | exprs.Given | exprs.Flag | exprs.Not | exprs.Or
    text: str
    line: int


@dataclass(frozen=True)
class Branch:
    """One side-effect branch: which inputs are written, whether `out` is passed, which outputs are dropped."""

    writes: tuple
    out: bool
    without: tuple

    @property
    def suffix(self) -> str:
        parts = [f"_writes_{w}" for w in sorted(self.writes)]
        if self.out:
            parts.append("_out")
        parts += [f"_without_{o}" for o in sorted(self.without)]
        return "".join(parts)


@dataclass(frozen=True)
class Op:
    cls: str
    family: str
    ref_api: str
    status: str
    doc: str
    inputs: tuple
    outputs: tuple
    params: tuple
    rules: tuple
    dtype_combos: tuple
    workloads: tuple
    roofline: object
    composition: tuple
    path: str
    line: int
    op_id: int = field(default=-1, compare=False)
    autograd: str | None = None  # backward op class named by `autograd: {backward: ...}`
    elementwise: str | None = None  # the device expression of an elementwise op (`elementwise:`)
    # `elementwise: {<str param>: {<value>: <expr>}}`: the param and (value or None, expression) per case
    select: str | None = None
    select_cases: tuple = ()
    given_cases: tuple = ()  # ((names of the optional inputs given, expression), ...): an elementwise choice by presence
    autograd_line: int = 0
    # forward outputs named by `autograd: {no_grad: [...]}`: saved statistics, not differentiable
    autograd_no_grad: tuple = ()
    # `autograd: {grad_names: {<output>: <backward input>}}`: gradients not named d<output>, as (output, name)
    autograd_grad_names: tuple = ()
    # (kind, {key: value}) of `sharding:`; ("pointwise", {}) for an elementwise entry without one;
    # ("replicate", {}) where absent
    sharding: tuple = ("replicate", ())
    pairing: object = field(default=None, compare=False)  # Pairing, resolved once every entry is known

    @property
    def base_name(self) -> str:
        return operator_base_name(self.cls, self.family)

    @property
    def has_boundary(self) -> bool:
        # docs/CONTRACT.md §3: call-time tensor inputs and no composition.
        return bool(self.inputs) and not self.composition

    @property
    def branches(self) -> tuple:
        return enumerate_branches(self)

    def operator_name(self, branch: Branch) -> str:
        return self.base_name + branch.suffix

    @property
    def operator_names(self) -> tuple:
        return tuple(self.operator_name(b) for b in self.branches)

    @property
    def compile_op_names(self) -> tuple:
        if not self.has_boundary or self.status != "implemented":
            return ()
        return tuple(f"tileops::{n}" for n in self.operator_names)

    def input(self, name: str) -> Input | None:
        return next((i for i in self.inputs if i.name == name), None)

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def output(self, name: str) -> Output | None:
        return next((o for o in self.outputs if o.name == name), None)


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def operator_base_name(cls: str, family: str) -> str:
    stem = snake(cls[:-2] if cls.endswith("Op") else cls)
    if stem == family or stem.startswith(family + "_"):
        return stem
    return f"{family}_{stem}"


def enumerate_branches(op: Op) -> tuple:
    always = tuple(i.name for i in op.inputs if i.mutated == "always")
    maybe = [i.name for i in op.inputs if i.mutated == "optional"]
    has_buffer = any(o.buffer for o in op.outputs)
    droppable = [o.name for o in op.outputs if o.optional]
    out = []
    for picks in itertools.product((False, True), repeat=len(maybe)):
        writes = always + tuple(n for n, p in zip(maybe, picks) if p)
        # An output written into an input is not also passed as `out` (one place for one result).
        in_place_buffer = any(o.buffer and o.aliases in writes for o in op.outputs)
        for use_out in ((False, True) if has_buffer and not in_place_buffer else (False,)):
            for drops in itertools.product((False, True), repeat=len(droppable)):
                without = tuple(n for n, d in zip(droppable, drops) if d)
                out.append(Branch(tuple(sorted(writes)), use_out, tuple(sorted(without))))
    return tuple(out)


def returned_outputs(op: Op, branch: Branch) -> tuple:
    """Outputs a branch returns: not a written input, not the out buffer, not dropped."""
    result = []
    for o in op.outputs:
        if o.aliases and o.aliases in branch.writes:
            continue
        if o.buffer and branch.out:
            continue
        if o.name in branch.without:
            continue
        result.append(o)
    return tuple(result)


# ---------------------------------------------------------------------------------------------------
# Building records from the parsed YAML


class _Ctx:
    def __init__(self, path: str, cls: str):
        self.path, self.cls = path, cls

    def fail(self, line: int, msg: str):
        raise ManifestError(self.path, line, self.cls, msg)

    def keys(self, m, allowed: set, what: str, required: tuple = ()):
        if not isinstance(m, LMap):
            self.fail(getattr(m, "line", 0), f"{what} must be a mapping, got {type(m).__name__}")
        for k in m:
            if k not in allowed:
                self.fail(m.line_of(k), f"unknown key '{k}' in {what}; allowed: {', '.join(sorted(allowed))}")
        for k in required:
            if k not in m:
                self.fail(m.line, f"{what} is missing required key '{k}'")


def _select_cases(ctx: _Ctx, raw, line: int, params, what: str) -> tuple[str, tuple]:
    """`{<str param>: {<value>: <text>, ...}}`: one text per choice of the param (and `None` when it is
    nullable), picked by the call's value."""
    if not isinstance(raw, LMap) or len(raw) != 1:
        ctx.fail(line, f"{what}: a choice by param is a mapping with one key, a str param: "
                       "{<param>: {<value>: ..., None: ...}}")
    (name, cases), = raw.items()
    p = next((p for p in params if p.name == name), None)
    if p is None or p.type != "str" or not p.choices:
        ctx.fail(line, f"{what}: '{name}' must be a str param with choices")
    if not isinstance(cases, LMap):
        ctx.fail(line, f"{what}: '{name}' maps each of its values to a text")
    want = (["None"] if p.nullable else []) + list(p.choices)
    if sorted(cases) != sorted(want):
        ctx.fail(cases.line, f"{what}: the cases of '{name}' must be exactly {', '.join(want)} (got {', '.join(cases)})")
    return name, tuple((None if k == "None" else k, cases[k], cases.line_of(k)) for k in want)


def _dtype_rule(ctx: _Ctx, text, line: int, known_inputs: list[str], what: str, params=()) -> DTypeRule:
    if isinstance(text, LMap):
        name, cases = _select_cases(ctx, text, line, params, what)
        rules = tuple((v, _dtype_rule(ctx, t, ln, known_inputs, what)) for v, t, ln in cases)
        if any(r.kind == "select" for _, r in rules):
            ctx.fail(line, f"{what}: a dtype choice by param does not nest")
        text_of = "; ".join(f"{'None' if v is None else v}: {r.text}" for v, r in rules)
        return DTypeRule("select", ref=name, text=f"{{{name}: {text_of}}}", cases=rules)
    if not isinstance(text, str):
        ctx.fail(line, f"{what}: dtype must be a string like 'float16 | bfloat16' or 'same_as(x)'")
    t = text.strip()
    m = re.fullmatch(r"(promote|promote_float)\(([^()]*)\)(?:\s+in\s+(.+))?", t)
    if m:
        refs = tuple(n.strip() for n in m.group(2).split(","))
        for n in refs:
            if n not in known_inputs:
                ctx.fail(line, f"{what}: dtype '{t}' names unknown input '{n}'; "
                               f"known inputs: {', '.join(known_inputs) or '(none)'}")
        allowed = ()
        if m.group(3):  # the result type must be one of these (torch refuses bool for rounding division)
            allowed = tuple(n.strip() for n in m.group(3).split("|"))
            for n in allowed:
                if n not in DTYPES:
                    ctx.fail(line, f"{what}: unknown dtype '{n}' in '{t}'; known: {', '.join(DTYPES)}")
        return DTypeRule(m.group(1), names=allowed, text=t, refs=refs)
    m = re.fullmatch(r"(same_as|promote_int_to_float)\(\s*([A-Za-z_]\w*)\s*\)", t)
    if m:
        if m.group(2) not in known_inputs:
            ctx.fail(line, f"{what}: dtype '{t}' names unknown input '{m.group(2)}'; "
                           f"known inputs before it: {', '.join(known_inputs) or '(none)'}")
        return DTypeRule(m.group(1), ref=m.group(2), text=t)
    m = re.fullmatch(r"dtype_or\(\s*([A-Za-z_]\w*)\s*,\s*(?:([A-Za-z_]\w*)|promote_int_to_long\(\s*([A-Za-z_]\w*)\s*\))\s*\)"
                     r"(?:\s+in\s+(.+))?", t)
    if m:
        fallback = m.group(2) or m.group(3)
        if m.group(1) not in known_inputs or fallback not in known_inputs:
            ctx.fail(line, f"{what}: dtype '{t}' takes a ScalarType? param and an input; "
                           f"known: {', '.join(known_inputs) or '(none)'}")
        allowed = ()
        if m.group(4):  # the dtype it gives must be one of these (a float8 input's output needs the param)
            allowed = tuple(n.strip() for n in m.group(4).split("|"))
            for n in allowed:
                if n not in DTYPES:
                    ctx.fail(line, f"{what}: unknown dtype '{n}' in '{t}'; known: {', '.join(DTYPES)}")
        return DTypeRule("dtype_or", names=allowed, ref=m.group(1), fallback=fallback, text=t,
                         widen_int=m.group(3) is not None)
    names = tuple(n.strip() for n in t.split("|"))
    for n in names:
        if n not in DTYPES:
            ctx.fail(line, f"{what}: unknown dtype '{n}'; known: {', '.join(DTYPES)}")
    if len(set(names)) != len(names):
        ctx.fail(line, f"{what}: dtype union '{t}' repeats a dtype")
    return DTypeRule("union", names=names, text=t)


def _dtype_root(inputs, name: str) -> str:
    """The input whose dtype `name`'s dtype follows (through same_as chains); itself if none."""
    by_name = {i.name: i for i in inputs}
    while name in by_name and by_name[name].dtype.kind == "same_as":
        name = by_name[name].dtype.ref
    return name


def _dtype_combos(ctx: _Ctx, sig, inputs) -> tuple:
    """dtype_combos: every combo maps the same inputs (each with its own dtype union) to one dtype
    each; together they are the only dtype combinations of those inputs a call may pass."""
    raw = sig.get("dtype_combos") or LList()
    line = sig.line_of("dtype_combos")
    if not isinstance(raw, list):
        ctx.fail(line, "dtype_combos is a list of {input: dtype} mappings")
    by_name = {i.name: i for i in inputs}
    combos, names = [], None
    for n, combo in enumerate(raw):
        where = getattr(combo, "line", line)
        if not isinstance(combo, LMap) or not combo:
            ctx.fail(where, f"dtype combo #{n + 1}: each dtype combo maps input names to one dtype, "
                            "e.g. {q: float16, cos_sin_cache: float32}")
        for k, v in combo.items():
            if k not in by_name:
                ctx.fail(combo.line_of(k), f"dtype combo #{n + 1} names unknown input '{k}'; "
                                           f"inputs: {', '.join(by_name) or '(none)'}")
            rule = by_name[k].dtype
            if rule.kind != "union":
                ctx.fail(combo.line_of(k), f"dtype combo #{n + 1} names input '{k}', whose dtype is '{rule.text}'; "
                                           f"name the input it follows instead")
            if not isinstance(v, str) or v not in DTYPES:
                ctx.fail(combo.line_of(k), f"dtype combo #{n + 1}: unknown dtype '{v}' for input '{k}'; "
                                           f"known: {', '.join(DTYPES)}")
            if v not in rule.names:
                ctx.fail(combo.line_of(k), f"dtype combo #{n + 1}: {k}={v} is outside input '{k}''s dtype "
                                           f"'{rule.text}'; the combo could never match")
        # One set of inputs in signature order: the check reports the caller's dtypes of exactly those.
        keys = tuple(i.name for i in inputs if i.name in combo)
        if names is None:
            names = keys
        elif keys != names:
            ctx.fail(where, f"dtype combo #{n + 1} names inputs ({', '.join(keys)}) but combo #1 names "
                            f"({', '.join(names)}); every combo lists the same inputs")
        entry = tuple((k, combo[k]) for k in keys)
        if entry in combos:
            ctx.fail(where, f"dtype combo #{n + 1} repeats an earlier combo")
        combos.append(entry)
    return tuple(combos)


def _shape(ctx: _Ctx, text, line: int, what: str):
    try:
        return exprs.parse_shape(str(text))
    except exprs.ExprError as e:
        ctx.fail(line, f"{what}: shape does not parse: {e}")


def _param(ctx: _Ctx, name: str, spec, line: int) -> Param:
    if isinstance(spec, str):
        spec_map = LMap({"type": spec})
        spec_map.line, spec_map.key_lines = line, {}
        spec = spec_map
    ctx.keys(spec, PARAM_KEYS, f"param '{name}'", required=("type",))
    ptype = str(spec["type"]).strip()
    nullable = ptype.endswith("?")
    base = ptype[:-1] if nullable else ptype
    length = None
    m = re.fullmatch(r"int\[([1-9])\]", base)
    if m:
        base, length = "int[]", int(m.group(1))
    if base not in PARAM_TYPES:
        ctx.fail(spec.line_of("type"), f"param '{name}': unknown type '{ptype}'; known: "
                                       f"{', '.join(PARAM_TYPES)}, int[N] for N in 1..9 (append '?' for None)")
    if base == "SymInt" and nullable:
        ctx.fail(spec.line_of("type"), f"param '{name}': SymInt takes no None (an int the kernel reads)")
    default = spec.get("default", NO_DEFAULT)
    if "default" in spec:
        ok = {
            "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "SymInt": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "bool": lambda v: isinstance(v, bool),
            "str": lambda v: isinstance(v, str),
            "int[]": lambda v: isinstance(v, list) and all(isinstance(x, int) for x in v),
            "Device": lambda v: isinstance(v, str),
            "ScalarType": lambda v: v in DTYPES,
            "Scalar": lambda v: isinstance(v, (int, float, bool)),
        }[base]
        if default is None and not nullable:
            ctx.fail(spec.line_of("default"), f"param '{name}': default null needs a nullable type '{base}?'")
        if default is not None and not ok(default):
            ctx.fail(spec.line_of("default"), f"param '{name}': default {default!r} is not a {base}")
        if isinstance(default, float) and not math.isfinite(default):  # torch's schema parser takes no inf/nan
            ctx.fail(spec.line_of("default"), f"param '{name}': default {default!r} is not finite; make the param "
                                              f"'{base}?' with default null and say what None means")
        if isinstance(default, list):
            default = tuple(default)
    choices = spec.get("choices")
    if choices is not None and base == "SymInt":
        ctx.fail(spec.line_of("choices"), f"param '{name}': SymInt takes no choices (an int the kernel reads)")
    if choices is not None:
        if base not in ("str", "int", "ScalarType") or not isinstance(choices, list) or not choices:
            ctx.fail(spec.line_of("choices"), f"param '{name}': choices must be a non-empty list of {base}")
        if base == "ScalarType" and not all(c in DTYPES for c in choices):
            ctx.fail(spec.line_of("choices"), f"param '{name}': choices must be dtype names ({', '.join(DTYPES)})")
        choices = tuple(choices)
    none = spec.get("none")
    if none is not None and (not nullable or none not in NONE_VALUES):
        ctx.fail(spec.line_of("none"), f"param '{name}': none: says what None stands for in a nullable param: "
                                       f"one of {', '.join(NONE_VALUES)}")
    if length and isinstance(default, tuple) and len(default) != length:
        ctx.fail(spec.line_of("default"), f"param '{name}': default {list(default)} must have {length} elements "
                                          f"(int[{length}])")
    return Param(name, base, nullable, default, choices, line, none, length)


def build_op(raw_path: str, cls: str, entry) -> Op:
    ctx = _Ctx(raw_path, cls)
    if not re.fullmatch(r"[A-Z][A-Za-z0-9]*Op", cls):
        ctx.fail(getattr(entry, "line", 0), "op class names are CamelCase and end with 'Op'")
    ctx.keys(entry, ENTRY_KEYS, "an entry", required=("family", "ref_api", "status", "signature"))
    family = entry["family"]
    if not isinstance(family, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", family):
        ctx.fail(entry.line_of("family"), f"family must be a lower_snake name, got {family!r}")
    status = entry["status"]
    if status not in STATUSES:
        ctx.fail(entry.line_of("status"), f"status must be one of {', '.join(STATUSES)}, got {status!r}")
    ref_api = entry["ref_api"]
    if not isinstance(ref_api, str) or not ref_api.strip():
        ctx.fail(entry.line_of("ref_api"), "ref_api names the PyTorch function (or formula) the op must match")

    sig = entry["signature"]
    ctx.keys(sig, SIGNATURE_KEYS, "signature", required=("outputs",))
    names_seen: dict[str, int] = {}

    def new_name(name, line, what):
        if not isinstance(name, str) or not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            ctx.fail(line, f"{what} name {name!r} must be lower_snake")
        if name in ("target", "out", "self"):
            ctx.fail(line, f"{what} name '{name}' is reserved by the generated schema")
        if keyword.iskeyword(name) or name in CPP_KEYWORDS:
            # The name is a C++ accessor and a Python keyword argument (TileOPs' `do`: call it `dout`).
            ctx.fail(line, f"{what} name '{name}' is a C++ or Python keyword")
        if name in names_seen:
            ctx.fail(line, f"name '{name}' is used twice in the signature (first at line {names_seen[name]})")
        names_seen[name] = line

    params = []
    raw_params = sig.get("params") or LMap()
    if raw_params and not isinstance(raw_params, LMap):
        ctx.fail(sig.line_of("params"), "params must be a mapping name -> {type, default, ...}")
    for name, spec in raw_params.items():
        new_name(name, raw_params.line_of(name), "param")
        params.append(_param(ctx, name, spec, raw_params.line_of(name)))
    # Schema rule: once a param has a default, the ones after it need one too.
    seen_default = False
    for p in params:
        if p.default is not NO_DEFAULT:
            seen_default = True
        elif seen_default:
            ctx.fail(p.line, f"param '{p.name}' has no default but follows a param that has one; "
                             "give it a default or move it up")

    inputs = []
    raw_inputs = sig.get("inputs") or LMap()
    if raw_inputs and not isinstance(raw_inputs, LMap):
        ctx.fail(sig.line_of("inputs"), "inputs must be a mapping name -> {dtype, shape, ...}")
    for name, spec in raw_inputs.items():
        line = raw_inputs.line_of(name)
        new_name(name, line, "input")
        ctx.keys(spec, INPUT_KEYS, f"input '{name}'", required=("dtype", "shape"))
        dtype = _dtype_rule(ctx, spec["dtype"], spec.line_of("dtype"), [i.name for i in inputs], f"input '{name}'")
        if dtype.kind in ("promote_int_to_float", "dtype_or", "promote", "promote_float", "select"):
            ctx.fail(spec.line_of("dtype"), f"input '{name}': {dtype.kind}() gives an output's dtype; "
                                            "an input takes a union or same_as()")
        shape = _shape(ctx, spec["shape"], spec.line_of("shape"), f"input '{name}'")
        if isinstance(shape, exprs.Reduced):
            ctx.fail(spec.line_of("shape"), f"input '{name}': a reduced shape describes outputs")
        if isinstance(shape, (exprs.Pooled, exprs.AdaptivePooled)):
            ctx.fail(spec.line_of("shape"), f"input '{name}': a pooled shape describes outputs")
        if isinstance(shape, exprs.Convolved):
            ctx.fail(spec.line_of("shape"), f"input '{name}': a convolved shape describes outputs")
        if isinstance(shape, exprs.Broadcast):
            ctx.fail(spec.line_of("shape"), f"input '{name}': broadcast_shapes() gives an output's shape; "
                                            "an input that broadcasts takes shape 'any'")
        if isinstance(shape, exprs.SameAs) and shape.input not in [i.name for i in inputs]:
            ctx.fail(spec.line_of("shape"), f"input '{name}': shape same_as({shape.input}) must name an earlier input")
        if isinstance(shape, exprs.Along) and not any(i.name == shape.input and isinstance(i.shape, exprs.AnyShape)
                                                      for i in inputs):
            ctx.fail(spec.line_of("shape"), f"input '{name}': along({shape.input}, {shape.dim}) must name an earlier "
                                            "input of shape 'any'")
        optional = spec.get("optional", False)
        if not isinstance(optional, bool):
            ctx.fail(spec.line_of("optional"), f"input '{name}': optional must be true or false")
        mutated = spec.get("mutated", False)
        if mutated not in (False, True, "optional"):
            ctx.fail(spec.line_of("mutated"), f"input '{name}': mutated must be true, false or 'optional' "
                                              "(a branch per choice)")
        mutated = {False: "no", True: "always", "optional": "optional"}[mutated]
        reduced_once = spec.get("reduced_once", False)
        if not isinstance(reduced_once, bool):
            ctx.fail(spec.line_of("reduced_once"), f"input '{name}': reduced_once must be true or false")
        inputs.append(Input(name, dtype, shape, str(spec["shape"]), optional, mutated, line, reduced_once))

    input_names = [i.name for i in inputs]
    outputs = []
    raw_outputs = sig["outputs"]
    if not isinstance(raw_outputs, LMap):
        ctx.fail(sig.line_of("outputs"), "outputs must be a mapping name -> {dtype, shape, ...}")
    for name, spec in raw_outputs.items():
        line = raw_outputs.line_of(name)
        new_name(name, line, "output")
        ctx.keys(spec, OUTPUT_KEYS, f"output '{name}'", required=("dtype", "shape"))
        dtype_sources = input_names + [p.name for p in params if p.type == "ScalarType"]
        dtype = _dtype_rule(ctx, spec["dtype"], spec.line_of("dtype"), dtype_sources, f"output '{name}'", params)
        shape = _shape(ctx, spec["shape"], spec.line_of("shape"), f"output '{name}'")
        if isinstance(shape, exprs.SameAs) and shape.input not in input_names:
            ctx.fail(spec.line_of("shape"), f"output '{name}': shape same_as({shape.input}) names no input")
        if isinstance(shape, exprs.Reduced):
            _check_reduced(ctx, spec.line_of("shape"), name, shape, input_names, params)
        if isinstance(shape, (exprs.Pooled, exprs.AdaptivePooled)):
            _check_pooled(ctx, spec.line_of("shape"), name, shape, inputs, params)
        if isinstance(shape, exprs.Convolved):
            _check_convolved(ctx, spec.line_of("shape"), name, shape, inputs, params)
        if dtype.kind == "dtype_or":
            p = next((p for p in params if p.name == dtype.ref), None)
            by_param = p is not None and p.type == "ScalarType" and p.nullable
            # or an optional input: its dtype when given (a float32 weight's gradient is float32)
            by_input = any(i.name == dtype.ref and i.optional for i in inputs) and not dtype.widen_int
            if not (by_param or by_input) or dtype.fallback not in input_names or dtype.fallback == dtype.ref:
                ctx.fail(spec.line_of("dtype"), f"output '{name}': dtype_or(<param>, <input>) takes a ScalarType? "
                                                f"param (or an optional input) and a tensor input, got '{dtype.text}'")
        if isinstance(shape, exprs.AnyShape):
            ctx.fail(spec.line_of("shape"), f"output '{name}': shape 'any' is for inputs; an output's shape is "
                                            "same_as(), broadcast_shapes() or a list of dims")
        if isinstance(shape, exprs.Broadcast):
            for n in shape.inputs:
                if n not in input_names:
                    ctx.fail(spec.line_of("shape"), f"output '{name}': broadcast_shapes() names unknown input '{n}'")
        buffer = spec.get("buffer")
        if buffer not in (None, "out"):
            ctx.fail(spec.line_of("buffer"), f"output '{name}': buffer must be 'out' (the caller may pass it)")
        aliases = spec.get("aliases")
        if aliases is not None:
            target = next((i for i in inputs if i.name == aliases), None)
            if target is None or target.mutated == "no":
                ctx.fail(spec.line_of("aliases"), f"output '{name}': aliases '{aliases}' must name a mutated input")
            # The written input holds the result, so the result must have that input's dtype whatever
            # it is; e.g. promote_int_to_float(x) cannot alias an integer x.
            # promote(...) over the written input: the result is cast into it (checked per call, as torch's
            # in-place ops check can_cast).
            for rule in ([r for _, r in dtype.cases] if dtype.kind == "select" else [dtype]):
                promoted_into = rule.kind in ("promote", "promote_float") and aliases in rule.refs
                if not promoted_into and (rule.kind != "same_as"
                                          or _dtype_root(inputs, rule.ref) != _dtype_root(inputs, aliases)):
                    break
            else:
                rule = None
            if rule is not None:
                ctx.fail(spec.line_of("dtype"), f"output '{name}' aliases '{aliases}', so its dtype must be "
                                                f"same_as({aliases}) (or same_as the input {aliases}'s dtype follows), "
                                                f"got '{rule.text}'; promote() or promote_float() of inputs "
                                                f"including {aliases} may alias it too")
        if dtype.kind == "promote_int_to_float" and dtype.ref not in input_names:
            ctx.fail(spec.line_of("dtype"), f"output '{name}': promote_int_to_float() takes a tensor input, "
                                            f"got '{dtype.ref}'")
        optional = spec.get("optional", False)
        outputs.append(Output(name, dtype, shape, str(spec["shape"]), buffer == "out", bool(optional), aliases, line))
    if sum(o.buffer for o in outputs) > 1:
        ctx.fail(sig.line_of("outputs"), "at most one output may be 'buffer: out'")
    for i in inputs:
        # Read with its broadcast reduced dims as one element: only sound when every output reduces it
        # over the same dims and repeated values cannot change a result.
        keys = {(o.shape.dim, o.shape.listed) if isinstance(o.shape, exprs.Reduced) and o.shape.input == i.name
                else None for o in outputs}
        if i.reduced_once and (None in keys or len(keys) != 1 or i.mutated != "no" or i.optional):
            ctx.fail(i.line, f"input '{i.name}': reduced_once takes a required, unwritten input that every output "
                             "reduces over the same dims (reduce(...) or reduce_listed(...) of it)")

    # Shape names: params, symbols bound by input shapes, and tensors (for ndim/numel).
    int_params = {p.name for p in params if p.type == "int"}
    plain_int_params = {p.name for p in params if p.type == "int" and not p.nullable}
    float_params = {p.name for p in params if p.type == "float" and not p.nullable}
    nullable_floats = {p.name for p in params if p.type == "float" and p.nullable}
    list_params = {p.name for p in params if p.type == "int[]"}
    bool_params = frozenset(p.name for p in params if p.type == "bool" and not p.nullable)
    symbols: set[str] = set()
    for inp in inputs:
        if isinstance(inp.shape, exprs.ShapeList):
            for d in inp.shape.dims:
                if isinstance(d, exprs.Splice):
                    if d.param not in list_params:
                        ctx.fail(inp.line, f"input '{inp.name}': '*{d.param}' must splice an int[] param")
                elif not isinstance(d, exprs.Ellipsis_):
                    for n in exprs.names_in(d):
                        if n not in int_params:
                            symbols.add(n)
    for out in outputs:
        if isinstance(out.shape, exprs.ShapeList):
            for d in out.shape.dims:
                if isinstance(d, exprs.Ellipsis_) and not any(
                        isinstance(i.shape, exprs.ShapeList) and any(isinstance(x, exprs.Ellipsis_) for x in i.shape.dims)
                        for i in inputs):
                    ctx.fail(out.line, f"output '{out.name}': '...' needs an input whose shape has '...'")
                if isinstance(d, exprs.Splice) and d.param not in list_params:
                    ctx.fail(out.line, f"output '{out.name}': '*{d.param}' must splice an int[] param")
                if not isinstance(d, (exprs.Ellipsis_, exprs.Splice)):
                    for call in _calls(d):
                        if call.fn == "select":
                            _check_select(ctx, call, out.line, bool_params, f"output '{out.name}'")
                    unknown = exprs.names_in(d) - symbols - int_params - exprs.select_flags(d)
                    if unknown:
                        ctx.fail(out.line, f"output '{out.name}': shape names {sorted(unknown)} that no input "
                                           "shape binds and no int param provides")

    rules = []
    raw_rules = sig.get("shape_rules") or LList()
    for i, text in enumerate(raw_rules):
        line = getattr(raw_rules, "line", sig.line_of("shape_rules")) + i
        try:
            node = exprs.parse_rule(text)
        except exprs.ExprError as e:
            ctx.fail(line, f"shape rule does not parse: {e}")
        conds = node.conds if isinstance(node, exprs.Or) else (node,)
        for k, cond in enumerate(conds):
            if not isinstance(cond, (exprs.Not, exprs.Given, exprs.Flag)) and exprs.names_in(cond) & nullable_floats:
                # `not given(softcap) or softcap > 0`: a nullable float is compared once it is known given.
                guarded = {c.cond.param for c in conds[:k] if isinstance(c, exprs.Not) and isinstance(c.cond, exprs.Given)}
                if exprs.names_in(cond) & nullable_floats - guarded or list(_calls(cond)) \
                        or _ops_in(cond) - {"+", "-", "*"} or set(_bare_names(cond)) - nullable_floats - float_params:
                    ctx.fail(line, f"shape rule '{text}': a nullable float param is compared after 'not given(<it>) "
                                   "or', with numbers and float params by + - *")
                continue
            if isinstance(cond, exprs.Not):
                cond = cond.cond
            if isinstance(cond, exprs.Given):
                p = next((p for p in params if p.name == cond.param), None)
                i = next((i for i in inputs if i.name == cond.param), None)
                if not ((p is not None and p.nullable) or (i is not None and i.optional)):
                    ctx.fail(line, f"shape rule '{text}': given() takes a nullable param or an optional input, "
                                   f"not '{cond.param}'")
            elif isinstance(cond, exprs.StrIs):
                p = next((p for p in params if p.name == cond.param), None)
                if p is None or p.type != "str" or p.nullable or (p.choices and cond.value not in p.choices):
                    ctx.fail(line, f"shape rule '{text}': {cond.param} {cond.op} '{cond.value}' compares a str param "
                                   "(not nullable) with one of its choices")
            elif isinstance(cond, exprs.Flag):
                p = next((p for p in params if p.name == cond.param), None)
                if p is None or p.type != "bool" or p.nullable:
                    ctx.fail(line, f"shape rule '{text}': '{cond.param}' alone is a condition only when it is a "
                                   "bool param; compare an expression instead")
            elif exprs.names_in(cond) & float_params:
                # A float param (Dropout's p) is compared in double with numbers and int params only.
                if isinstance(node, exprs.Or) or list(_calls(cond)) or _ops_in(cond) - {"+", "-", "*"} \
                        or set(_bare_names(cond)) - float_params - plain_int_params:
                    ctx.fail(line, f"shape rule '{text}': a rule over a float param compares it with numbers, "
                                   "float params or int params by + - * (no dims, calls, // % or 'or')")
            else:
                _check_names(ctx, cond, line, symbols | int_params, list_params, set(input_names),
                             f"shape rule '{text}'", bool_params)
        rules.append(Rule(node, str(text), line))

    combos = _dtype_combos(ctx, sig, inputs)

    composition = entry.get("composition") or ()
    if composition and (not isinstance(composition, list) or not all(isinstance(c, str) for c in composition)):
        ctx.fail(entry.line_of("composition"), "composition lists the op classes the op is built from")

    if not inputs and status == "implemented" and not any(p.type == "Device" for p in params):
        ctx.fail(sig.line, "an op without tensor inputs needs a Device param: it decides where outputs live and "
                           "which target serves the call")
    if not inputs and any(p.type == "SymInt" for p in params):
        ctx.fail(sig.line, "an op without tensor inputs takes no SymInt param: on the meta device its value "
                           "would be guarded, so it would not stay symbolic")
    if not inputs and any(o.buffer or o.optional for o in outputs):
        ctx.fail(sig.line, "an op without tensor inputs has no out buffer or optional outputs")

    autograd, autograd_line, no_grad, grad_names = None, 0, (), ()
    if "autograd" in entry:
        raw = entry["autograd"]
        ctx.keys(raw, AUTOGRAD_KEYS, "autograd", required=("backward",))
        autograd, autograd_line = raw["backward"], raw.line_of("backward")
        if not isinstance(autograd, str):
            ctx.fail(autograd_line, "autograd.backward names the op class that computes this op's gradients")
        if "no_grad" in raw:
            no_grad = raw["no_grad"]
            names = [o.name for o in outputs]
            if not isinstance(no_grad, list) or not no_grad or any(n not in names for n in no_grad):
                ctx.fail(raw.line_of("no_grad"), f"autograd.no_grad lists forward outputs ({', '.join(names)}) "
                                                 "that are saved statistics, not differentiable")
            no_grad = tuple(no_grad)
        if "grad_names" in raw:
            renamed = raw["grad_names"]
            names = [o.name for o in outputs if o.name not in no_grad]
            if (not isinstance(renamed, dict) or not renamed or any(k not in names for k in renamed)
                    or any(not isinstance(v, str) for v in renamed.values())):
                ctx.fail(raw.line_of("grad_names"), f"autograd.grad_names maps differentiable forward outputs "
                                                    f"({', '.join(names)}) to the backward inputs that take their "
                                                    "gradients, where these are not named d<output>")
            grad_names = tuple((str(k), str(v)) for k, v in renamed.items())

    elementwise, select, select_cases, given_cases = None, None, (), ()
    if "elementwise" in entry:
        raw, eline = entry["elementwise"], entry.line_of("elementwise")
        if isinstance(raw, LMap) and list(raw) == ["given"]:  # one expression per set of optional inputs given
            given_cases = _given_cases(ctx, raw, eline, inputs, outputs, params)
            elementwise = given_cases[0][1]
        elif isinstance(raw, LMap):  # one expression per value of a str param, chosen when the kernel is planned
            select, cases = _select_cases(ctx, raw, eline, params, "elementwise")
            select_cases = tuple((v, _elementwise(ctx, t, ln, inputs, outputs, params, select)) for v, t, ln in cases)
            elementwise = select_cases[0][1]
        else:
            elementwise = _elementwise(ctx, raw, eline, inputs, outputs, params)
    elif any(p.none for p in params):
        ctx.fail(next(p.line for p in params if p.none), "none: is for the params of an elementwise entry")

    roofline = entry.get("roofline")
    if roofline is not None:
        roofline = _roofline(ctx, roofline, entry.line_of("roofline"), set(input_names),
                             {p.name for p in params} | symbols)
    workloads = tuple(_workloads(ctx, entry.get("workloads") or LList(), inputs, params))
    sharding = _sharding(ctx, entry, inputs, outputs, params, elementwise is not None)

    return Op(cls, family, ref_api, status, str(entry.get("doc") or "").strip(), tuple(inputs), tuple(outputs),
              tuple(params), tuple(rules), tuple(combos), workloads, roofline, tuple(composition), raw_path,
              getattr(entry, "line", 0), autograd=autograd, autograd_line=autograd_line, autograd_no_grad=no_grad,
              autograd_grad_names=grad_names,
              elementwise=elementwise,
              select=select, select_cases=select_cases, given_cases=given_cases, sharding=sharding)


# Device functions of src/kernels/elementwise/elementwise.cuh an `elementwise:` expression may call
# (each in the compute type; see docs/MANIFEST.md), and the other words it may use.
ELEMENTWISE_FUNCTIONS = {
    "abs", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan",
    "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv",
    "floor", "ceil", "round", "trunc", "frac", "sign", "signbit", "reciprocal", "sigmoid", "isnan", "isinf",
    "isfinite", "pow", "fmod", "remainder", "floor_divide", "true_divide", "maximum", "minimum", "atan2",
    "copysign", "hypot", "clamp", "softplus", "gelu", "gelu_tanh", "lerp", "logical_not", "bitwise_not",
    "nan_to_num", "round_decimals", "truth", "clamp_min", "clamp_max", "quotient",
    "rounded"}  # rounded(x): x rounded to the output's dtype and back (generated per kernel)
ELEMENTWISE_WORDS = {"true", "false", "C"}  # C: the compute type, e.g. C(1)
ELEMENTWISE_PARAM_TYPES = ("Scalar", "float", "int", "bool")


def _given_cases(ctx, raw, line, inputs, outputs, params) -> tuple:
    """`elementwise: {given: {"a, b": <expr>, "a": <expr>, ...}}`: one expression per set of optional
    inputs given (each set a key; a set without a key is refused at the call), reading only those."""
    optional = [i.name for i in inputs if i.optional]
    cases = raw["given"]
    if not optional or not isinstance(cases, LMap) or not cases:
        ctx.fail(line, "elementwise: {given: ...} maps sets of the entry's optional inputs, e.g. \"a, b\", "
                       "to an expression each")
    out, seen = [], set()
    for key, text in cases.items():
        names = tuple(n.strip() for n in str(key).split(",") if n.strip()) if str(key).strip() != "none" else ()
        if any(n not in optional for n in names) or len(set(names)) != len(names):
            ctx.fail(cases.line_of(key), f"elementwise given '{key}': names optional inputs ({', '.join(optional)}) "
                                         "once each, or is 'none'")
        given = frozenset(names)
        if given in seen:
            ctx.fail(cases.line_of(key), f"elementwise given '{key}': this set of inputs has a case already")
        seen.add(given)
        absent = [n for n in optional if n not in given]
        out.append((tuple(n for n in optional if n in given),
                    _elementwise(ctx, text, cases.line_of(key), inputs, outputs, params, absent=absent)))
    return tuple(out)


def _elementwise(ctx, text, line, inputs, outputs, params, select=None, absent=None) -> str:
    """`elementwise: "<expr>"`: the op is y = expr over broadcast inputs, evaluated in the compute type.
    `select`: the str param whose value chose this expression (not a value the expression reads).
    `absent`: in a choice by the optional inputs given, those not given (the expression cannot read them)."""
    if not isinstance(text, str) or not text.strip():
        ctx.fail(line, "elementwise is the op's device expression, e.g. \"a + alpha * b\"")
    if len(outputs) != 1:
        ctx.fail(line, "an elementwise entry has exactly one output")
    out = outputs[0]
    names = [i.name for i in inputs]
    if not inputs or len(inputs) > 4 or len(params) > 4:
        ctx.fail(line, "an elementwise entry has 1 to 4 tensor inputs and at most 4 params")
    for k, i in enumerate(inputs):
        if (i.optional and (absent is None or k == 0 or i.mutated != "no")) or not isinstance(i.shape, (exprs.AnyShape, exprs.Along)):
            ctx.fail(i.line, f"input '{i.name}' of an elementwise entry takes shape 'any' (or along(<input>, <dim>)) "
                             "and is not optional (except a later, unwritten input under elementwise: {given: ...})")
    # inputs along a dim of another broadcast within it: the output's shape comes from the others
    spread = [i.name for i in inputs if isinstance(i.shape, exprs.AnyShape)]
    wanted = f"broadcast_shapes({', '.join(spread)})" if len(spread) > 1 else f"same_as({spread[0]})"
    if exprs.render(out.shape) != wanted and not (len(spread) == 1 and exprs.render(out.shape) == f"broadcast_shapes({spread[0]})"):
        ctx.fail(out.line, f"output '{out.name}' of an elementwise entry has shape '{wanted}'")
    for p in params:
        if p.name == select:
            continue
        if p.type not in ELEMENTWISE_PARAM_TYPES or (p.nullable and p.type not in ("Scalar", "float")):
            ctx.fail(p.line, f"param '{p.name}' of an elementwise entry is one of {', '.join(ELEMENTWISE_PARAM_TYPES)} "
                             "(a value in the compute type; Scalar? and float? with none:), or the str param "
                             "an `elementwise: {<param>: ...}` choice reads")
        if p.nullable and p.none is None:
            ctx.fail(p.line, f"param '{p.name}' is nullable: say what None stands for with none: "
                             f"({', '.join(NONE_VALUES)})")
    known = (set(names) - set(absent or ())) | {p.name for p in params if p.name != select} | ELEMENTWISE_WORDS
    for m in re.finditer(r"\d+(?:\.\d*)?(?:[eE][-+]?\d+)?[fF]?|\.\d+(?:[eE][-+]?\d+)?[fF]?|([A-Za-z_]\w*)(\s*\()?", text):
        word, call = m.group(1), m.group(2)
        if word is None:
            continue
        if call and word not in ELEMENTWISE_FUNCTIONS and word != "C":
            ctx.fail(line, f"elementwise: unknown function '{word}'; known: {', '.join(sorted(ELEMENTWISE_FUNCTIONS))}")
        if not call and word not in known:
            ctx.fail(line, f"elementwise: '{word}' is not an input or param of the entry")
    return text.strip()


def _check_reduced(ctx, line, name, shape, input_names, params):
    by_name = {p.name: p for p in params}
    if shape.input not in input_names:
        ctx.fail(line, f"output '{name}': {exprs.render(shape)} names no input '{shape.input}'")
    d = by_name.get(shape.dim)
    if d is None or d.type not in ("int", "int[]"):
        ctx.fail(line, f"output '{name}': {exprs.render(shape)}: '{shape.dim}' must be an int, int?, int[] or int[]? "
                       "param naming the reduced dims")
    if shape.keepdim is not None:
        k = by_name.get(shape.keepdim)
        if k is None or k.type != "bool" or k.nullable:
            ctx.fail(line, f"output '{name}': {exprs.render(shape)}: '{shape.keepdim}' must be a bool param")


def _check_pooled(ctx, line, name, shape, inputs, params):
    """pool(...) / adaptive_pool(...): an input with a list of dims, int[N] params of one N (the
    spatial rank), a bool ceil_mode."""
    by_name = {p.name: p for p in params}
    what = f"output '{name}': {exprs.render(shape)}"
    inp = next((i for i in inputs if i.name == shape.input), None)
    if inp is None or not isinstance(inp.shape, exprs.ShapeList):
        ctx.fail(line, f"{what}: '{shape.input}' must be an input with a list of dims, e.g. \"[..., C, H, W]\"")
    if isinstance(shape, exprs.AdaptivePooled):
        lists = [(shape.output_size, False)]
    else:
        lists = [(shape.kernel, False), (shape.stride, None), (shape.padding, False)]
        if shape.dilation is not None:
            lists.append((shape.dilation, False))
        c = by_name.get(shape.ceil_mode)
        if c is None or c.type != "bool" or c.nullable:
            ctx.fail(line, f"{what}: '{shape.ceil_mode}' must be a bool param")
    rank = None
    for pname, nullable in lists:
        p = by_name.get(pname)
        if p is None or p.type != "int[]" or not p.length or (nullable is False and p.nullable):
            kind = "int[N] or int[N]?" if nullable is None else "int[N]"
            ctx.fail(line, f"{what}: '{pname}' must be an {kind} param (N: the spatial rank)")
        if rank is not None and p.length != rank:
            ctx.fail(line, f"{what}: '{pname}' is int[{p.length}] but the others are int[{rank}]; one spatial rank")
        rank = p.length


CONV_PADDING_STRS = ("valid", "same")  # torch's conv*d(padding=<str>)


def _check_convolved(ctx, line, name, shape, inputs, params):
    """conv(...): an input with a list of dims, a weight of exactly N + 2 named dims, stride / padding /
    dilation int[N] params of one N (the spatial rank), padding_str a str? param choosing among
    'valid' and 'same'."""
    by_name = {p.name: p for p in params}
    what = f"output '{name}': {exprs.render(shape)}"
    inp = next((i for i in inputs if i.name == shape.input), None)
    if inp is None or not isinstance(inp.shape, exprs.ShapeList):
        ctx.fail(line, f"{what}: '{shape.input}' must be an input with a list of dims, e.g. \"[..., C_in, H, W]\"")
    rank = None
    for pname in (shape.stride, shape.padding, shape.dilation):
        p = by_name.get(pname)
        if p is None or p.type != "int[]" or not p.length or p.nullable:
            ctx.fail(line, f"{what}: '{pname}' must be an int[N] param (N: the spatial rank)")
        if rank is not None and p.length != rank:
            ctx.fail(line, f"{what}: '{pname}' is int[{p.length}] but the others are int[{rank}]; one spatial rank")
        rank = p.length
    w = next((i for i in inputs if i.name == shape.weight), None)
    if w is None or w.optional or not isinstance(w.shape, exprs.ShapeList) or len(w.shape.dims) != rank + 2 \
            or any(isinstance(d, (exprs.Ellipsis_, exprs.Splice)) for d in w.shape.dims):
        ctx.fail(line, f"{what}: '{shape.weight}' must be a required input of {rank + 2} dims "
                       "[C_out, C_in / groups, *kernel] (no '...')")
    if shape.padding_str is not None:
        p = by_name.get(shape.padding_str)
        if p is None or p.type != "str" or not p.nullable or not p.choices \
                or not set(p.choices) <= set(CONV_PADDING_STRS):
            ctx.fail(line, f"{what}: '{shape.padding_str}' must be a str? param with choices among "
                           f"{', '.join(CONV_PADDING_STRS)}")


def _check_names(ctx, node, line, scalars, lists, tensors, what, flags=frozenset()):
    for n in _bare_names(node):
        if n not in scalars:
            ctx.fail(line, f"{what}: '{n}' is not an int param or a dim bound by an input shape")
    for call in _calls(node):
        if call.fn == "select":
            _check_select(ctx, call, line, flags, what)
            for a in call.args[1:]:
                _check_names(ctx, a, line, scalars, lists, tensors, what, flags)
            continue
        if call.fn in exprs.INT_FUNCTIONS:  # is_pow2(expr), ilog2(expr): one int expression
            if len(call.args) != 1:
                ctx.fail(line, f"{what}: {call.fn}() takes one int expression")
            _check_names(ctx, call.args[0], line, scalars, lists, tensors, what, flags)
            continue
        arg = call.args[0] if len(call.args) == 1 and isinstance(call.args[0], exprs.Name) else None
        want = lists if call.fn in ("len", "prod") else tensors
        if arg is None or arg.id not in want:
            kind = "an int[] param" if call.fn in ("len", "prod") else "a tensor input"
            ctx.fail(line, f"{what}: {call.fn}() takes {kind}")


def _check_select(ctx, call, line, flags, what):
    if len(call.args) != 3 or not isinstance(call.args[0], exprs.Name) or call.args[0].id not in flags:
        ctx.fail(line, f"{what}: select() takes a bool param, then the value when it is true, then the value "
                       f"when it is false: '{exprs.render(call)}'")


def _bare_names(node):
    if isinstance(node, exprs.Name):
        yield node.id
    elif isinstance(node, (exprs.Bin, exprs.Cmp)):
        yield from _bare_names(node.lhs)
        yield from _bare_names(node.rhs)


def _ops_in(node) -> set:
    if isinstance(node, exprs.Cmp):
        return _ops_in(node.lhs) | _ops_in(node.rhs)
    if isinstance(node, exprs.Bin):
        return {node.op} | _ops_in(node.lhs) | _ops_in(node.rhs)
    return set()


def _calls(node):
    if isinstance(node, exprs.Call):
        yield node
    elif isinstance(node, (exprs.Bin, exprs.Cmp)):
        yield from _calls(node.lhs)
        yield from _calls(node.rhs)


@dataclass(frozen=True)
class Roofline:
    vars: tuple  # (name, expr) in order
    flops: object
    bytes: object
    text: tuple  # (flops text, bytes text)


def _sharding(ctx, entry, inputs, outputs, params, elementwise: bool) -> tuple:
    """`sharding:` of an entry, as (kind, ((key, value), ...)). Kinds:
    free: [..., t, hq|hk] the listed dims shard: `...` is the leading ellipsis of a shape, a name a
                         dim of an input's shape ([t, hq, head_dim]), `a|b` two dims sharded together;
                         every tensor holding the dim shards on it, the others are replicated; `partial: [dweight]` names outputs that are
                         a sum over those dims (a weight's gradient), Partial(sum) when they shard
    except: <param>      any dim but the one the int param names (softmax, scans)
    reduce: <param>      any dim the int or int[] param does not reduce (None: every dim; keepdim if
                         present); with `combine: sum | max | min`, a reduced dim shards too and the
                         output is Partial(that op): each rank reduces its shard (SumFwdOp, AmaxFwdOp)
    matmul: [ta, tb]     two inputs a, b and one output d = op(a) @ op(b), the bool params saying
                         which operand is stored transposed: torch.mm's rules (M shards a and d,
                         N shards b and d, K shards both and d is Partial(sum))
    replicate            every tensor whole on every rank (the default: correct, gathers first)
    An elementwise entry shards as torch's pointwise ops do (broadcasting) and takes no `sharding:`."""
    if "sharding" not in entry:
        return ("pointwise", ()) if elementwise else ("replicate", ())
    raw, line = entry["sharding"], entry.line_of("sharding")
    if elementwise:
        ctx.fail(line, "an elementwise entry shards as torch's pointwise ops; it takes no sharding:")
    if not inputs:
        ctx.fail(line, "sharding: is for ops with tensor inputs (DTensor calls)")
    if raw == "replicate":
        return ("replicate", ())
    if not isinstance(raw, dict):
        ctx.fail(line, "sharding is `replicate` or a map: {free: [...], partial: [...]}, {except: <param>} "
                       "or {reduce: <param>}")
    ctx.keys(raw, SHARDING_KEYS, "sharding")
    kinds = [k for k in ("free", "except", "reduce", "matmul") if k in raw]
    if len(kinds) != 1:
        ctx.fail(line, "sharding names exactly one of free:, except:, reduce:, matmul:")
    kind = kinds[0]
    if "combine" in raw and (kind != "reduce" or raw["combine"] not in SHARDING_COMBINES):
        ctx.fail(raw.line_of("combine"), "sharding.combine goes with reduce: and is one of "
                                            + ", ".join(SHARDING_COMBINES))
    pmap = {p.name: p for p in params}
    if kind == "matmul":
        flags = raw["matmul"]
        if not (isinstance(flags, list) and len(flags) == 2 and all(
                f in pmap and pmap[f].type == "bool" for f in flags)):
            ctx.fail(raw.line_of("matmul"), "sharding.matmul names the two bool params that transpose a and b")
        if len(inputs) != 2 or len(outputs) != 1 or any(len(t.shape_text.split(",")) != 2 for t in inputs):
            ctx.fail(raw.line_of("matmul"), "sharding.matmul is for two 2-D inputs and one output")
        if "partial" in raw:
            ctx.fail(raw.line_of("partial"), "sharding.matmul takes no partial: (d is Partial when K shards)")
        return ("matmul", (("matmul", tuple(flags)),))
    if kind == "free":
        free = raw["free"]
        if not isinstance(free, list) or not free or not all(isinstance(f, str) for f in free):
            ctx.fail(raw.line_of("free"), "sharding.free lists dims: '...' or names of input dims")
        dims = set()
        for i in inputs:
            dims |= {t.strip() for t in i.shape_text.strip("[] ").split(",")}
        for f in (part for group in free for part in group.split("|")):
            if f not in dims:
                ctx.fail(raw.line_of("free"), f"sharding.free: '{f}' is no dim of an input's shape "
                                              f"({', '.join(i.shape_text for i in inputs)})")
        partial = raw.get("partial") or []
        onames = {o.name for o in outputs}
        for o in partial:
            if o not in onames:
                ctx.fail(raw.line_of("partial"), f"sharding.partial: '{o}' is not an output")
        return ("free", (("free", tuple(free)), ("partial", tuple(partial))))
    if "partial" in raw:
        ctx.fail(raw.line_of("partial"), "sharding.partial goes with free:")
    name = raw[kind]
    p = pmap.get(name)
    want = ("int", "SymInt") if kind == "except" else ("int", "SymInt", "int[]")
    if p is None or p.type not in want:
        ctx.fail(raw.line_of(kind), f"sharding.{kind} names a param of type {' or '.join(want)}, got {name!r}")
    return (kind, ((kind, name),) + ((("combine", raw["combine"]),) if "combine" in raw else ()))


def _roofline(ctx, raw, line, tensors, names) -> Roofline:
    ctx.keys(raw, {"vars", "flops", "bytes"}, "roofline", required=("flops", "bytes"))
    known = set(names)
    var_items = []
    for k, v in (raw.get("vars") or LMap()).items():
        try:
            var_items.append((k, exprs.parse_expr(v)))
        except exprs.ExprError as e:
            ctx.fail(raw.line_of("vars"), f"roofline var '{k}': {e}")
        known.add(k)
    parsed = {}
    for key in ("flops", "bytes"):
        try:
            parsed[key] = exprs.parse_expr(raw[key])
        except exprs.ExprError as e:
            ctx.fail(raw.line_of(key), f"roofline {key}: {e}")
    for name, node in var_items + [("flops", parsed["flops"]), ("bytes", parsed["bytes"])]:
        unknown = set(_bare_names(node)) - known
        if unknown:
            ctx.fail(raw.line, f"roofline {name} uses unknown names {sorted(unknown)}")
    return Roofline(tuple(var_items), parsed["flops"], parsed["bytes"], (str(raw["flops"]), str(raw["bytes"])))


def _workloads(ctx, raw, inputs, params):
    names = {i.name for i in inputs}
    for w in raw:
        if not isinstance(w, LMap) or "name" not in w:
            ctx.fail(getattr(raw, "line", 0), "each workload is a mapping with a 'name'")
        for k in w:
            if k not in names | {"name", "dtypes", "params"}:
                ctx.fail(w.line_of(k), f"workload '{w['name']}': unknown key '{k}' (inputs, dtypes, params)")
        for d in w.get("dtypes") or []:
            if d not in DTYPES:
                ctx.fail(w.line_of("dtypes"), f"workload '{w['name']}': unknown dtype '{d}'")
        yield dict(w)


def build_ops(manifests: list[RawManifest]) -> tuple:
    ops, seen, names = [], {}, {}
    for m in manifests:
        for cls, entry in m.entries.items():
            if cls in seen:
                raise ManifestError(m.path, m.entries.line_of(cls), cls,
                                    f"op class defined twice (first in {seen[cls]})")
            seen[cls] = f"{m.path}:{m.entries.line_of(cls)}"
            op = build_op(m.path, cls, entry)
            for n in op.operator_names:
                if n in names:
                    raise ManifestError(m.path, op.line, cls, f"operator 'tileops::{n}' also comes from {names[n]}")
                names[n] = cls
            ops.append(op)
    classes = {o.cls for o in ops}
    for op in ops:
        for sub in op.composition:
            if sub not in classes:
                raise ManifestError(op.path, op.line, op.cls, f"composition names unknown op class '{sub}'")
    ops.sort(key=lambda o: (o.family, o.cls))
    # Stable ids in (family, class) order: the generated C++ tables index by them.
    out, next_id = [], 0
    for op in ops:
        if op.status == "implemented":
            out.append(_with_id(op, next_id))
            next_id += 1
        else:
            out.append(op)
    by_cls = {o.cls: o for o in out}
    from dataclasses import replace
    return tuple(replace(o, pairing=resolve_pairing(o, by_cls)) if o.autograd else o for o in out)


def _with_id(op: Op, op_id: int) -> Op:
    from dataclasses import replace
    return replace(op, op_id=op_id)


# ---------------------------------------------------------------------------------------------------
# Autograd pairing (`autograd: {backward: <BwdOp>}`): the naming convention that lines a backward op
# up with its forward, checked here so the generated glue never has to guess.
#   backward input  d<out>  <- the gradient of forward output <out> (or the name grad_names gives it)
#   backward input  <name>  <- forward input (or output) <name>, saved by the forward
#   backward param  <name>  <- forward param <name>
#   backward output d<in>   -> the gradient of forward input <in>


@dataclass(frozen=True)
class Pairing:
    backward: Op
    sources: tuple  # per backward input, in order: (kind, forward name); kind 'grad' | 'input' | 'output'
    grads: tuple    # per backward output, in order: the forward input it is the gradient of

    def branch(self) -> Branch:
        """The forward branch the pairing covers: it writes nothing, takes no out, drops nothing."""
        return Branch((), False, ())


def _pairing_dtype_root(op: Op, name: str, fail):
    """(root tensor, allowed dtypes) of a tensor, following same_as to the input that names a union."""
    while True:
        t = op.input(name) or op.output(name)
        rule = t.dtype
        if rule.kind == "union":
            return name, frozenset(rule.names)
        if rule.kind == "dtype_or" and op.input(rule.ref) is not None:
            # the optional input's dtype when given (a gradient is wanted only then), else the fallback's
            root, allowed = _pairing_dtype_root(op, rule.ref, fail)
            return root, allowed | _pairing_dtype_root(op, rule.fallback, fail)[1]
        if rule.kind != "same_as" or (op.input(rule.ref) is None and op.output(rule.ref) is None):
            fail(f"{op.cls} '{name}': autograd pairing supports dtype unions and same_as(<tensor>) only, "
                 f"not '{rule.text}'")
        name = rule.ref


def _shape_of(op: Op, name: str):
    t = op.input(name) or op.output(name)
    while isinstance(t.shape, exprs.SameAs):
        t = op.input(t.shape.input) or op.output(t.shape.input)
    return t.shape


def resolve_pairing(fwd: Op, by_cls: dict) -> Pairing:
    def fail(msg):
        raise ManifestError(fwd.path, fwd.autograd_line or fwd.line, fwd.cls, f"autograd pairing: {msg}")

    bwd = by_cls.get(fwd.autograd)
    if bwd is None:
        fail(f"backward names unknown op class '{fwd.autograd}'")
    if bwd.cls == fwd.cls:
        fail("an op cannot be its own backward")
    if not fwd.has_boundary or not bwd.has_boundary:
        fail(f"both ops need a compile boundary (tensor inputs, no composition); "
             f"{fwd.cls if not fwd.has_boundary else bwd.cls} has none")
    for op in (fwd, bwd):
        written = [i.name for i in op.inputs if i.mutated != "no"]
        if written:
            fail(f"{op.cls} writes its input '{written[0]}' (mutated); a paired forward and backward must be "
                 "functional")
    if fwd.status == "implemented" and bwd.status != "implemented":
        fail(f"backward {bwd.cls} is {bwd.status}; an implemented forward pairs with an implemented backward")

    fwd_in = {i.name for i in fwd.inputs}
    fwd_out = {o.name for o in fwd.outputs}
    renamed = dict(fwd.autograd_grad_names)  # output -> the backward input named for its gradient
    grad_name = {o: renamed.get(o, "d" + o) for o in fwd_out}
    taken = [g for g in grad_name.values() if list(grad_name.values()).count(g) > 1]
    if taken:
        fail(f"two forward outputs' gradients would both be named '{taken[0]}'; grad_names must tell them apart")
    bwd_in = {b.name for b in bwd.inputs}
    for o, b in renamed.items():
        if b not in bwd_in:
            fail(f"grad_names gives the gradient of '{o}' to backward input '{b}', which {bwd.cls} does not have")
        if b in fwd_in | fwd_out:
            fail(f"grad_names gives the gradient of '{o}' to '{b}', a forward tensor's name")
    sources, source_of = [], {}  # source_of: backward tensor -> forward tensor (for dtype/shape checks)
    for b in bwd.inputs:
        grad_of = next((o for o, g in grad_name.items() if g == b.name), None)
        if grad_of and b.name in fwd_in | fwd_out:
            fail(f"backward input '{b.name}' is ambiguous: both d<{grad_of}> and a forward tensor of that name")
        if grad_of in fwd.autograd_no_grad:
            fail(f"backward input '{b.name}' is the gradient of '{grad_of}', which no_grad marks not differentiable")
        if grad_of:
            src = ("grad", grad_of)
        elif b.name in fwd_in:
            src = ("input", b.name)
            if fwd.input(b.name).optional and not b.optional:
                fail(f"backward input '{b.name}' must be optional: forward input '{b.name}' is")
        elif b.name in fwd_out:
            src = ("output", b.name)
        else:
            fail(f"backward input '{b.name}' has no source: it is neither d<output> of a forward output "
                 f"({', '.join(sorted(fwd_out))}) nor a forward input or output of that name")
        sources.append(src)
        source_of[b.name] = src[1]
    grads = []
    for o in bwd.outputs:
        if not (o.name.startswith("d") and o.name[1:] in fwd_in):
            fail(f"backward output '{o.name}' is not d<input> of a forward input ({', '.join(i.name for i in fwd.inputs)})")
        if o.buffer or o.aliases:
            fail(f"backward output '{o.name}' must be a plain output (no buffer, no aliases)")
        grads.append(o.name[1:])
        source_of[o.name] = o.name[1:]

    # Every floating-point tensor of the forward takes part: no gradient silently dropped.
    def is_float(op, name):
        return _pairing_dtype_root(op, name, fail)[1] <= set(FLOAT_DTYPES)
    for o in fwd.outputs:
        if is_float(fwd, o.name) and ("grad", o.name) not in sources and o.name not in fwd.autograd_no_grad:
            fail(f"forward output '{o.name}' gets no gradient: backward {bwd.cls} has no input '{grad_name[o.name]}'")
    for i in fwd.inputs:
        if is_float(fwd, i.name) and i.name not in grads:
            fail(f"forward input '{i.name}' gets no gradient: backward {bwd.cls} has no output 'd{i.name}'")

    for p in bwd.params:
        fp = fwd.param(p.name)
        if fp is None:
            fail(f"backward param '{p.name}' has no forward param of that name")
        if (fp.type, fp.nullable) != (p.type, p.nullable):
            fail(f"backward param '{p.name}' is {p.schema_type} but the forward's is {fp.schema_type}")

    # dtypes: the backward accepts every dtype the forward gives it, ties what the forward ties, and a
    # gradient has its input's dtype. shapes: the same spec after following same_as on both sides.
    for bname, fname in source_of.items():
        broot, ballowed = _pairing_dtype_root(bwd, bname, fail)
        froot, fallowed = _pairing_dtype_root(fwd, fname, fail)
        is_grad_out = bwd.output(bname) is not None
        what = f"backward {'output' if is_grad_out else 'input'} '{bname}' vs forward '{fname}'"
        if (is_grad_out and ballowed != fallowed) or not fallowed <= ballowed:
            fail(f"dtype mismatch: {what}: {' | '.join(sorted(ballowed))} vs {' | '.join(sorted(fallowed))}")
        if broot != bname:  # tied in the backward: the forward must tie the two sources as well
            other = source_of[broot]
            oroot, oallowed = _pairing_dtype_root(fwd, other, fail)
            tied_by_combos = bool(fwd.dtype_combos) and all(
                dict(c).get(froot) is not None and dict(c).get(froot) == dict(c).get(oroot) for c in fwd.dtype_combos)
            if oroot != froot and not (len(fallowed) == 1 and fallowed == oallowed) and not tied_by_combos:
                fail(f"dtype mismatch: {what}: the backward ties '{bname}' to '{broot}' but the forward does not "
                     f"tie '{fname}' to '{other}'")
        if _shape_of(bwd, bname) != _shape_of(fwd, fname):
            fail(f"shape mismatch: {what}: {exprs.render(_shape_of(bwd, bname))} vs {exprs.render(_shape_of(fwd, fname))}")
    _check_pairing_combos(fwd, bwd, source_of, fail)
    return Pairing(bwd, tuple(sources), tuple(grads))


def _check_pairing_combos(fwd: Op, bwd: Op, source_of: dict, fail):
    """Every dtype combination the forward accepts (its unions within its dtype_combos) reaches the
    backward as one that the backward's dtype_combos accept."""
    if not fwd.dtype_combos and not bwd.dtype_combos:
        return
    import itertools
    roots = {}  # forward root tensor -> allowed dtypes
    for t in [*fwd.inputs, *fwd.outputs]:
        root, allowed = _pairing_dtype_root(fwd, t.name, fail)
        roots[root] = allowed
    names = sorted(roots)
    for dtypes in itertools.product(*(sorted(roots[n]) for n in names)):
        at = dict(zip(names, dtypes))
        dtype_in_fwd = {t.name: at[_pairing_dtype_root(fwd, t.name, fail)[0]] for t in fwd.inputs}
        if fwd.dtype_combos and not any(all(dtype_in_fwd[k] == d for k, d in c) for c in fwd.dtype_combos):
            continue  # the forward refuses this combination
        given = {b.name: at[_pairing_dtype_root(fwd, source_of[b.name], fail)[0]] for b in bwd.inputs}
        if bwd.dtype_combos and not any(all(given[k] == d for k, d in c) for c in bwd.dtype_combos):
            shown = ", ".join(f"{k}={v}" for k, v in given.items())
            fail(f"dtype mismatch: the forward accepts {', '.join(f'{k}={v}' for k, v in dtype_in_fwd.items())}, "
                 f"which gives backward {bwd.cls} ({shown}), outside its dtype_combos")
