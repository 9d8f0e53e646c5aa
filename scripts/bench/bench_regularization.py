"""Regularization benchmarks on a GPU: DropoutFwdOp on its manifest workloads beside torch eager
(F.dropout), torch.compile of it and a device copy of the same bytes (x read once, y written once).
torch draws its mask from its own generator, ours from the seed; torch's eager dropout also writes
its bool mask (more bytes than ours).
A benchmark, not a test.
    python3 scripts/bench/bench_regularization.py [--json out.json] [--quick]
"""
from __future__ import annotations

import argparse
import math

import torch

import harness  # scripts/bench/harness.py
import tileops


def dropout_rows(quick: bool) -> list[dict]:
    op = torch.ops.tileops.regularization_dropout_fwd
    F = torch.nn.functional
    rows = []
    workloads = harness.manifest_workloads("regularization", "DropoutFwdOp")
    for wl in workloads[:1] if quick else workloads:
        shape = tuple(wl["input"])
        for d in wl["dtypes"]:
            dtype = harness.DTYPES[d]
            nbytes = math.prod(shape) * dtype.itemsize
            n_sets = harness.n_sets_for(2 * nbytes)
            xs = [torch.randn(*shape, device="cuda", dtype=dtype) for _ in range(n_sets)]
            sinks = [torch.empty_like(x) for x in xs]
            compiled = harness.compiled(lambda x: F.dropout(x, 0.5, True))
            rows.append(harness.measure(wl["name"], "x".join(map(str, shape)), dtype, 2 * nbytes, n_sets, {
                "ours": lambda i: (lambda: op(xs[i], p=0.5, seed=i)),
                "eager": lambda i: (lambda: F.dropout(xs[i], 0.5, True)),
                "compile": lambda i: (lambda: compiled(xs[i])),
                "copy": lambda i: (lambda: sinks[i].copy_(xs[i])),
            }))
            rows[-1]["op"] = "DropoutFwdOp"
            del xs, sinks
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="only the first workload")
    args = ap.parse_args()
    tileops.load()
    rows = dropout_rows(args.quick)
    harness.write_json(args.json, {"device": torch.cuda.get_device_properties(0).name, "torch": torch.__version__,
                                   "kernels": rows})
    harness.print_table("DropoutFwdOp p=0.5 (copy: x read, y written once)", rows)


if __name__ == "__main__":
    main()
