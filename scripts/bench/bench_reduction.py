"""Reduction benchmarks on a GPU: softmax / log_softmax kernels beside torch eager (ref_api),
torch.compile of it and a device copy of the same bytes, in one run; then the dim reductions
(sum ... logsumexp) on inputs of 64 MB and more over rows, columns and every dim, beside eager,
torch.compile and a copy moving the input's bytes once (half of x read, half written: the time of
reading x once), so copy/ours >= 0.91 means within 1.1x of one read of the input; then the scans
(cumsum, cumprod, logcumsumexp) on their manifest workloads, beside eager, torch.compile and a copy of x (x read, y
written: the bytes a scan moves at least).
A benchmark, not a test.    python3 scripts/bench/bench_reduction.py [--json out.json] [--quick]
                                 [--only softmax,dim,scans]   (the parts to run; default: all)
                                 [--stems argmax,var]         (dim reductions: these ops only)
"""
from __future__ import annotations

import argparse

import torch

import harness  # scripts/bench/harness.py
import peers  # scripts/bench/peers.py
import tileops

OPS = {  # class -> (our operator, ref_api)
    "SoftmaxFwdOp": (lambda: torch.ops.tileops.reduction_softmax_fwd, torch.softmax),
    "LogSoftmaxFwdOp": (lambda: torch.ops.tileops.reduction_log_softmax_fwd, torch.log_softmax),
}


def rows_for(op_class: str, quick: bool) -> list[dict]:
    ours_op, ref = OPS[op_class][0](), OPS[op_class][1]
    workloads = []
    for wl in harness.manifest_workloads("reduction", op_class):
        for d in wl["dtypes"]:
            workloads.append((wl["name"], tuple(wl["x"]), harness.DTYPES[d]))
    if quick:
        workloads = workloads[:1]
    rows = []
    for name, shape, dtype in workloads:
        numel = 1
        for s in shape:
            numel *= s
        bytes_per_call = 2 * numel * dtype.itemsize
        n_sets = harness.n_sets_for(bytes_per_call)
        xs = [torch.randn(*shape, device="cuda", dtype=dtype) * 4 for _ in range(n_sets)]
        ys = [torch.empty_like(x) for x in xs]
        compiled = harness.compiled(lambda x: ref(x, -1))
        rows.append(harness.measure(name, "x".join(map(str, shape)), dtype, bytes_per_call, n_sets, {
            "ours": lambda i: (lambda: ours_op(xs[i], -1)),
            "eager": lambda i: (lambda: ref(xs[i], -1)),
            "compile": lambda i: (lambda: compiled(xs[i])),
            "copy": lambda i: (lambda: ys[i].copy_(xs[i])),
            **(peers.softmax(xs) if op_class == "SoftmaxFwdOp" else {}),
        }))
        del xs, ys
    return rows


# (op stem, ref_api with dims, input dtypes): the dim reductions measured (op class: the stem's
# manifest class, e.g. log_sum_exp -> LogSumExpFwdOp).
REDUCE_OPS = [
    ("sum", lambda x, d: torch.sum(x, d), None),
    ("mean", lambda x, d: torch.mean(x, d), None),
    ("amax", lambda x, d: torch.amax(x, d), None),
    ("var", lambda x, d: torch.var(x, d), None),
    ("l2_norm", lambda x, d: torch.linalg.vector_norm(x, 2, d), None),
    ("log_sum_exp", lambda x, d: torch.logsumexp(x, d), None),
    ("argmax", lambda x, d: torch.argmax(x, d[0] if d else None), None),
    ("any", lambda x, d: torch.any(x, d), torch.bool),
]
# (layout, shape, dims): 64 MB of bfloat16; a bool x doubles the first dim to stay at 64 MB.
REDUCE_LAYOUTS = [
    ("rows", (8192, 4096), [1]),
    ("columns", (8192, 4096), [0]),
    ("middle", (64, 1024, 512), [1]),
    ("all", (8192, 4096), None),
]


