"""Seeded, bounded fuzzer over every tileops operator (tests/fuzz/cases.py draws the calls).

Property: every call either returns what the float64 oracle gives (within the dtype's tolerance, NaN
where it gives NaN) or raises a Python exception whose message names the operator. Calls run in
batches in child processes, each in its own process group, so a crash or a hang is counted (and the
batch goes on after it) instead of ending the run.

    python tests/fuzz/fuzz_ops.py --seed 1 --calls 20000 --jobs 2   # prints a JSON summary
    python tests/fuzz/fuzz_ops.py --seed 1 --only 1234              # replays one call, verbosely
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FAILURES = ("wrong", "unnamed", "accepted_bad", "crash", "hang", "harness")


# ---- one call (in a worker) -------------------------------------------------------------------------

def _detached(a):
    """The value before the call, for the oracle; a huge expanded view (which must be refused) is
    kept as it is: cloning it would take what its refusal saves."""
    import torch
    if isinstance(a, torch.Tensor):
        return a.detach().clone() if a.numel() <= 1 << 24 else a.detach()
    return list(a) if isinstance(a, list) else a


def _on_cpu_zeros(a):
    import torch
    return torch.zeros(a.shape, dtype=a.dtype) if isinstance(a, torch.Tensor) else ("cpu" if a == "meta" else a)


def _why_invalid(c, args) -> str:
    """The rules every call must meet that the generic fields describe: dtypes, one device, no grad."""
    import torch
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    for i, rule in c.dtypes.items():
        t = args[i] if i < len(args) else None
        if not isinstance(t, torch.Tensor):
            continue
        if isinstance(rule, int) and (rule >= len(args) or not isinstance(args[rule], torch.Tensor)):
            continue
        want = rule(args) if callable(rule) else (args[rule].dtype,) if isinstance(rule, int) else rule
        if t.dtype not in want:
            return f"dtype of arg {i}"
    if len({t.device for t in tensors}) > 1:
        return "mixed devices"
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return "requires grad"
    return ""


def _result_dtype(c, args):
    import torch
    if hasattr(c, "out_dtype"):
        return c.out_dtype(args)
    for i, rule in c.dtypes.items():
        if not isinstance(rule, int) and not callable(rule) and rule != (torch.int64,):
            return args[i].dtype
    return torch.float32


def run_one(c) -> tuple[str, str]:
    """(outcome, detail): ok | refused | wrong | unnamed | accepted_bad."""
    import torch
    from cases import TOL
    op = getattr(torch.ops.tileops, c.op)
    before = [_detached(a) for a in c.args] + getattr(c, "pad", [])  # the defaults of dropped params
    invalid = c.expect_refusal or _why_invalid(c, c.args)
    try:
        ret = op(*c.args, **c.kwargs)
    except Exception as e:  # noqa: BLE001 - the property is about every exception
        msg = str(e)
        if c.op in msg:
            return "refused", type(e).__name__
        return "unnamed", f"{type(e).__name__}: {msg.splitlines()[0][:300] if msg else ''}"
    if invalid:
        return "accepted_bad", invalid
    meta = any(isinstance(a, torch.Tensor) and a.is_meta for a in c.args) or "meta" in c.args
    try:
        want = c.oracle([_on_cpu_zeros(a) for a in before] if meta else before, c.kwargs)
    except Exception as e:  # noqa: BLE001
        return "accepted_bad", f"the oracle refuses it: {type(e).__name__}: {str(e)[:200]}"
    got = c.results(c.args, ret)
    dts = _result_dtype(c, before)  # one dtype for every result, or a list of them
    if len(got) != len(want):
        return "wrong", f"{len(got)} results, want {len(want)}"
    for k, (g_, w) in enumerate(zip(got, want)):
        dt = dts[k] if isinstance(dts, (list, tuple)) else dts
        if tuple(g_.shape) != tuple(w.shape) or g_.dtype != dt:
            return "wrong", f"result {k}: {tuple(g_.shape)} {g_.dtype}, want {tuple(w.shape)} {dt}"
        if meta:
            if not g_.is_meta:
                return "wrong", f"result {k} is not meta"
            continue
        tol = TOL.get(dt, 0.0)
        g64, w64 = g_.detach().double(), w.to(dt).double()
        # Where the oracle is not finite (inf - inf, 0 * inf, overflow), the order of operations picks
        # NaN or an infinity (torch's float32 GELU gives NaN at +inf, its float64 one inf): any
        # non-finite value is right there, a finite one is not; and where the oracle is finite, so
        # must the result be.
        g64 = torch.where(~w64.isfinite() & ~g64.isfinite(), w64, g64)
        try:
            torch.testing.assert_close(g64, w64, rtol=tol, atol=tol, equal_nan=True)
        except AssertionError as e:
            return "wrong", f"result {k}: {str(e).splitlines()[0:3]}"
    return "ok", ""


def worker(seed: int, start: int, count: int) -> None:
    sys.path[:0] = [HERE, os.path.join(ROOT, "python")]
    import torch
    import tileops
    from cases import make_call
    tileops.load()
    torch.set_num_threads(1)
    abort_at = int(os.environ.get("TILEOPS_FUZZ_ABORT_AT", "-1"))  # for the harness's own test
    for i in range(start, start + count):
        print(json.dumps({"i": i, "phase": "start"}), flush=True)
        if i == abort_at:
            os.abort()
        try:
            c = make_call(seed, i)
            outcome, detail = run_one(c)
            op, mutation = c.op, c.mutation
        except Exception as e:  # noqa: BLE001 - a bug of the fuzzer itself, counted as a failure
            op, mutation, outcome, detail = "?", "?", "harness", f"{type(e).__name__}: {str(e)[:300]}"
        print(json.dumps({"i": i, "op": op, "mutation": mutation, "outcome": outcome, "detail": detail}),
              flush=True)


# ---- the parent: batches in child process groups ------------------------------------------------------

def run_batch(seed, start, count, timeout):
    """Runs calls [start, start+count) in children; returns one record per call. A child that dies
    (signal, abort) or stalls has its current call counted as crash/hang; the next child goes on."""
    records, i, deadline = [], start, time.monotonic() + timeout
    end = start + count
    while i < end:
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--seed", str(seed), "--start", str(i),
               "--calls", str(end - i)]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        try:
            out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            hung = False
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            hung = True
        current = None
        for line in out.splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("phase") == "start":
                current = r["i"]
            else:
                records.append(r)
                current = None
        if current is None and p.returncode == 0 and not hung:
            break
        at = current if current is not None else (records[-1]["i"] + 1 if records else i)
        if at >= end:
            break
        what = "hang" if hung else "crash"
        records.append({"i": at, "op": "?", "mutation": "?", "outcome": what,
                        "detail": f"exit {p.returncode}: {err.strip().splitlines()[-1:] if err.strip() else ''}"})
        if hung:
            break
        i = at + 1
    return records


def fuzz(seed: int, calls: int, jobs: int, batch: int, timeout: float) -> dict:
    from concurrent.futures import ThreadPoolExecutor
    t0 = time.monotonic()
    starts = list(range(0, calls, batch))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        parts = list(pool.map(lambda s: run_batch(seed, s, min(batch, calls - s), timeout), starts))
    records = [r for part in parts for r in part]
    outcomes = collections.Counter(r["outcome"] for r in records)
    by_op = collections.defaultdict(collections.Counter)
    for r in records:
        by_op[r["op"]][r["outcome"]] += 1
    return {
        "seed": seed, "calls": calls, "ran": len(records), "seconds": round(time.monotonic() - t0, 1),
        "outcomes": dict(outcomes),
        "mutations": dict(collections.Counter(r["mutation"] for r in records)),
        "by_op": {k: dict(v) for k, v in sorted(by_op.items())},
        "failures": [r for r in records if r["outcome"] in FAILURES][:50],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--jobs", type=int, default=2, help="child processes at a time")
    ap.add_argument("--batch", type=int, default=500, help="calls per child")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a batch may take")
    ap.add_argument("--only", type=int, help="replay one call index in this process and print it")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a.seed, a.start, a.calls)
    if a.only is not None:
        sys.path[:0] = [HERE, os.path.join(ROOT, "python")]
        import tileops
        from cases import make_call
        tileops.load()
        c = make_call(a.seed, a.only)
        print(c.op, c.mutation, c.expect_refusal, [getattr(x, "shape", x) for x in c.args], c.kwargs)
        print(run_one(c))
        return
    summary = fuzz(a.seed, a.calls, a.jobs, a.batch, a.timeout)
    print(json.dumps(summary, indent=1))
    sys.exit(1 if any(summary["outcomes"].get(k) for k in FAILURES) else 0)


if __name__ == "__main__":
    main()
