"""GPU reliability checks (run by scripts/reliability_gpu.sh on a CUDA machine; figures in
docs/RELIABILITY.md).

    python scripts/reliability/gpu_reliability.py shapes [--quick]   # every kernel family on odd shapes,
                                                                     # checked against the reference target
    python scripts/reliability/gpu_reliability.py contract           # every op with a boundary (the
                                                                     # compile-contract registry), likewise
    python scripts/reliability/gpu_reliability.py oom                # OOM while allocating an output
    python scripts/reliability/gpu_reliability.py race --procs 8 --threads 4   # cold disk cache

`shapes` and `contract` are what compute-sanitizer runs under (memcheck, racecheck, synccheck). Each prints one JSON
line of figures last and exits non-zero on a failure.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

sys.path.insert(0, os.path.join(ROOT, "tests"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tileops  # noqa: E402

tileops.load()
ops = torch.ops.tileops

COLS = (1, 7, 1000, 4100, 33000, 131072)
ROWS = (1, 3, 130)


# Ops that round bfloat16 inputs to float8 inside: one input rounding the other way on CUDA than on
# the CPU moves an output by up to an e4m3 unit of its term, so they are held to float8's tolerance.
QUANTISE_INSIDE = {"FP8LightningIndexerFwdOp"}


def close(got, want, dtype):
    # float8: one unit in the last place of e4m3 is 1/8 relative
    tol = {torch.float64: 1e-6, torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 6e-2}.get(dtype, 0.13)
    torch.testing.assert_close(got.float().cpu(), want.float().cpu(), rtol=tol, atol=tol, equal_nan=True)


def family_calls(rows, cols, dtype):
    """(name, fn(device, target) -> tuple of results) for every kernel family at one shape."""
    g = torch.Generator().manual_seed(rows * 100003 + cols)
    x = torch.randn(rows, cols, generator=g).to(dtype)
    r = torch.randn(rows, cols, generator=g).to(dtype)
    dy = torch.randn(rows, cols, generator=g).to(dtype)
    w = torch.randn(cols, generator=g).to(dtype)
    b = torch.randn(cols, generator=g).to(dtype)
    x2 = torch.randn(rows, 2 * cols, generator=g).to(dtype)
    ns = [cols]

    def on(dev, *ts):
        return [t.to(dev) for t in ts]

    calls = [
        ("rms_norm_fwd", lambda d, t: (ops.norm_rms_norm_fwd(*on(d, x, w), ns, target=t),)),
        ("rms_norm_fwd_noweight", lambda d, t: (ops.norm_rms_norm_fwd(*on(d, x), None, ns, target=t),)),
        ("fused_add_rms_norm_fwd", lambda d, t: ops.norm_fused_add_rms_norm_fwd(*on(d, x, r, w), ns, target=t)),
        ("layer_norm_fwd", lambda d, t: (ops.norm_layer_norm_fwd(*on(d, x, w, b), ns, target=t),)),
        ("rms_norm_bwd", lambda d, t: ops.norm_rms_norm_bwd(*on(d, dy, x, w), ns, target=t)),
        ("layer_norm_bwd", lambda d, t: ops.norm_layer_norm_bwd(*on(d, dy, x, w), ns, target=t)),
        ("softmax", lambda d, t: (ops.reduction_softmax_fwd(*on(d, x), -1, target=t),)),
        ("log_softmax", lambda d, t: (ops.reduction_log_softmax_fwd(*on(d, x), -1, target=t),)),
        ("softmax_dim0", lambda d, t: (ops.reduction_softmax_fwd(*on(d, x), 0, target=t),)),
        ("silu", lambda d, t: (ops.activation_silu_fwd(*on(d, x), target=t),)),
        ("gelu_tanh", lambda d, t: (ops.activation_gelu_fwd(*on(d, x), "tanh", target=t),)),
        ("relu", lambda d, t: (ops.activation_relu_fwd(*on(d, x), target=t),)),
        ("sigmoid", lambda d, t: (ops.activation_sigmoid_fwd(*on(d, x), target=t),)),
        ("silu_and_mul", lambda d, t: (ops.activation_silu_and_mul_fwd(*on(d, x2), target=t),)),
        ("gelu_and_mul", lambda d, t: (ops.activation_gelu_and_mul_fwd(*on(d, x2), target=t),)),
    ]
    if cols <= 4100:  # RoPE: rows tokens, heads of cols-derived width
        head = max(2, cols + (cols % 2))
        rot = 2 if head < 64 else 64
        pos = torch.randint(0, 50, (rows,), generator=g)
        q = torch.randn(rows, 3, head, generator=g).to(dtype)
        k = torch.randn(rows, 1, head, generator=g).to(dtype)
        cache = torch.randn(50, rot, generator=g)

        def rope(neox):
            def fn(d, t):
                qq, kk = on(d, q, k)
                op = ops.position_rope_neox_cached_fwd_writes_k_writes_q if neox else ops.position_rope_non_neox_cached_fwd_writes_k_writes_q
                op(*on(d, pos), qq, kk, *on(d, cache), target=t)
                return qq, kk
            return fn
        calls += [("rope_neox", rope(True)), ("rope_non_neox", rope(False))]
    calls += [("alibi", lambda d, t: (ops.position_alibi_fwd(max(1, cols % 257), d),)),
              ("sinusoidal", lambda d, t: (ops.position_sinusoidal_fwd(rows, 2 * max(1, cols % 513), d),))]
    return calls


def warm_up(dtypes):
    """Builds every kernel the run needs, many at a time (builds of different ops run in parallel),
    so that the checked runs (and the sanitizer runs after them) find them in the disk cache."""
    from concurrent.futures import ThreadPoolExecutor
    jobs = [fn for dt in dtypes for rows in ROWS for cols in COLS for _, fn in family_calls(rows, cols, dt)]

    def run(fn):
        try:
            fn("cuda", None)
        except Exception:  # noqa: BLE001 - the checked run reports it
            pass
    with ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 4)) as pool:
        list(pool.map(run, jobs))
    torch.cuda.synchronize()


def cmd_shapes(a):
    dtypes = [torch.bfloat16] if a.quick else [torch.bfloat16, torch.float32]
    t0 = time.monotonic()
    if a.warm_up:
        warm_up(dtypes)
    figures = {"calls": 0, "wrong": 0, "errors": 0}
    for dtype in dtypes:
        for rows in ROWS:
            for cols in COLS:
                for name, fn in family_calls(rows, cols, dtype):
                    figures["calls"] += 1
                    try:
                        got = fn("cuda", None)
                        torch.cuda.synchronize()
                        want = fn("cpu", "reference")
                        for gt, wt in zip(got, want):
                            close(gt, wt, dtype if gt.dtype == dtype else gt.dtype)
                    except AssertionError as e:
                        figures["wrong"] += 1
                        print(f"WRONG {name} rows={rows} cols={cols} {dtype}: {str(e).splitlines()[:3]}", flush=True)
                    except Exception as e:  # noqa: BLE001
                        figures["errors"] += 1
                        print(f"ERROR {name} rows={rows} cols={cols} {dtype}: {type(e).__name__}: {e}", flush=True)
    figures["seconds"] = round(time.monotonic() - t0, 1)
    figures["kernel_builds"] = tileops.counters()["kernel_builds"]
    print(json.dumps(figures), flush=True)
    return 1 if figures["wrong"] or figures["errors"] else 0


def _as_tuple(r):
    return tuple(r) if isinstance(r, (tuple, list)) else (r,)


def cmd_contract(a):
    """Every op of the compile-contract registry (tests/contracts: one call of each op class with a
    boundary, all families) on CUDA, its outputs and its inputs afterwards (the in-place branches)
    checked against the same call on CPU copies through the reference target (on CUDA copies where
    ATen has no CPU kernel for the dtype)."""
    from compile_contract import CONTRACT
    t0 = time.monotonic()
    figures = {"ops": 0, "wrong": 0, "errors": 0}
    for name in sorted(CONTRACT):
        if a.only and a.only not in name:
            continue
        figures["ops"] += 1
        torch.manual_seed(len(name))
        op, inputs = CONTRACT[name](a.device)
        try:
            cpu_in = [t.detach().cpu().clone() if isinstance(t, torch.Tensor) else t for t in inputs]
            got = _as_tuple(op(*inputs))
            if a.device == "cuda":
                torch.cuda.synchronize()
            op.target = "reference"
            try:
                want = _as_tuple(op(*cpu_in))
            except RuntimeError as e:  # ATen lacks some CPU kernels (avg_pool3d in float16): ATen on CUDA
                if "not implemented for" not in str(e) or a.device != "cuda":
                    raise
                want = _as_tuple(op(*[t.to(a.device) if isinstance(t, torch.Tensor) else t for t in cpu_in]))
            pairs = list(zip(got, want)) + [(g, w) for g, w in zip(inputs, cpu_in) if isinstance(g, torch.Tensor)]
            for g, w in pairs:
                if isinstance(g, torch.Tensor) and g.is_complex():  # cuFFT and pocketfft round differently
                    close(torch.view_as_real(g), torch.view_as_real(w), g.real.dtype)
                elif isinstance(g, torch.Tensor) and g.is_floating_point():
                    close(g, w, torch.float8_e4m3fn if name in QUANTISE_INSIDE else g.dtype)
                elif isinstance(g, torch.Tensor):
                    assert torch.equal(g.cpu(), w.cpu()), f"{g.dtype} results differ"
        except AssertionError as e:
            figures["wrong"] += 1
            print(f"WRONG {name}: {str(e).splitlines()[:6]}", flush=True)
        except Exception as e:  # noqa: BLE001
            figures["errors"] += 1
            print(f"ERROR {name}: {type(e).__name__}: {str(e)[:300]}", flush=True)
    figures["seconds"] = round(time.monotonic() - t0, 1)
    figures["kernel_builds"] = tileops.counters()["kernel_builds"]
    print(json.dumps(figures), flush=True)
    return 1 if figures["wrong"] or figures["errors"] else 0


def cmd_oom(a):
    """Fill the device, then ask for an output that does not fit: a clean OutOfMemoryError naming the
    op; after freeing, the same call works and is right."""
    x = torch.randn(4096, 65536, device="cuda", dtype=torch.bfloat16)  # 512 MiB; its output is as big
    torch.cuda.synchronize()
    hog, chunk = [], 1 << 30
    while chunk >= (1 << 20):  # fill the device to within a MiB
        try:
            hog.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
        except torch.OutOfMemoryError:
            chunk //= 2
    figures = {"hog_gib": round(sum(h.numel() for h in hog) / 2**30, 1)}
    try:
        ops.norm_rms_norm_fwd(x, None, [65536])
        figures["refused"] = False
    except torch.OutOfMemoryError as e:
        figures["refused"] = True
        figures["names_op"] = "tileops::norm_rms_norm_fwd" in str(e)
        figures["message"] = str(e).splitlines()[0][:200]
    except Exception as e:  # noqa: BLE001
        figures["refused"] = True
        figures["names_op"] = False
        figures["message"] = f"not an OutOfMemoryError: {type(e).__name__}: {str(e)[:200]}"
    del hog
    torch.cuda.empty_cache()
    y = ops.norm_rms_norm_fwd(x, None, [65536])
    close(y, F.rms_norm(x.float(), [65536]).to(x.dtype), x.dtype)
    figures["next_call_ok"] = True
    print(json.dumps(figures), flush=True)
    return 0 if figures.get("refused") and figures.get("names_op") else 1


RACE_CASES = [(3, 7, torch.bfloat16), (130, 4100, torch.bfloat16), (3, 33000, torch.float32), (130, 1000, torch.float32)]


def cmd_race_worker(a):
    """One process of the race: wait for the common start, then 4 threads call every case."""
    while time.time() < a.start_at:
        time.sleep(0.001)
    wrong, errors = [], []

    def run(tid):
        for rows, cols, dt in RACE_CASES[tid % 2:] + RACE_CASES[: tid % 2]:
            for name, fn in family_calls(rows, cols, dt):
                try:
                    got = fn("cuda", None)
                    torch.cuda.synchronize()
                    want = fn("cpu", "reference")
                    for gt, wt in zip(got, want):
                        close(gt, wt, dt if gt.dtype == dt else gt.dtype)
                except AssertionError:
                    wrong.append(name)
                except Exception as e:  # noqa: BLE001
                    errors.append(f"{name}: {type(e).__name__}: {str(e)[:200]}")
    threads = [threading.Thread(target=run, args=(i,)) for i in range(a.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    c = tileops.counters()
    print(json.dumps({"wrong": len(wrong), "errors": errors[:5], "nvrtc_compiles": c["nvrtc_compiles"],
                      "disk_cache_hits": c["disk_cache_hits"], "kernel_builds": c["kernel_builds"]}), flush=True)
    return 0


def cmd_race(a):
    cache = a.cache_dir
    os.makedirs(cache, mode=0o700, exist_ok=True)  # private, as the disk cache wants its folder
    assert not os.listdir(cache), f"{cache} must start empty (a cold cache)"
    env = dict(os.environ, TILEOPS_CACHE_DIR=cache)
    start_at = time.time() + 15  # every process imports torch first, then all start together
    procs = [subprocess.Popen([sys.executable, __file__, "race-worker", "--threads", str(a.threads),
                               "--start-at", str(start_at)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(a.procs)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=a.timeout)
        line = out.strip().splitlines()[-1] if out.strip() else "{}"
        r = json.loads(line) if line.startswith("{") else {"errors": [err[-500:]]}
        r["rc"] = p.returncode
        results.append(r)
    entries = [f for f in os.listdir(cache) if f.endswith(".cubin")]
    compiles = sum(r.get("nvrtc_compiles", 0) for r in results)
    figures = {"procs": a.procs, "threads": a.threads, "cache_entries": len(entries), "nvrtc_compiles": compiles,
               "disk_cache_hits": sum(r.get("disk_cache_hits", 0) for r in results),
               "kernel_builds_per_proc": sorted({r.get("kernel_builds", -1) for r in results}),
               "wrong": sum(r.get("wrong", 0) for r in results),
               "errors": [e for r in results for e in r.get("errors", [])][:5],
               "crashed": sum(1 for r in results if r["rc"] != 0)}
    print(json.dumps(figures), flush=True)
    ok = (figures["wrong"] == 0 and not figures["errors"] and figures["crashed"] == 0
          and compiles == len(entries) and len(figures["kernel_builds_per_proc"]) == 1)
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("shapes")
    s.add_argument("--quick", action="store_true", help="bfloat16 only (for the slower sanitizer tools)")
    s.add_argument("--warm-up", action="store_true", help="build every kernel first, many threads at a time")
    c = sub.add_parser("contract")
    c.add_argument("--only", default="", help="op classes whose name holds this text")
    c.add_argument("--device", default="cuda", help="cpu: a dry run of the driver itself (reference twice)")
    sub.add_parser("oom")
    r = sub.add_parser("race")
    r.add_argument("--procs", type=int, default=8)
    r.add_argument("--threads", type=int, default=4)
    r.add_argument("--cache-dir", required=True)
    r.add_argument("--timeout", type=float, default=240)
    w = sub.add_parser("race-worker")
    w.add_argument("--threads", type=int, default=4)
    w.add_argument("--start-at", type=float, required=True)
    a = ap.parse_args()
    sys.exit({"shapes": cmd_shapes, "contract": cmd_contract, "oom": cmd_oom, "race": cmd_race, "race-worker": cmd_race_worker}[a.cmd](a))


if __name__ == "__main__":
    main()
