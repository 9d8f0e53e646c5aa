"""Elementwise benchmarks on a GPU: the engine's kernels beside torch eager (ref_api), torch.compile
of it and a device copy of the same bytes (every input read, the output written), per manifest
workload of manifests/elementwise.yaml, plus, for a few binary ops, the layouts the engine plans
differently: an outer broadcast ([4096, 1] + [1, 4096]), a transposed input, a 0-dim operand, a
bias row and a decode-sized call ([4, 8192] twice). Each row also records its first call's time
when that call compiled the kernel (an empty kernel cache: what a new op costs once). A benchmark,
not a test.
    python3 scripts/bench/bench_elementwise.py [--json out.json] [--quick] [--ops AddFwdOp,...]
"""
from __future__ import annotations

import argparse
import time

import torch

import harness  # scripts/bench/harness.py
import tileops

LAYOUT_OPS = ("AddFwdOp", "MulFwdOp", "MaximumFwdOp")
# Params for entries whose manifest gives no default (or a workload gives none).
PARAMS = {"ClampScalarFwdOp": {"min": -1.0, "max": 1.0}}


def entries():
    return {e["class"]: e for e in tileops.op_table() if e["family"] == "elementwise" and e["status"] == "implemented"}


def layouts(entry, wl):
    """(label, make(dtype) -> inputs) per layout: the workload as given, and for LAYOUT_OPS the extra ones."""
    names = [i["name"] for i in entry["inputs"]]
    fixed = {i["name"]: i.get("dtype") for i in entry["inputs"]}

    def tensor(name, shape, dtype):
        return harness.random_tensor(shape, torch.bool if fixed[name] == "bool" else dtype)

    # an optional input the workload leaves out (ClampFwdOp's min-only row) is passed as None
    out = [(wl["name"], lambda dt: [tensor(n, tuple(wl[n]), dt) if n in wl else None for n in names])]
    # The layouts choose the engine's path, not the op's expression: a few binary ops show them.
    if entry["class"] in LAYOUT_OPS and wl["name"] == entry["workloads"][0]["name"]:
        a, b = names
        out.append(("outer-broadcast", lambda dt: [tensor(a, (4096, 1), dt), tensor(b, (1, 4096), dt)]))
        out.append(("transposed-input", lambda dt: [tensor(a, (4096, 4096), dt).t(), tensor(b, (4096, 4096), dt)]))
        out.append(("0-dim-operand", lambda dt: [tensor(a, (8192, 8192), dt), tensor(b, (), dt)]))
        out.append(("bias-row", lambda dt: [tensor(a, (8192, 8192), dt), tensor(b, (8192,), dt)]))
        out.append(("decode-rows", lambda dt: [tensor(a, (4, 8192), dt), tensor(b, (4, 8192), dt)]))
    return out


def rows_for(entry, quick: bool) -> list[dict]:
    op = getattr(torch.ops.tileops, entry["name"])
    ref = eval(entry["ref_api"], {"torch": torch})
    rows = []
    for wl in entry["workloads"]:
        params = {p["name"]: p["default"] for p in entry["params"] if p["has_default"]}
        params.update(PARAMS.get(entry["class"], {}))
        params.update(wl.get("params", {}))
        for label, make in layouts(entry, wl):
            for d in wl["dtypes"][:1] if quick else wl["dtypes"]:
                dtype = harness.DTYPES[d]
                args0 = make(dtype)
                torch.cuda.synchronize()
                compiles = tileops.counters()["nvrtc_compiles"]
                t0 = time.perf_counter()
                y0 = op(*args0, **params)  # the first call of this kernel: NVRTC compile when the cache is empty
                torch.cuda.synchronize()
                first_ms = (time.perf_counter() - t0) * 1e3
                compiled_now = tileops.counters()["nvrtc_compiles"] > compiles
                given = [a for a in args0 if a is not None]
                bytes_per_call = sum(a.numel() * a.element_size() for a in given) + y0.numel() * y0.element_size()
                n_sets = harness.n_sets_for(bytes_per_call)
                sets = [args0] + [make(dtype) for _ in range(n_sets - 1)]
                half = bytes_per_call // 2  # a copy of half the bytes reads and writes them all
                srcs = [torch.empty(half, device="cuda", dtype=torch.uint8) for _ in range(n_sets)]
                dsts = [torch.empty(half, device="cuda", dtype=torch.uint8) for _ in range(n_sets)]
                compiled = harness.compiled(lambda *a: ref(*a, **params))
                shape = "+".join("x".join(map(str, a.shape)) or "()" for a in given)
                rows.append(harness.measure(label, shape, dtype, bytes_per_call, n_sets, {
                    "ours": lambda i: (lambda: op(*sets[i], **params)),
                    "eager": lambda i: (lambda: ref(*sets[i], **params)),
                    "compile": lambda i: (lambda: compiled(*sets[i])),
                    "copy": lambda i: (lambda: dsts[i].copy_(srcs[i])),
                }))
                rows[-1]["op"] = entry["class"]
                if compiled_now:
                    rows[-1]["first_call_ms"] = first_ms
                del args0, sets, srcs, dsts
        if quick:
            break
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="first workload and dtype of each op")
    ap.add_argument("--ops", help="comma-separated op classes (default: all)")
    args = ap.parse_args()
    tileops.load()
    report = {"device": torch.cuda.get_device_properties(0).name, "torch": torch.__version__, "kernels": []}
    table = entries()
    for cls in (args.ops.split(",") if args.ops else sorted(table)):
        rows = rows_for(table[cls], args.quick)
        report["kernels"] += rows
        harness.print_table(cls, rows)
    harness.write_json(args.json, report)


if __name__ == "__main__":
    main()
