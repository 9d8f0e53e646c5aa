"""Position benchmarks on a GPU: RoPE in place on q and k (ours, both styles) beside the eager
formula, torch.compile of the formula, and a device copy of q and k (the bytes RoPE must move).
A benchmark, not a test.    python3 scripts/bench/bench_position.py [--json out.json] [--quick]
"""
from __future__ import annotations

import argparse

import torch

import harness  # scripts/bench/harness.py
import peers  # scripts/bench/peers.py
import tileops


def rope_formula(positions, q, k, cache, neox: bool):
    """vLLM's forward_native: the eager peer, in place on q and k (float32 math, one rounding)."""
    rot = cache.shape[1]
    cs = cache.index_select(0, positions)
    cos, sin = cs[:, None, : rot // 2], cs[:, None, rot // 2:]
    for x in (q, k):
        r = x[..., :rot].float()
        if neox:
            x1, x2 = r[..., : rot // 2], r[..., rot // 2:]
            out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
        else:
            x1, x2 = r[..., 0::2], r[..., 1::2]
            out = torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).flatten(-2)
        x[..., :rot].copy_(out)


def rope_rows(quick: bool) -> list[dict]:
    # (workload, t, hq, hk, head_dim, rot, neox[, cache dtype]): 8192 tokens x 32 heads x 128 for
    # q and k first; the cache is float32 unless given (a bf16 cache is in q's dtype: dtype_combos).
    cases = [("8192x32x128 q+k", 8192, 32, 32, 128, 128, True)]
    if not quick:
        cases += [("8192x32x128 gptj", 8192, 32, 32, 128, 128, False),
                  ("llama-8b gqa", 8192, 32, 8, 128, 128, True),
                  ("llama-8b gqa bf16 cache", 8192, 32, 8, 128, 128, True, torch.bfloat16),
                  ("decode 1 token", 1, 32, 8, 128, 128, True),
                  ("partial rot 64/256", 8192, 16, 16, 256, 64, False)]
    rows = []
    dtype = torch.bfloat16
    for name, t, hq, hk, d, rot, neox, *cache_dtype in cases:
        cache_dtype = cache_dtype[0] if cache_dtype else torch.float32
        op = getattr(torch.ops.tileops, f"position_rope_{'neox' if neox else 'non_neox'}_fwd_writes_k_writes_q")
        bytes_per_call = 2 * t * (hq + hk) * rot * dtype.itemsize + t * rot * cache_dtype.itemsize + t * 8
        n_sets = harness.n_sets_for(bytes_per_call)
        ps = [torch.randint(0, 8192, (t,), device="cuda") for _ in range(n_sets)]
        qs = [torch.randn(t, hq, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
        ks = [torch.randn(t, hk, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
        q2 = [torch.empty_like(x) for x in qs]
        k2 = [torch.empty_like(x) for x in ks]
        angle = torch.arange(8192, device="cuda", dtype=torch.float32)[:, None] * \
            (1.0 / 10000 ** (torch.arange(0, rot, 2, device="cuda", dtype=torch.float32) / rot))
        cache = torch.cat([angle.cos(), angle.sin()], -1).to(cache_dtype)
        compiled = harness.compiled(lambda p, q, k, c: rope_formula(p, q, k, c, neox))

        def copy(i):
            def run():
                q2[i].copy_(qs[i])
                k2[i].copy_(ks[i])
            return run

        rows.append(harness.measure(name, f"{t}x({hq}+{hk})x{d}", dtype, bytes_per_call, n_sets, {
            "ours": lambda i: (lambda: op(ps[i], qs[i], ks[i], cache)),
            "eager": lambda i: (lambda: rope_formula(ps[i], qs[i], ks[i], cache, neox)),
            "compile": lambda i: (lambda: compiled(ps[i], qs[i], ks[i], cache)),
            "copy": copy,
            **(peers.rope(ps, qs, ks, cache, neox) if rot == d else {}),
        }))
        rows[-1]["op"] = "RopeNeoxFwdOp" if neox else "RopeNonNeoxFwdOp"
        del ps, qs, ks, q2, k2
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="only 8192x32x128 bf16 neox")
    args = ap.parse_args()
    tileops.load()
    rows = rope_rows(args.quick)
    harness.write_json(args.json, {"device": torch.cuda.get_device_properties(0).name, "torch": torch.__version__,
                                   "kernels": rows})
    # 'copy' copies all of q and k; RoPE with rot < head_dim moves fewer bytes than that copy.
    harness.print_table("RopeNeoxFwdOp / RopeNonNeoxFwdOp (in place, q and k)", rows)


if __name__ == "__main__":
    main()
