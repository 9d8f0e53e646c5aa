"""Quantization benchmarks on a GPU: FP8QuantFwdOp on its TileOPs workload shapes
(manifests/quantization.yaml) beside torch eager of its formula, torch.compile of it and a device copy
of the same bytes (x read once, q and the scales written once: half of them copied each way), so
copy/ours near 1 means the kernel moves its bytes at copy speed. A benchmark, not a test.
    python3 scripts/bench/bench_quantization.py [--json out.json] [--quick]
"""
from __future__ import annotations

import argparse
import math

import torch

import harness  # scripts/bench/harness.py
import tileops


def fp8_quant(x):
    """FP8QuantFwdOp's formula in torch (float32): scale = max(absmax, 1e-4) * (1 / 448), q = x / scale."""
    xf = x.float()
    scale = xf.abs().amax(-1, keepdim=True).clamp_min(1e-4) * (1 / 448)
    return scale.squeeze(-1), (xf / scale).clamp(-448, 448).to(torch.float8_e4m3fn)


def fp8_quant_rows(quick: bool) -> list[dict]:
    op = torch.ops.tileops.quantization_fp8_quant_fwd
    rows = []
    workloads = harness.manifest_workloads("quantization", "FP8QuantFwdOp")
    for wl in workloads[:1] if quick else workloads:
        shape = tuple(wl["input_tensor"])
        for d in wl["dtypes"]:
            dtype = harness.DTYPES[d]
            numel = math.prod(shape)
            bytes_per_call = numel * dtype.itemsize + numel + 4 * numel // shape[-1]
            n_sets = harness.n_sets_for(bytes_per_call)
            xs = [torch.randn(*shape, device="cuda", dtype=dtype) for _ in range(n_sets)]
            half = bytes_per_call // 2
            srcs = [torch.empty(half, device="cuda", dtype=torch.uint8) for _ in range(n_sets)]
            sinks = [torch.empty(half, device="cuda", dtype=torch.uint8) for _ in range(n_sets)]
            compiled = harness.compiled(fp8_quant)
            rows.append(harness.measure(wl["name"], "x".join(map(str, shape)), dtype, bytes_per_call, n_sets, {
                "ours": lambda i: (lambda: op(xs[i])),
                "eager": lambda i: (lambda: fp8_quant(xs[i])),
                "compile": lambda i: (lambda: compiled(xs[i])),
                "copy": lambda i: (lambda: sinks[i].copy_(srcs[i])),
            }))
            rows[-1]["op"] = "FP8QuantFwdOp"
            del xs, srcs, sinks
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="only the first workload")
    args = ap.parse_args()
    tileops.load()
    rows = fp8_quant_rows(args.quick)
    harness.write_json(args.json, {"device": torch.cuda.get_device_properties(0).name, "torch": torch.__version__,
                                   "kernels": rows})
    harness.print_table("FP8QuantFwdOp (copy: x read, q and the scales written once)", rows)


if __name__ == "__main__":
    main()
