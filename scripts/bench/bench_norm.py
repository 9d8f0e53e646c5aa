"""Norm benchmarks on a GPU: our kernels beside torch eager (ref_api), torch.compile of it and a
device copy of the same bytes, in one run; plus host cost per eager call beside torch.add.
A benchmark, not a test.    python3 scripts/bench/bench_norm.py [--json out.json] [--quick]
"""
from __future__ import annotations

import argparse

import torch

import harness  # scripts/bench/harness.py
import tileops


def rms_norm_rows(quick: bool) -> list[dict]:
    workloads = [("llama-8b-prefill", (2048, 4096), torch.float16)]
    if not quick:
        for wl in harness.manifest_workloads("norm", "RMSNormFwdOp"):
            for d in wl["dtypes"]:
                item = (wl["name"], tuple(wl["x"]), harness.DTYPES[d])
                if item not in workloads:
                    workloads.append(item)
    rows = []
    for name, (m, n), dtype in workloads:
        bytes_per_call = (2 * m * n + n) * dtype.itemsize
        n_sets = harness.n_sets_for(bytes_per_call)
        xs = [torch.randn(m, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
        ys = [torch.empty_like(x) for x in xs]
        w = torch.randn(n, device="cuda", dtype=dtype)
        compiled = torch.compile(lambda x, w: torch.nn.functional.rms_norm(x, [n], w))
        rows.append(harness.measure(name, f"{m}x{n}", dtype, bytes_per_call, n_sets, {
            "ours": lambda i: (lambda: torch.ops.tileops.norm_rms_norm_fwd(xs[i], w, [n])),
            "eager": lambda i: (lambda: torch.nn.functional.rms_norm(xs[i], [n], w)),
            "compile": lambda i: (lambda: compiled(xs[i], w)),
            "copy": lambda i: (lambda: ys[i].copy_(xs[i])),
        }))
        del xs, ys
    return rows


def host_costs() -> dict:
    a = torch.randn(1, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(1, 64, device="cuda", dtype=torch.float16)
    w = torch.randn(64, device="cuda", dtype=torch.float16)
    from tileops.norm import RMSNormFwdOp
    op = RMSNormFwdOp(64)
    raw = torch.ops.tileops.norm_rms_norm_fwd.default
    return {
        "torch.add": harness.host_us_per_call(lambda: torch.add(a, b)),
        "tileops op (torch.ops...default)": harness.host_us_per_call(lambda: raw(a, w, [64])),
        "tileops Op class": harness.host_us_per_call(lambda: op(a, w)),
        "F.rms_norm eager": harness.host_us_per_call(lambda: torch.nn.functional.rms_norm(a, [64], w)),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="only 2048x4096 fp16")
    args = ap.parse_args()
    tileops.load()
    rows = rms_norm_rows(args.quick)
    host = host_costs()
    harness.write_json(args.json, {"device": torch.cuda.get_device_properties(0).name, "torch": torch.__version__,
                                   "kernels": rows, "host_us": host})
    harness.print_table("RMSNormFwdOp", rows)
    print("\nhost µs per eager call (1x64 fp16, median of 7x3000 calls):")
    for k, v in host.items():
        print(f"  {k:<36}{v:>7.2f} µs  ({v / host['torch.add']:.2f}x torch.add)")


if __name__ == "__main__":
    main()
