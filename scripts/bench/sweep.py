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


def time_vs_copy(name: str, m: int, n: int, call) -> str:
    """call(x) on rotating bf16 [m, n] input sets, beside a copy of the same bytes."""
    dtype = torch.bfloat16
    n_sets = harness.n_sets_for(2 * m * n * dtype.itemsize)
    xs = [torch.randn(m, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
    ys = [torch.empty_like(x) for x in xs]
    ours = harness.graph_time_us(lambda i: (lambda: call(xs[i])), n_sets)
    copy = harness.graph_time_us(lambda i: (lambda: ys[i].copy_(xs[i])), n_sets)
    return f"{name} ours {ours:6.1f} µs copy {copy:5.1f} µs copy/ours {copy / ours:4.2f}"


def main() -> None:
    tileops.load()
    knobs = " ".join(f"{k}={os.environ[k]}" for k in sorted(os.environ)
                     if k.startswith(("TILEOPS_CLUSTER_", "TILEOPS_ACT_"))) or "defaults"
    ops = torch.ops.tileops
    w = torch.randn(131072, device="cuda", dtype=torch.bfloat16)
    out = [time_vs_copy("rms 64x131072", 64, 131072, lambda x: ops.norm_rms_norm_fwd(x, w, [131072])),
           time_vs_copy("softmax 4x128256", 4, 128256, lambda x: ops.reduction_softmax_fwd(x, -1)),
           time_vs_copy("relu 8192x8192", 8192, 8192, ops.activation_relu_fwd),
           time_vs_copy("silu 8192x8192", 8192, 8192, ops.activation_silu_fwd)]
    print(f"[{knobs}] " + " | ".join(out))


if __name__ == "__main__":
    main()