def reduce_rows_for(quick: bool, stems: set[str] | None = None) -> list[dict]:
    rows = []
    for stem, ref, fixed_dtype in REDUCE_OPS[:2] if quick else REDUCE_OPS:
        if stems and stem not in stems:
            continue
        op = getattr(torch.ops.tileops, f"reduction_{stem}_fwd")
        for layout, shape, dims in REDUCE_LAYOUTS:
            if stem == "argmax" and dims is not None and len(dims) != 1:
                continue
            if stem == "log_sum_exp" and dims is None:
                dims_ = list(range(len(shape)))
            else:
                dims_ = dims
            arg = (dims_[0] if dims_ else None) if stem == "argmax" else dims_
            dtype = fixed_dtype or torch.bfloat16
            if dtype.itemsize == 1:
                shape = (2 * shape[0],) + tuple(shape[1:])
            numel = 1
            for d in shape:
                numel *= d
            bytes_per_call = numel * dtype.itemsize  # one read of x
            n_sets = harness.n_sets_for(bytes_per_call)
            xs = [harness.random_tensor(shape, dtype) for _ in range(n_sets)]
            halves = [x.flatten()[: numel // 2] for x in xs]
            sinks = [torch.empty_like(h) for h in halves]
            compiled = harness.compiled(lambda x: ref(x, dims_))
            rows.append(harness.measure(f"{stem}-{layout}", "x".join(map(str, shape)), dtype, bytes_per_call, n_sets, {
                "ours": lambda i: (lambda: op(xs[i], arg)),
                "eager": lambda i: (lambda: ref(xs[i], dims_)),
                "compile": lambda i: (lambda: compiled(xs[i])),
                "copy": lambda i: (lambda: sinks[i].copy_(halves[i])),
            }))
            del xs, halves, sinks
    return rows


SCANS = {  # class -> (operator stem, ref_api)
    "CumsumFwdOp": ("cumsum", torch.cumsum),
    "CumprodFwdOp": ("cumprod", torch.cumprod),
    "LogCumSumExpFwdOp": ("log_cum_sum_exp", torch.logcumsumexp),
}


def _scan_input(stem, shape, dtype):
    x = harness.random_tensor(shape, dtype)
    # a product of randn overflows within a few hundred elements; values near 1 keep it finite
    return 1 + x / 64 if stem == "cumprod" else x


def scan_rows_for(quick: bool) -> list[dict]:
    rows = []
    for op_class, (stem, ref) in SCANS.items():
        op = getattr(torch.ops.tileops, f"reduction_{stem}_fwd")
        workloads = harness.manifest_workloads("reduction", op_class)
        for wl in workloads[:1] if quick else workloads:
            shape, dim = tuple(wl["x"]), wl["params"]["dim"]
            for d in wl["dtypes"]:
                dtype = harness.DTYPES[d]
                numel = 1
                for s in shape:
                    numel *= s
                bytes_per_call = 2 * numel * dtype.itemsize  # x read, y written
                n_sets = harness.n_sets_for(bytes_per_call)
                xs = [_scan_input(stem, shape, dtype) for _ in range(n_sets)]
                ys = [torch.empty_like(x) for x in xs]
                compiled = harness.compiled(lambda x: ref(x, dim))
                rows.append(harness.measure(f"{stem}-{wl['name']}", "x".join(map(str, shape)), dtype, bytes_per_call,
                                            n_sets, {
                    "ours": lambda i: (lambda: op(xs[i], dim)),
                    "eager": lambda i: (lambda: ref(xs[i], dim)),
                    "compile": lambda i: (lambda: compiled(xs[i])),
                    "copy": lambda i: (lambda: ys[i].copy_(xs[i])),
                }))
                rows[-1]["op"] = op_class
                del xs, ys
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="only the first workload of each op")
    ap.add_argument("--only", default="softmax,dim,scans",
                    help="comma-separated parts to run: softmax (softmax, log_softmax), dim (the dim "
                         "reductions), scans")
    ap.add_argument("--stems", help="comma-separated dim reductions to run (default: all of REDUCE_OPS)")
    args = ap.parse_args()
    parts = set(args.only.split(","))
    stems = set(args.stems.split(",")) if args.stems else None
    if stems and stems - {s for s, _, _ in REDUCE_OPS}:
        ap.error(f"--stems: unknown {', '.join(sorted(stems - {s for s, _, _ in REDUCE_OPS}))}")
    unknown = parts - {"softmax", "dim", "scans"}
    if unknown:
        ap.error(f"--only: unknown part(s) {', '.join(sorted(unknown))}; parts: softmax, dim, scans")
    tileops.load()
    report = {"device": torch.cuda.get_device_properties(0).name, "torch": torch.__version__, "kernels": {}}
    if "softmax" in parts:
        for op_class in OPS:
            rows = rows_for(op_class, args.quick)
            report["kernels"][op_class] = rows
            harness.print_table(op_class, rows)
    if "dim" in parts:
        rows = reduce_rows_for(args.quick, stems)
        for r in rows:  # each row names its op class, so PERF.md files it under its manifest family
            r["op"] = "".join(w.capitalize() for w in r["workload"].rsplit("-", 1)[0].split("_")) + "FwdOp"
        report["kernels"]["dim reductions"] = rows
        harness.print_table("dim reductions (copy: the input's bytes moved once)", rows)
    if "scans" in parts:
        rows = scan_rows_for(args.quick)
        report["kernels"]["scans"] = rows
        harness.print_table("scans (copy: x read and y written once)", rows)
    harness.write_json(args.json, report)


if __name__ == "__main__":
    main()
