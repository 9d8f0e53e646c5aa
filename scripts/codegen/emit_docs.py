"""Documentation table of every op, from the model and the targets' kernel lines."""
from __future__ import annotations

import os
import re

from .emit_cpp import schema

# TILEOPS_BUILTIN_KERNEL(<target>, <OpClass>, ...) / TILEOPS_PENDING_KERNEL(...) in src/targets (builtin.h),
# written out or inside a file's own macro whose first argument is the class (TILEOPS_POOL_REFERENCE(...)).
_KERNEL_LINE = re.compile(r"^TILEOPS_(BUILTIN|PENDING)_KERNEL\(\s*(\w+)\s*,\s*(\w+)\s*,", re.M)
_DEFINE = re.compile(r"^#define (\w+)\(\s*(\w+)[^)]*\)((?:.*\\\n)*.*)", re.M)


def collect_kernels(targets_root: str) -> dict[str, dict[str, str]]:
    """{op class: {target: 'verified' | 'pending'}} from the in-tree targets' registration lines."""
    found: dict[str, dict[str, str]] = {}
    for d, _, files in os.walk(targets_root):
        for f in sorted(files):
            if f.endswith(".cpp"):
                with open(os.path.join(d, f), encoding="utf-8") as src:
                    text = src.read()
                lines = _KERNEL_LINE.findall(text)
                for name, param, body in _DEFINE.findall(text):
                    inner = re.search(rf"TILEOPS_(BUILTIN|PENDING)_KERNEL\(\s*(\w+)\s*,\s*{param}\b", body)
                    if inner:
                        lines += [(inner.group(1), inner.group(2), cls)
                                  for cls in re.findall(rf"^{name}\(\s*(\w+)", text, re.M)]
                for kind, target, cls in lines:
                    found.setdefault(cls, {})[target] = "pending" if kind == "PENDING" else "verified"
    return found


def serving(kernels: dict[str, str]) -> tuple[str, str]:
    """Who serves CPU and CUDA calls that name no target (docs/CONTRACT.md §6: the detected target's
    verified kernel, else the backstops: cublaslt on CUDA, then the reference)."""
    cpu = "reference" if kernels.get("reference") == "verified" else "-"
    cuda = next((t for t in ("nvrtc", "cublaslt") if kernels.get(t) == "verified"), cpu)
    pending = [t for t in ("nvrtc", "cublaslt") if kernels.get(t) == "pending"]
    if cuda == cpu and pending:
        cuda += f" ({', '.join(pending)} pending)"
    return cpu, cuda


def emit(ops, kernels: dict[str, dict[str, str]]) -> str:
    rows = ["# libtileops operators (generated from manifests/; do not edit)", "",
            "| class | status | boundary | cpu | cuda | operators | ref_api | autograd (opt-in) |",
            "|---|---|---|---|---|---|---|---|"]
    for op in ops:
        names = "<br>".join(f"`tileops::{op.operator_name(b)}`" for b in op.branches)
        # elementwise entries: one engine per target registers every one (its loop, not a line)
        own = kernels.get(op.cls) or ({"nvrtc": "verified", "reference": "verified"} if op.elementwise else {})
        cpu, cuda = serving(own) if op.has_boundary else ("-", "-")
        rows.append(f"| {op.cls} | {op.status} | {'yes' if op.has_boundary else 'no'} | {cpu} | {cuda} | {names} | "
                    f"`{op.ref_api}` | {op.autograd or ''} |")
    rows += ["", "## Schemas", ""]
    for op in ops:
        for b in op.branches:
            rows.append(f"- `{schema(op, b)}`")
    return "\n".join(rows) + "\n"


# A row of tuning_keys() in src/targets/nvrtc/tuning.cpp:
# {"name", &Tuning::field, lo, hi, "what"[, pow2[, "pending op classes"]]}.
_TUNING_KEY = re.compile(r'\{"(\w+)",\s*&Tuning::\w+,\s*([^,]+?),\s*([^,]+?),\s*"([^"]*)"\s*'
                         r'(?:,\s*(true|false)\s*)?(?:,\s*"[^"]*"\s*)?\}')


def collect_tuning_keys(targets_root: str) -> list[tuple[str, str, str, str, bool]]:
    """(name, lo, hi, what, powers of two only) per TILEOPS_TUNE key, in the table's order."""
    with open(os.path.join(targets_root, "nvrtc", "tuning.cpp"), encoding="utf-8") as f:
        text = f.read()
    def value(v: str) -> str:  # "1 << 30" as the number the library prints
        shift = re.fullmatch(r"(\d+)\s*<<\s*(\d+)", v.strip())
        return str(int(shift.group(1)) << int(shift.group(2))) if shift else v.strip()
    return [(n, value(lo), value(hi), what, pow2 == "true") for n, lo, hi, what, pow2 in _TUNING_KEY.findall(text)]


def emit_tuning(keys) -> str:
    """The developer page of TILEOPS_TUNE's keys: what each overrides in the plans, and its range."""
    out = ["# TILEOPS_TUNE keys", "",
           "Generated from `src/targets/nvrtc/tuning.cpp` by scripts/codegen; do not edit. A developer tool for",
           "measurement sweeps (`scripts/bench/sweep.py`, `SWEEP_ENV=` in `scripts/gpu_check.sh`):",
           "`TILEOPS_TUNE=key=value,key=value`, read once a process; each key overrides one entry of a family's",
           "plan table (`<family>_table(tuning)`). Not an interface: no user-facing behaviour depends on it.", "",
           "| key | values | overrides |", "|---|---|---|"]
    for name, lo, hi, what, pow2 in keys:
        out.append(f"| `{name}` | {lo}..{hi}{' (powers of two)' if pow2 else ''} | {what} |")
    return "\n".join(out) + "\n"
