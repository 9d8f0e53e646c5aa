"""Reduction benchmarks on a GPU: softmax / log_softmax kernels beside torch eager (ref_api),
torch.compile of it and a device copy of the same bytes, in one run.
A benchmark, not a test.    python3 scripts/bench/bench_reduction.py [--json out.json] [--quick]
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="only the first workload of each op")
    args = ap.parse_args()
    tileops.load()
    report = {"device": torch.cuda.get_device_properties(0).name, "torch": torch.__version__, "kernels": {}}
    for op_class in OPS:
        rows = rows_for(op_class, args.quick)
        report["kernels"][op_class] = rows
        harness.print_table(op_class, rows)
    harness.write_json(args.json, report)


if __name__ == "__main__":
    main()
