"""The Op-class view of docs/CONTRACT.md §9, built from the library's op table (itself generated from manifests/).

An Op instance holds its construction params (and target); calling it calls the operator of the
matching side-effect branch with those params. Nothing here decides a target or builds a kernel:
that happens inside the operator (the graph node), so torch.compile sees exactly one node per op.
"""
from __future__ import annotations

from typing import Any, ClassVar

import torch

from . import load, op_table, target_names


class Op:
    op_class: ClassVar[str]
    compile_op_names: ClassVar[tuple[str, ...]]
    _entry: ClassVar[dict]

    def __init__(self, *args: Any, target: str | None = None, inplace: bool = False, **kwargs: Any):
        params = self._entry["params"]
        # inplace=True picks the branch that writes every `mutated: optional` input (e.g. _writes_x).
        if inplace and not any(i["mutated"] == "optional" for i in self._entry["inputs"]):
            raise TypeError(f"{self.op_class} has no in-place branch (no input is 'mutated: optional')")
        self.inplace = bool(inplace)
        if len(args) > len(params):
            raise TypeError(f"{self.op_class}() takes {len(params)} params, got {len(args)}")
        values = {}
        for p, v in zip(params, args):
            values[p["name"]] = v
        for k, v in kwargs.items():
            if k not in {p["name"] for p in params}:
                raise TypeError(f"{self.op_class}() got an unexpected param '{k}'")
            if k in values:
                raise TypeError(f"{self.op_class}() got param '{k}' twice")
            values[k] = v
        for p in params:
            if p["name"] not in values:
                if not p["has_default"]:
                    raise TypeError(f"{self.op_class}() is missing param '{p['name']}'")
                values[p["name"]] = p["default"]
            if p["type"] == "ScalarType" and isinstance(values[p["name"]], str):
                values[p["name"]] = getattr(torch, values[p["name"]])  # the op table spells dtypes as names
            if p["type"] == "int[]" and values[p["name"]] is not None:
                v = values[p["name"]]
                # an int stands for every element of an int[N] param, as torch's int[N] schema reads it
                values[p["name"]] = [int(v)] * (p.get("length") or 1) if isinstance(v, int) else [int(d) for d in v]
        if target is not None and not self._entry["has_boundary"]:
            raise TypeError(f"{self.op_class} has no compile boundary (no tensor inputs, or composite): the device "
                            "of its inputs or its device param chooses the target")
        if target is not None and target not in target_names():
            raise ValueError(f"{self.op_class}: unknown target '{target}' (registered: {', '.join(target_names())})")
        self.target = target
        self._params = tuple(values[p["name"]] for p in params)
        # What every call reads, worked out once: an eager call through the class should cost about
        # what the operator costs (a target=None keyword alone adds half a microsecond of parsing).
        self._target_kw = {"target": target} if target is not None and self._entry["has_boundary"] else {}
        self._n_inputs = len(self._entry["inputs"])
        self._required = tuple(k for k, i in enumerate(self._entry["inputs"]) if not i["optional"])
        self._plain = self._operators.get((self.inplace, False))
        # Built while dynamo traces (an Op made inside the compiled function): its params are the
        # trace's own values, constants or the function's inputs, and the object exists only in
        # the trace, so _bound_params cannot run on it.
        self._made_in_trace = torch.compiler.is_compiling()
        for p in params:
            setattr(self, p["name"], values[p["name"]])

    # An Op's params are fixed at construction. Under torch.compile(dynamic=True) dynamo would
    # otherwise lift a float param (eps) read from the instance into a graph input and recompile
    # when it specialises it later; marked constant, the params are baked into the graph.
    @torch.compiler.assume_constant_result
    def _bound_params(self) -> tuple:
        return self._params

    def _call_params(self) -> tuple:
        return self._params if self._made_in_trace else self._bound_params()

    def _by_name(self, tensors: tuple, named: dict) -> tuple:
        """Tensor inputs given by name (ClampFwdOp()(x, max=hi)) put in schema order."""
        names = [i["name"] for i in self._entry["inputs"]]
        args = list(tensors) + [None] * (len(names) - len(tensors))
        for name, value in named.items():
            if name not in names:
                raise TypeError(f"{self.op_class} has no tensor input '{name}' (inputs: {', '.join(names)})")
            k = names.index(name)
            if k < len(tensors):
                raise TypeError(f"{self.op_class}: input '{name}' given by position and by name")
            args[k] = value
        while args and args[-1] is None and len(args) > len(tensors):
            args.pop()
        return tuple(args)

    def __call__(self, *tensors: Any, out: torch.Tensor | None = None, **named: Any):
        if named:
            tensors = self._by_name(tensors, named)
        if out is None and not self.inplace and len(tensors) == self._n_inputs:  # the common call
            for k in self._required:
                if tensors[k] is None:
                    raise TypeError(f"{self.op_class}: input '{self._entry['inputs'][k]['name']}' is required")
            return self._plain(*tensors, *self._call_params(), **self._target_kw)
        inputs = self._entry["inputs"]
        if len(tensors) > len(inputs):
            raise TypeError(f"{self.op_class} takes {len(inputs)} tensor inputs, got {len(tensors)}")
        args = list(tensors) + [None] * (len(inputs) - len(tensors))
        for i, a in zip(inputs, args):
            if a is None and not i["optional"]:
                raise TypeError(f"{self.op_class}: input '{i['name']}' is required")
        overload = self._operators.get((self.inplace, out is not None))
        kwargs = self._target_kw
        if out is not None:
            if overload is None:
                raise TypeError(f"{self.op_class} has no output buffer branch"
                                + (" that writes its inputs in place" if self.inplace else ""))
            return overload(*args, out, *self._call_params(), **kwargs)
        result = overload(*args, *self._call_params(), **kwargs)
        if result is None and self.inplace:
            # As torch's in-place functions (relu_, F.silu(inplace=True)): return the written input(s).
            written = [a for a, i in zip(args, inputs) if i["mutated"] != "no"]
            return written[0] if len(written) == 1 else tuple(written)
        return result

    def __repr__(self) -> str:
        ps = ", ".join(f"{p['name']}={getattr(self, p['name'])!r}" for p in self._entry["params"])
        extra = (", target=" + repr(self.target) if self.target else "") + (", inplace=True" if self.inplace else "")
        return f"{self.op_class}({ps}{extra})"


def _overload(name: str):
    return getattr(torch.ops.tileops, name).default


def make_classes(family: str) -> dict[str, type]:
    load()
    classes = {}
    for entry in op_table():
        if entry["family"] != family or entry["status"] != "implemented":
            continue
        if any(p["name"] == "inplace" for p in entry["params"]):
            raise RuntimeError(f"{entry['class']}: a param named 'inplace' clashes with Op(inplace=...)")
        always = {i["name"] for i in entry["inputs"] if i["mutated"] == "always"}
        every = always | {i["name"] for i in entry["inputs"] if i["mutated"] == "optional"}
        # (inplace, out) -> the operator of that branch that emits every output.
        operators = {}
        for o in entry["operators"]:
            if not o["without"] and set(o["writes"]) in (always, every):
                operators[(set(o["writes"]) == every != always, o["out"])] = _overload(o["name"])
        cls = type(entry["class"], (Op,), {
            "op_class": entry["class"],
            "compile_op_names": tuple(entry["compile_op_names"]),
            "_entry": entry,
            "_operators": operators,
            "__doc__": f"{entry['class']} ({entry['manifest']}); matches {entry['ref_api']}.",
        })
        classes[entry["class"]] = cls
    return classes
