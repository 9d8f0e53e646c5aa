"""Pool benchmarks on a GPU: every pool op on its TileOPs workload shapes (manifests/pool.yaml) beside
torch eager (ref_api), torch.compile of it and a device copy of the same bytes (the input read once
and the output (and the indices) written once: half of them copied each way), so copy/ours near 1
means the kernel moves its bytes at copy speed. A benchmark, not a test.
    python3 scripts/bench/bench_pool.py [--json out.json] [--quick] [--ops Class,Class]
"""
from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F

import harness  # scripts/bench/harness.py
import tileops

OPS = {  # class -> (our operator stem, ref_api, how the ref takes the params)
    "AvgPool1dFwdOp": ("avg_pool1d", F.avg_pool1d),
    "AvgPool2dFwdOp": ("avg_pool2d", F.avg_pool2d),
    "AvgPool3dFwdOp": ("avg_pool3d", F.avg_pool3d),
    "MaxPool1dFwdOp": ("max_pool1d", F.max_pool1d),
    "MaxPool2dFwdOp": ("max_pool2d", F.max_pool2d),
    "MaxPool3dFwdOp": ("max_pool3d", F.max_pool3d),
    "AdaptiveAvgPool2dFwdOp": ("adaptive_avg_pool2d", F.adaptive_avg_pool2d),
    "AdaptiveMaxPool2dFwdOp": ("adaptive_max_pool2d", F.adaptive_max_pool2d),
    "MaxPool1dIndicesFwdOp": ("max_pool1d", F.max_pool1d),
    "MaxPool2dIndicesFwdOp": ("max_pool2d", F.max_pool2d),
    "MaxPool3dIndicesFwdOp": ("max_pool3d", F.max_pool3d),
    "AdaptiveMaxPool2dIndicesFwdOp": ("adaptive_max_pool2d", F.adaptive_max_pool2d),
}


def rows_for(op_class: str, quick: bool) -> list[dict]:
    stem, ref = OPS[op_class]
    cls = getattr(__import__("tileops.pool", fromlist=[op_class]), op_class)
    rows = []
    workloads = harness.manifest_workloads("pool", op_class)
    for wl in workloads[:1] if quick else workloads:
        params = wl["params"]
        ours_op = cls(**params)
        kw = {"return_indices": True} if "Indices" in op_class else {}
        ref_fn = (lambda x: ref(x, params["output_size"], **kw)) if "adaptive" in stem else (lambda x: ref(x, **params, **kw))
        for d in wl["dtypes"]:
            dtype = harness.DTYPES[d]
            shape = tuple(wl["input"])
            out = ref_fn(torch.empty(shape, device="meta", dtype=dtype))
            out_numel = (out[0] if kw else out).numel()
            # the indices output: 8 bytes an output more
            bytes_per_call = (math.prod(shape) + out_numel) * dtype.itemsize + (8 * out_numel if kw else 0)
            n_sets = harness.n_sets_for(bytes_per_call)
            xs = [torch.randn(*shape, device="cuda", dtype=dtype) for _ in range(n_sets)]
            half = bytes_per_call // 2 // dtype.itemsize
            srcs = [torch.empty(half, device="cuda", dtype=dtype) for _ in range(n_sets)]
            sinks = [torch.empty(half, device="cuda", dtype=dtype) for _ in range(n_sets)]
            compiled = harness.compiled(ref_fn)
            rows.append(harness.measure(wl["name"], "x".join(map(str, shape)), dtype, bytes_per_call, n_sets, {
                "ours": lambda i: (lambda: ours_op(xs[i])),
                "eager": lambda i: (lambda: ref_fn(xs[i])),
                "compile": lambda i: (lambda: compiled(xs[i])),
                "copy": lambda i: (lambda: sinks[i].copy_(srcs[i])),
            }))
            rows[-1]["op"] = op_class
            del xs, srcs, sinks
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="only the first workload of each op")
    ap.add_argument("--ops", help="comma-separated op classes (default: all)")
    args = ap.parse_args()
    tileops.load()
    report = {"device": torch.cuda.get_device_properties(0).name, "torch": torch.__version__, "kernels": {}}
    for op_class in args.ops.split(",") if args.ops else OPS:
        rows = rows_for(op_class, args.quick)
        report["kernels"][op_class] = rows
        harness.print_table(f"{op_class} (copy: the input read and the output written once)", rows)
    harness.write_json(args.json, report)


if __name__ == "__main__":
    main()
