"""Probe (GPU machine): where the first call of an op goes in a cold process whose kernels are all on
disk. Warms a cache folder, then runs fresh processes against it (TILEOPS_LOG_LEVEL=debug: the
build path logs key, read and module-load times) and prints each phase, beside torch's own first call.

    python3 scripts/debug/probe_first_call.py [--runs 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r"""
import json, sys, time
t_import = time.perf_counter()
import torch
import tileops
tileops.load()
t_loaded = time.perf_counter()
mode = sys.argv[1]
x = torch.randn(2048, 4096, device="cuda", dtype=torch.bfloat16)
w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
xh, wh = x.half(), w.half()
torch.cuda.synchronize()
ms = {"import_and_load": (t_loaded - t_import) * 1e3}
def timed(name, fn):
    t0 = time.perf_counter()
    r = fn()
    torch.cuda.synchronize()
    ms[name] = (time.perf_counter() - t0) * 1e3
    return r
if mode == "torch":
    timed("first", lambda: torch.nn.functional.rms_norm(x, [4096], w))
    timed("second", lambda: torch.nn.functional.rms_norm(x, [4096], w))
else:
    if mode == "warm_alloc":  # the output's block already in torch's caching allocator
        timed("alloc", lambda: torch.empty_like(x))
    op = timed("resolve", lambda: torch.ops.tileops.norm_rms_norm_fwd.default)
    timed("first", lambda: op(x, w, [4096]))
    timed("second", lambda: op(x, w, [4096]))
    timed("new_kernel", lambda: op(xh, wh, [4096]))  # a second disk hit, process already warm
print(json.dumps({"ms": ms, "counters": tileops.counters() if mode != "torch" else {}}))
"""


def child(mode, env):
    r = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), **env))
    if r.returncode != 0:
        sys.exit(f"probe child ({mode}) failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1]), [l for l in r.stderr.splitlines() if "tileops:" in l]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        image, record = os.path.join(tmp, "image"), os.path.join(tmp, "kernels.rec")
        cold, _ = child("cold", {"TILEOPS_CACHE_DIR": os.path.join(tmp, "user"), "TILEOPS_RECORD_KERNELS": record})
        print("cold compile:", json.dumps({k: round(v, 2) for k, v in cold["ms"].items()}))
        # The image a deployment ships: the offline warm-up replays the record, no GPU in sight.
        subprocess.run([sys.executable, "-m", "tileops.warmup", "--record", record, "--cache-dir", image], check=True,
                       env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), CUDA_VISIBLE_DEVICES=""))
        for mode in ("cold", "warm_alloc", "torch"):
            runs, logs = [], []
            for i in range(args.runs):
                out, log = child(mode, {"TILEOPS_CACHE_DIR": os.path.join(tmp, f"user-{mode}-{i}"),
                                        "TILEOPS_CACHE_DIR_READONLY": image, "TILEOPS_LOG_LEVEL": "debug"})
                if mode != "torch":
                    assert out["counters"]["nvrtc_compiles"] == 0, out
                runs.append(out["ms"])
                logs = log
            med = {k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]}
            print(f"{mode} (median of {args.runs}):", json.dumps(med))
            for line in logs:
                print("   ", line)


if __name__ == "__main__":
    main()
