"""Shared benchmark harness: CUDA-graph timing with cold-ish L2, manifest workloads, tables.

A bench script (scripts/bench/bench_<family>.py) builds, per workload, a dict of named callables
factories {label: make(i) -> callable} over `n_sets` rotating input sets, and calls `measure`.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import torch
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
          "uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
          "int64": torch.int64, "bool": torch.bool, "float8_e4m3fn": torch.float8_e4m3fn}


def random_tensor(shape, dtype, device="cuda"):
    """randn for floating dtypes; small integers (both signs where the dtype has them) or random bools."""
    if dtype.is_floating_point:
        return torch.randn(shape, device=device, dtype=dtype)
    if dtype == torch.bool:
        return torch.rand(shape, device=device) < 0.5
    low = 0 if dtype == torch.uint8 else -16
    return torch.randint(low, 16, shape, device=device, dtype=dtype)
L2_BYTES = 60 * 2 ** 20  # H200


def n_sets_for(bytes_per_call: int) -> int:
    """Input sets to rotate so that one graph's sets exceed 4x the L2 (2..64)."""
    return max(2, min(64, -(-4 * L2_BYTES // max(1, bytes_per_call))))


def graph_time_us(make_call, n_sets: int, k: int = 20, reps: int = 15) -> float:
    """Median µs per call of make_call(i) captured K times (rotating sets) in one CUDA graph."""
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


def stream_time_us(make_call, n_sets: int, k: int = 20, reps: int = 15) -> float:
    """Median µs per call of make_call(i) run K times (rotating sets) on the stream, between two
    events: for calls that read values on the host and so cannot be captured (host time included)."""
    calls = [make_call(i % n_sets) for i in range(k)]
    for c in calls[:n_sets]:
        c()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for c in calls:
            c()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1000 / k)
    return statistics.median(times)


PEERS = ("eager", "compile", "flashinfer", "liger")


def compiled(fn, **kwargs):
    """torch.compile(fn) with dynamo's caches cleared first. The benchmarks compile one lambda per row
    from the same code object; past dynamo's recompile limit (8) every later row would silently run
    eager code in the 'compile' column."""
    torch._dynamo.reset()
    return torch.compile(fn, **kwargs)


def measure(workload: str, shape_desc: str, dtype: torch.dtype, bytes_per_call: int, n_sets: int,
            factories: dict, timer=graph_time_us) -> dict:
    """Times each factory ('ours', 'eager', 'compile', 'copy' expected; 'flashinfer' and 'liger'
    where that library has the op, see peers.py) with `timer` (stream_time_us for a row whose op
    reads on the host) and derives the ratios."""
    row = {"workload": workload, "shape": shape_desc, "dtype": str(dtype).replace("torch.", "")}
    for label, make in factories.items():
        try:
            row[label + "_us"] = timer(make, n_sets)
        except Exception as e:
            # A peer library that refuses this shape, or a torch call that cannot be captured into a
            # CUDA graph (it synchronises), gets no cell, not a failed run.
            if label not in ("flashinfer", "liger", "eager", "compile"):
                raise
            print(f"{label} fails {workload} {shape_desc}: {type(e).__name__}: {str(e).splitlines()[0]}")
            torch.cuda.synchronize()
    row["tbps"] = bytes_per_call / (row["ours_us"] * 1e-6) / 1e12
    row["frac_of_copy"] = row["copy_us"] / row["ours_us"]
    # Every other implementation timed in the row: torch eager, torch.compile and the peer libraries.
    others = [row[k + "_us"] for k in PEERS if k + "_us" in row]
    row["vs_best_peer"] = min(others) / row["ours_us"] if others else float("nan")
    return row


def manifest_workloads(family: str, op_class: str) -> list[dict]:
    with open(os.path.join(ROOT, "manifests", f"{family}.yaml")) as f:
        return yaml.safe_load(f)[op_class].get("workloads", [])


def print_table(title: str, rows: list[dict]) -> None:
    dev = torch.cuda.get_device_properties(0).name
    libs = [k for k in ("flashinfer", "liger") if any(k + "_us" in r for r in rows)]
    print(f"\n{title} — {dev}, torch {torch.__version__}; median µs per call, cold-ish L2 (CUDA graph replay)")
    cell = lambda r, k: f"{r[k]:>8.1f}" if k in r else f"{'-':>8}"  # noqa: E731
    print(f"{'workload':<22}{'shape':<18}{'dtype':<9}{'ours':>8}{'eager':>8}{'compile':>9}"
          + "".join(f"{k:>11}" for k in libs) + f"{'copy':>8}{'TB/s':>7}{'copy/ours':>10}{'vs best':>8}")
    for r in rows:
        peers = "".join(f"{r[k + '_us']:>11.1f}" if k + "_us" in r else f"{'-':>11}" for k in libs)
        print(f"{r['workload']:<22}{r['shape']:<18}{r['dtype']:<9}{r['ours_us']:>8.1f}{cell(r, 'eager_us')}"
              f" {cell(r, 'compile_us')}{peers}{r['copy_us']:>8.1f}{r['tbps']:>7.2f}{r['frac_of_copy']:>10.2f}"
              f"{r['vs_best_peer']:>7.2f}x")


def host_us_per_call(fns: dict, iters: int = 3000, rounds: int = 7) -> dict:
    """Median host µs per call of each callable. Rounds interleave the callables, so a drift of the
    machine's speed during the run moves them all alike and their ratios stay comparable."""
    for fn in fns.values():
        for _ in range(200):
            fn()
    torch.cuda.synchronize()
    samples = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            torch.cuda.synchronize()
            samples[name].append((time.perf_counter() - t0) * 1e6 / iters)
    return {name: statistics.median(v) for name, v in samples.items()}


def provenance() -> dict:
    """When, from which commit and by which command a report was measured (perf_table.py cites them)."""
    try:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    script = os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)
    return {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": commit,
            "command": " ".join(["python3", script] + sys.argv[1:])}


def write_json(path: str | None, report: dict) -> None:
    if path:
        kernels = report.get("kernels", [])
        rows = [r for rs in kernels.values() for r in rs] if isinstance(kernels, dict) else kernels
        extra = {}
        if any("flashinfer_us" in r or "liger_us" in r for r in rows):
            import peers  # which versions of the peer libraries the run timed
            extra["peers"] = peers.versions()
        with open(path, "w") as f:
            json.dump({**provenance(), **extra, **report}, f, indent=1)
