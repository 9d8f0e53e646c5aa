"""DTensor sharding rules for every tileops operator with a boundary, made from each manifest entry's
`sharding:` (docs/MANIFEST.md, docs/CONTRACT.md §12).

A call on DTensor inputs runs the operator once per rank on the local shards when the inputs' placements
are ones the rule allows (no communication); otherwise DTensor redistributes them first, to the allowed
placement it finds cheapest (at worst Replicate: correct, never an error). An input the operator writes
(in place, or an `out=` buffer) is never redistributed, since the write would land in a copy: when its
placement is not one the rule allows the call raises, naming the op, the input and the rule.

The rules register when torch.distributed.tensor is imported (or at once if it already is), so that
`import tileops` does not import the distributed package.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys

import torch

_registered = False


def register() -> int:
    """Registers a rule for every operator with a boundary (idempotent); returns how many."""
    global _registered
    from torch.distributed.tensor._op_schema import RuntimeSchemaInfo
    from torch.distributed.tensor._ops.utils import register_op_strategy

    from . import load, op_table
    load()
    count = 0
    for entry in op_table():
        if entry["status"] != "implemented" or not entry["has_boundary"]:
            continue
        for o in entry["operators"]:
            overload = getattr(torch.ops.tileops, o["name"]).default
            rule = _Rule(entry, o, overload)
            if not _registered:
                register_op_strategy(overload, schema_info=RuntimeSchemaInfo(
                    static_argnum=rule.first_param, static_kwargkey=["target"]))(rule)
            count += 1
    _registered = True
    return count


def rule_of(operator: str) -> str:
    """The `sharding:` of an operator's entry, as its manifest spells it (for messages and docs)."""
    from . import op_table
    for entry in op_table():
        if any(o["name"] == operator for o in entry["operators"]):
            return _spell(entry["sharding"])
    raise KeyError(operator)


def _spell(s: dict) -> str:
    kind = s["kind"]
    if kind == "free":
        return f"free: {s['free']}" + (f", partial: {s['partial']}" if s.get("partial") else "")
    if kind == "matmul":
        return f"matmul: {s['matmul']}"
    if s.get("combine"):
        return f"reduce: {s['reduce']}, combine: {s['combine']}"
    if kind in ("except", "reduce"):
        return f"{kind}: {s[kind]}"
    return kind


def _tokens(text: str) -> list[str]:
    """The dims of a `[...]` shape, split at top-level commas (`select(trans_b, b1, b2)` is one dim)."""
    out, depth, cur = [], 0, ""
    for ch in text.strip()[1:-1]:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [t for t in out + [cur.strip()] if t]


