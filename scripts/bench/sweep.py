"""Tuning sweep (not a test): times a few of our kernels beside a copy of the same bytes under the
planner knobs in the environment, read once per process, so run one process per setting:
  cluster shape (RMSNorm 64x131072, softmax 4x128256 bf16): TILEOPS_CLUSTER_CTA_BYTES,
      TILEOPS_CLUSTER_VPT, TILEOPS_CLUSTER_MAX;
  elementwise grid (Relu, Silu 8192x8192 bf16): TILEOPS_ACT_CTAS_PER_SM (0 = one trip a thread).
    for b in 16384 32768; do TILEOPS_CLUSTER_CTA_BYTES=$b python3 scripts/bench/sweep.py; done
"""
from __future__ import annotations

import os

import torch

import harness  # scripts/bench/harness.py
import tileops


def time_pair(name, make_ours, xs, ys, bytes_per_call, n_sets):
    ours = harness.graph_time_us(make_ours, n_sets)
    copy = harness.graph_time_us(lambda i: (lambda: ys[i].copy_(xs[i])), n_sets)
    return f"{name} ours {ours:6.1f} µs copy {copy:5.1f} µs copy/ours {copy / ours:4.2f}"


def main() -> None:
    tileops.load()
    knobs = " ".join(f"{k}={os.environ[k]}" for k in sorted(os.environ) if k.startswith(("TILEOPS_CLUSTER_", "TILEOPS_ACT_"))) or "defaults"
    out = []
    dtype = torch.bfloat16
    m, n = 64, 131072
    b = 2 * m * n * dtype.itemsize
    n_sets = harness.n_sets_for(b)
    xs = [torch.randn(m, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
    ys = [torch.empty_like(x) for x in xs]
    w = torch.randn(n, device="cuda", dtype=dtype)
    out.append(time_pair("rms 64x131072", lambda i: (lambda: torch.ops.tileops.norm_rms_norm_fwd(xs[i], w, [n])),
                         xs, ys, b, n_sets))
    m, n = 4, 128256
    b = 2 * m * n * dtype.itemsize
    n_sets = harness.n_sets_for(b)
    xs = [torch.randn(m, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
    ys = [torch.empty_like(x) for x in xs]
    out.append(time_pair("softmax 4x128256", lambda i: (lambda: torch.ops.tileops.reduction_softmax_fwd(xs[i], -1)),
                         xs, ys, b, n_sets))
    m, n = 8192, 8192
    b = 2 * m * n * dtype.itemsize
    n_sets = harness.n_sets_for(b)
    xs = [torch.randn(m, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
    ys = [torch.empty_like(x) for x in xs]
    for name in ("relu", "silu"):
        op = getattr(torch.ops.tileops, f"activation_{name}_fwd")
        out.append(time_pair(f"{name} 8192x8192", lambda i, op=op: (lambda: op(xs[i])), xs, ys, b, n_sets))
    print(f"[{knobs}] " + " | ".join(out))


if __name__ == "__main__":
    main()
