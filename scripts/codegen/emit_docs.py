"""Documentation table of every op, from the model."""
from __future__ import annotations

from .emit_cpp import schema


def emit(ops) -> str:
    rows = ["# libtileops operators (generated from manifests/; do not edit)", "",
            "| class | status | boundary | operators | ref_api | autograd (opt-in) |", "|---|---|---|---|---|---|"]
    for op in ops:
        names = "<br>".join(f"`tileops::{op.operator_name(b)}`" for b in op.branches)
        rows.append(f"| {op.cls} | {op.status} | {'yes' if op.has_boundary else 'no'} | {names} | `{op.ref_api}` | {op.autograd or ''} |")
    rows += ["", "## Schemas", ""]
    for op in ops:
        for b in op.branches:
            rows.append(f"- `{schema(op, b)}`")
    return "\n".join(rows) + "\n"