class _Rule:
    """The strategy function of one operator: DTensor calls it with the call's OpSchema."""

    def __init__(self, entry: dict, operator: dict, overload):
        self.entry, self.name, self.kind = entry, operator["name"], entry["sharding"]["kind"]
        args = overload._schema.arguments
        inputs = {i["name"]: i for i in entry["inputs"]}
        buffers = [o for o in entry["outputs"] if o["buffer"]]
        self.args = []  # (schema position, arg name, shape text, written) of each tensor argument
        for pos, a in enumerate(args):
            if not isinstance(a.type, (torch.TensorType, torch.OptionalType)) or "Tensor" not in str(a.type):
                continue
            written = a.alias_info is not None and a.alias_info.is_write
            shape = inputs[a.name]["shape"] if a.name in inputs else buffers.pop(0)["shape"]
            self.args.append((pos, a.name, shape, written))
        self.first_param = max(p for p, *_ in self.args) + 1
        writes, without = set(operator["writes"]), set(operator["without"])
        self.returns = [] if operator["out"] else [
            o for o in entry["outputs"] if o["name"] not in without and o["aliases"] not in writes]
        self.arg_names = [a.name for a in args]
        self.defaults = {a.name: a.default_value for a in args if a.has_default_value()}
        self.__name__ = f"tileops_sharding_{self.name}"  # what DTensor's logs name

    # ---- reading the call ------------------------------------------------------------------------
    def _value(self, op_schema, name):
        pos = self.arg_names.index(name)
        if pos < len(op_schema.args_schema):
            return op_schema.args_schema[pos]
        return op_schema.kwargs_schema.get(name, self.defaults.get(name))

    def _shape_of(self, text, present, op_schema):
        """Dim tokens of a shape: `same_as(x)`, `pool(x, ...)` follow x; `*p` expands to len(p)."""
        if not text.strip().startswith("["):  # same_as(x), pool(x, ...): x's dims
            ref = text[text.index("(") + 1:].split(",")[0].rstrip(")").strip()
            ref_text = next((s for _, n, s, _ in self.args if n == ref), None) \
                or next(i["shape"] for i in self.entry["inputs"] if i["name"] == ref)
            return self._shape_of(ref_text, present, op_schema)
        out = []
        for t in _tokens(text):
            if t.startswith("*"):
                out += [f"{t}#{k}" for k in range(len(self._value(op_schema, t[1:])))]
            else:
                out.append(t)
        return out

    # ---- the strategy ----------------------------------------------------------------------------
    def __call__(self, op_schema):
        from torch.distributed.tensor._op_schema import OpStrategy
        from torch.distributed.tensor._ops.utils import expand_to_full_mesh_op_strategy
        from torch.distributed.tensor.placement_types import Replicate

        present = [(pos, name, shape, written, op_schema.args_schema[pos] if pos < len(op_schema.args_schema)
                    else op_schema.kwargs_schema.get(name)) for pos, name, shape, written in self.args]
        present = [p for p in present if isinstance(p[4], OpStrategy)]
        ndims = [p[4].ndim for p in present]
        shapes = [tuple(p[4].shape) for p in present]
        n_out = len(self.returns)
        rows = getattr(self, "_" + self.kind)(op_schema, present, ndims, shapes)
        rows.append([Replicate()] * (n_out + len(present)))
        mesh = present[0][4].mesh
        # No layout leaves a rank an empty shard (a dim smaller than the mesh): an op that refuses empty
        # inputs, as torch's adaptive pools do, would fail on that rank alone and the others would hang.
        strategy = expand_to_full_mesh_op_strategy(mesh, op_schema, rows, input_index=n_out)
        written = [k for k, p in enumerate(present) if p[3]]
        if written:
            now = [present[k][4].strategies[0].output_spec.placements for k in written]
            keep = [s for s in strategy.strategies
                    if all(s.input_specs[k].placements == pl for k, pl in zip(written, now))]
            if not keep:
                k = written[0]
                raise RuntimeError(
                    f"tileops.{self.name}: input '{present[k][1]}' is written in place and is placed "
                    f"{tuple(now[0])}, which the op's sharding ({_spell(self.entry['sharding'])}) cannot "
                    f"keep; redistribute it first (e.g. to Replicate) and pass the result")
            strategy.strategies = keep
        return strategy

    def _replicate(self, op_schema, present, ndims, shapes):
        return []

    def _free(self, op_schema, present, ndims, shapes):
        from torch.distributed.tensor.placement_types import Partial, Replicate, Shard
        s = self.entry["sharding"]
        partial = set(s.get("partial") or ())
        toks_in = [self._shape_of(p[2], present, op_schema) for p in present]
        # One length for every `...` of the op (the manifests' shapes share their leading dims).
        ell = next((n - (len(t) - 1) for t, n in zip(toks_in, ndims) if "..." in t), 0)
        toks_out = [self._shape_of(o["shape"], present, op_schema) for o in self.returns]

        def dims(toks):  # token -> dim index, `...` expanded to ...0, ...1
            out, d = {}, 0
            for t in toks:
                if t == "...":
                    for j in range(ell):
                        out[f"...{j}"] = d
                        d += 1
                else:
                    out[t] = d
                    d += 1
            return out

        din, dout = [dims(t) for t in toks_in], [dims(t) for t in toks_out]
        groups = []
        for g in s["free"]:
            groups += [[f"...{j}"] for j in range(ell)] if g == "..." else [g.split("|")]
        rows = []
        ranks = present[0][4].mesh.size()
        for g in groups:
            if not any(n in d for d in din for n in g):
                continue
            # Dims sharded together split evenly, so each rank holds the same fraction of each: GQA's
            # query heads keep their KV head (H = 12, H_kv = 3 on 2 ranks would pair them wrongly).
            if len(g) > 1 and any(shape[d[n]] % ranks for d, shape in zip(din, shapes) for n in g if n in d):
                continue
            row = []
            for o, d in zip(self.returns, dout):
                hit = next((d[n] for n in g if n in d), None)
                row.append(Shard(hit) if hit is not None else Partial() if o["name"] in partial else Replicate())
            for d in din:
                hit = next((d[n] for n in g if n in d), None)
                row.append(Shard(hit) if hit is not None else Replicate())
            rows.append(row)
        return rows

    def _except(self, op_schema, present, ndims, shapes):
        from torch.distributed.tensor.placement_types import Shard
        n = ndims[0]
        dim = self._value(op_schema, self.entry["sharding"]["except"])
        if n == 0:
            return []
        dim %= n
        return [[Shard(d)] * (len(self.returns) + len(present)) for d in range(n) if d != dim]

    def _reduce(self, op_schema, present, ndims, shapes):
        from torch.distributed.tensor.placement_types import Partial, Shard
        n = ndims[0]
        combine = self.entry["sharding"].get("combine")
        dim = self._value(op_schema, self.entry["sharding"]["reduce"])
        every = dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0)
        if n == 0:
            return []
        reduced = set(range(n)) if every else {d % n for d in ([dim] if isinstance(dim, int) else dim)}
        keepdim = bool(self._value(op_schema, "keepdim")) if "keepdim" in self.arg_names else False
        rows = []
        for d in range(n):
            if d in reduced:
                if combine:  # each rank reduces its shard; the results combine by `combine`
                    rows.append([Partial(combine)] * len(self.returns) + [Shard(d)] * len(present))
                continue
            od = d if keepdim else d - sum(r < d for r in reduced)
            rows.append([Shard(od)] * len(self.returns) + [Shard(d)] * len(present))
        return rows

    def _matmul(self, op_schema, present, ndims, shapes):
        """torch.mm's rules for d = op(a) @ op(b), op(x) = x.T where its flag is set: M shards a and d,
        N shards b and d, K shards a and b and leaves d a partial sum."""
        from torch.distributed.tensor.placement_types import Partial, Replicate, Shard
        if len(present) != 2:
            return []
        ta, tb = (bool(self._value(op_schema, f)) for f in self.entry["sharding"]["matmul"])
        m_of_a, k_of_a = (1, 0) if ta else (0, 1)
        k_of_b, n_of_b = (1, 0) if tb else (0, 1)
        return [[Shard(0), Shard(m_of_a), Replicate()],
                [Shard(1), Replicate(), Shard(n_of_b)],
                [Partial(), Shard(k_of_a), Shard(k_of_b)]]

    def _pointwise(self, op_schema, present, ndims, shapes):
        """As torch's pointwise ops: a dim of the output shards where every input holding it whole (not
        broadcast from 1) shards alike. `along(input, k)` (PReLU's weight) follows dim k of the output."""
        from torch.distributed.tensor.placement_types import Replicate, Shard
        along = [int(p[2].split(",")[1].rstrip(") ")) if p[2].startswith("along(") else None for p in present]
        out = list(torch.broadcast_shapes(*[s for s, a in zip(shapes, along) if a is None]))
        rows = []
        for d in range(len(out)):
            row = [Shard(d)] * len(self.returns)
            for shape, a in zip(shapes, along):
                if a is not None:
                    row.append(Shard(0) if a == d and len(shape) == 1 and shape[0] == out[d] > 1 else Replicate())
                    continue
                ad = d - (len(out) - len(shape))
                row.append(Shard(ad) if ad >= 0 and shape[ad] == out[d] else Replicate())
            rows.append(row)
        return rows


# ---- registration when torch.distributed.tensor is imported ---------------------------------------------
class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs register() right after torch.distributed.tensor is first imported."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch.distributed.tensor":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        exec_module = spec.loader.exec_module

        def run(module):
            exec_module(module)
            try:
                register()
            except Exception as e:  # DTensor's internals moved: say so, never break the import
                import warnings
                warnings.warn(f"tileops: no DTensor sharding rules registered ({type(e).__name__}: {e}); "
                              "tileops ops on DTensor inputs will fail", RuntimeWarning, stacklevel=2)
        spec.loader.exec_module = run
        return spec


def install() -> None:
    """Registers now if DTensor is already imported, else right after its import."""
    if "torch.distributed.tensor" in sys.modules:
        register()
    elif torch.distributed.is_available() and not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())
