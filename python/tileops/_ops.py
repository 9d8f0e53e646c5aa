"""The Op-class view of SPEC.md, built from the library's op table (itself generated from manifests/).

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

    def __init__(self, *args: Any, target: str | None = None, **kwargs: Any):
        params = self._entry["params"]
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
            if p["type"] == "int[]" and values[p["name"]] is not None:
                v = values[p["name"]]
                values[p["name"]] = [int(v)] if isinstance(v, int) else [int(d) for d in v]
        if target is not None and not self._entry["has_boundary"]:
            raise TypeError(f"{self.op_class} has no compile boundary (no tensor inputs, or composite): the device "
                            "of its inputs or its device param chooses the target")
        if target is not None and target not in target_names():
            raise ValueError(f"{self.op_class}: unknown target '{target}' (registered: {', '.join(target_names())})")
        self.target = target
        self._params = tuple(values[p["name"]] for p in params)
        for p in params:
            setattr(self, p["name"], values[p["name"]])

    def __call__(self, *tensors: Any, out: torch.Tensor | None = None):
        inputs = self._entry["inputs"]
        if len(tensors) > len(inputs):
            raise TypeError(f"{self.op_class} takes {len(inputs)} tensor inputs, got {len(tensors)}")
        args = list(tensors) + [None] * (len(inputs) - len(tensors))
        for i, a in zip(inputs, args):
            if a is None and not i["optional"]:
                raise TypeError(f"{self.op_class}: input '{i['name']}' is required")
        overload = self._out_operator if out is not None else self._operator
        kwargs = {"target": self.target} if self._entry["has_boundary"] else {}
        if out is not None:
            if overload is None:
                raise TypeError(f"{self.op_class} has no output buffer branch")
            return overload(*args, out, *self._params, **kwargs)
        return overload(*args, *self._params, **kwargs)

    def __repr__(self) -> str:
        ps = ", ".join(f"{p['name']}={getattr(self, p['name'])!r}" for p in self._entry["params"])
        return f"{self.op_class}({ps}{', target=' + repr(self.target) if self.target else ''})"


def _overload(name: str):
    return getattr(torch.ops.tileops, name).default


def make_classes(family: str) -> dict[str, type]:
    load()
    classes = {}
    for entry in op_table():
        if entry["family"] != family or entry["status"] != "implemented":
            continue
        base = [o for o in entry["operators"] if not o["out"] and not o["without"]
                and set(o["writes"]) == {i["name"] for i in entry["inputs"] if i["mutated"] == "always"}]
        outs = [o for o in entry["operators"] if o["out"] and not o["without"]]
        cls = type(entry["class"], (Op,), {
            "op_class": entry["class"],
            "compile_op_names": tuple(entry["compile_op_names"]),
            "_entry": entry,
            "_operator": staticmethod(_overload(base[0]["name"])) if base else None,
            "_out_operator": staticmethod(_overload(outs[0]["name"])) if outs else None,
            "__doc__": f"{entry['class']} ({entry['manifest']}); matches {entry['ref_api']}.",
        })
        classes[entry["class"]] = cls
    return classes
