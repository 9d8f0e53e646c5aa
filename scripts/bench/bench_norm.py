"""Norm benchmarks on a GPU: our kernel beside torch eager, torch.compile and a device copy of the same
bytes, in one run; plus host cost per eager call beside torch.add. A benchmark, not a test.

    python3 scripts/bench/bench_norm.py [--json out.json] [--quick]

Kernel times: a CUDA graph of K calls rotating over input sets that together exceed 4x the L2
(cold-ish L2), replayed R times, median per call. Copy: dst.copy_(src) of x's bytes (reads and
writes the same bytes an RMSNorm does, weight aside).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import tileops  # noqa: E402

DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
L2_BYTES = 60 * 2 ** 20


def graph_time_us(make_call, n_sets: int, k: int = 20, reps: int = 15) -> float:
    """Median µs per call of make_call(i) captured K times in one CUDA graph."""
    calls = [make_call(i % n_sets) for i in range(k)]
    for c in calls[:n_sets]:
        c()  # warm-up: builds kernels outside capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls:
            c()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1000 / k)
    return statistics.median(times)


def bench_workload(name, shape, dtype, results):
    m, n = shape
    bytes_per_call = 2 * m * n * dtype.itemsize + n * dtype.itemsize
    n_sets = max(2, min(64, -(-4 * L2_BYTES // max(1, bytes_per_call))))
    xs = [torch.randn(m, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
    ys = [torch.empty_like(x) for x in xs]
    w = torch.randn(n, device="cuda", dtype=dtype)
    ours = lambda i: (lambda: torch.ops.tileops.norm_rms_norm_fwd(xs[i], w, [n]))  # noqa: E731
    eager = lambda i: (lambda: torch.nn.functional.rms_norm(xs[i], [n], w))  # noqa: E731
    compiled_fn = torch.compile(lambda x, w: torch.nn.functional.rms_norm(x, [n], w))
    comp = lambda i: (lambda: compiled_fn(xs[i], w))  # noqa: E731
    copy = lambda i: (lambda: ys[i].copy_(xs[i]))  # noqa: E731
    row = {"workload": name, "shape": [m, n], "dtype": str(dtype).replace("torch.", "")}
    for label, fn in (("ours", ours), ("eager", eager), ("compile", comp), ("copy", copy)):
        row[label + "_us"] = graph_time_us(fn, n_sets)
    row["tbps"] = bytes_per_call / (row["ours_us"] * 1e-6) / 1e12
    row["frac_of_copy"] = row["copy_us"] / row["ours_us"]
    row["vs_best_peer"] = min(row["eager_us"], row["compile_us"]) / row["ours_us"]
    results.append(row)
    del xs, ys


def host_us_per_call(fn, iters=3000, rounds=7) -> float:
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    best = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        best.append((time.perf_counter() - t0) * 1e6 / iters)
    return statistics.median(best)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="only 2048x4096 fp16")
    args = ap.parse_args()
    tileops.load()
    dev = torch.cuda.get_device_properties(0)
    with open(os.path.join(ROOT, "manifests", "norm.yaml")) as f:
        entry = yaml.safe_load(f)["RMSNormFwdOp"]
    workloads = [("llama-8b-prefill", (2048, 4096), torch.float16)]
    if not args.quick:
        for wl in entry["workloads"]:
            for d in wl["dtypes"]:
                if (wl["name"], tuple(wl["x"]), DT[d]) not in workloads:
                    workloads.append((wl["name"], tuple(wl["x"]), DT[d]))
    results = []
    for name, shape, dtype in workloads:
        bench_workload(name, shape, dtype, results)

    # Host cost per eager call on a tiny tensor (the GPU work is negligible; the host path is measured).
    a = torch.randn(1, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(1, 64, device="cuda", dtype=torch.float16)
    w = torch.randn(64, device="cuda", dtype=torch.float16)
    from tileops.norm import RMSNormFwdOp
    op = RMSNormFwdOp(64)
    raw = torch.ops.tileops.norm_rms_norm_fwd.default
    host = {
        "torch.add": host_us_per_call(lambda: torch.add(a, b)),
        "tileops op (torch.ops...default)": host_us_per_call(lambda: raw(a, w, [64])),
        "tileops Op class": host_us_per_call(lambda: op(a, w)),
        "F.rms_norm eager": host_us_per_call(lambda: torch.nn.functional.rms_norm(a, [64], w)),
    }
    report = {"device": dev.name, "torch": torch.__version__, "kernels": results, "host_us": host}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)

    print(f"\n{dev.name}, torch {torch.__version__}; median µs per call, cold-ish L2 (CUDA graph replay)")
    hdr = f"{'workload':<20}{'shape':<14}{'dtype':<9}{'ours':>8}{'eager':>8}{'compile':>9}{'copy':>8}{'TB/s':>7}{'copy/ours':>10}{'vs best':>8}"
    print(hdr)
    for r in results:
        print(f"{r['workload']:<20}{'x'.join(map(str, r['shape'])):<14}{r['dtype']:<9}{r['ours_us']:>8.1f}"
              f"{r['eager_us']:>8.1f}{r['compile_us']:>9.1f}{r['copy_us']:>8.1f}{r['tbps']:>7.2f}"
              f"{r['frac_of_copy']:>10.2f}{r['vs_best_peer']:>7.2f}x")
    print("\nhost µs per eager call (1x64 fp16, median of 7x3000 calls):")
    for k, v in host.items():
        print(f"  {k:<36}{v:>7.2f} µs  ({v / host['torch.add']:.2f}x torch.add)")


if __name__ == "__main__":
    main()
