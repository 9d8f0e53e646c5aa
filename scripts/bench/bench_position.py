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
    """vLLM's forward_native: the eager peer, in place on q and k (float32 math, one rounding); k may
    be None."""
    rot = cache.shape[1]
    cs = cache.index_select(0, positions)
    cos, sin = cs[:, None, : rot // 2], cs[:, None, rot // 2:]
    for x in (q, k) if k is not None else (q,):
        r = x[..., :rot].float()
        if neox:
            x1, x2 = r[..., : rot // 2], r[..., rot // 2:]
            out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
        else:
            x1, x2 = r[..., 0::2], r[..., 1::2]
            out = torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).flatten(-2)
        x[..., :rot].copy_(out)


def rope_rows(quick: bool) -> list[dict]:
    # (workload, t, hq, hk, head_dim, rot, neox[, options]): 8192 tokens x 32 heads x 128 for q and k
    # first. Options: cache (dtype; float32 by default, a bf16 cache is in q's dtype: dtype_combos),
    # index (positions' dtype), no_key (key=None), flat (vLLM's [t, heads * head_size] q/k, the flat
    # op; with offsets: per-token offsets, the eager peer adds them to the positions).
    cases = [("8192x32x128 q+k", 8192, 32, 32, 128, 128, True)]
    if not quick:
        cases += [("8192x32x128 gptj", 8192, 32, 32, 128, 128, False),
                  ("llama-8b gqa", 8192, 32, 8, 128, 128, True),
                  ("llama-8b gqa bf16 cache", 8192, 32, 8, 128, 128, True, {"cache": torch.bfloat16}),
                  ("decode 1 token", 1, 32, 8, 128, 128, True),
                  ("partial rot 64/256", 8192, 16, 16, 256, 64, False),
                  ("llama-8b gqa int32 pos", 8192, 32, 8, 128, 128, True, {"index": torch.int32}),
                  ("llama-8b q only (key=None)", 8192, 32, 0, 128, 128, True, {"no_key": True}),
                  ("llama-8b flat + offsets", 8192, 32, 8, 128, 128, True, {"flat": True, "offsets": True}),
                  ("gptj flat int32 + offsets", 8192, 16, 16, 256, 64, False,
                   {"flat": True, "offsets": True, "index": torch.int32})]
    rows = []
    dtype = torch.bfloat16
    for name, t, hq, hk, d, rot, neox, *opts in cases:
        opts = opts[0] if opts else {}
        cache_dtype, index = opts.get("cache", torch.float32), opts.get("index", torch.int64)
        no_key, flat, with_offsets = opts.get("no_key", False), opts.get("flat", False), opts.get("offsets", False)
        style = "neox" if neox else "non_neox"
        op = getattr(torch.ops.tileops, f"position_rope_{style}{'_flat' if flat else ''}_fwd_writes_k_writes_q")
        bytes_per_call = (2 * t * (hq + hk) * rot * dtype.itemsize + t * rot * cache_dtype.itemsize
                          + t * index.itemsize * (2 if with_offsets else 1))
        n_sets = harness.n_sets_for(bytes_per_call)
        hi = 4096 if with_offsets else 8192  # positions + offsets stay within the 8192-row cache
        ps = [torch.randint(0, hi, (t,), device="cuda", dtype=index) for _ in range(n_sets)]
        offs = [torch.randint(0, 4096, (t,), device="cuda", dtype=index) if with_offsets else None
                for _ in range(n_sets)]
        qs = [torch.randn(t, hq, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
        ks = [None if no_key else torch.randn(t, hk, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
        q2 = [torch.empty_like(x) for x in qs]
        k2 = [None if x is None else torch.empty_like(x) for x in ks]
        angle = torch.arange(8192, device="cuda", dtype=torch.float32)[:, None] * \
            (1.0 / 10000 ** (torch.arange(0, rot, 2, device="cuda", dtype=torch.float32) / rot))
        cache = torch.cat([angle.cos(), angle.sin()], -1).to(cache_dtype)

        def peer(p, q, k, c, o):
            rope_formula(p if o is None else p + o, q, k, c, neox)

        compiled = harness.compiled(peer)

        def ours(i):
            if not flat:
                return lambda: op(ps[i], qs[i], ks[i], cache)
            qf, kf = qs[i].view(t, -1), None if ks[i] is None else ks[i].view(t, -1)
            return lambda: op(ps[i], qf, kf, cache, offs[i], d)

        def copy(i):
            def run():
                q2[i].copy_(qs[i])
                if ks[i] is not None:
                    k2[i].copy_(ks[i])
            return run

        rows.append(harness.measure(name, f"{t}x({hq}+{hk})x{d}", dtype, bytes_per_call, n_sets, {
            "ours": ours,
            "eager": lambda i: (lambda: peer(ps[i], qs[i], ks[i], cache, offs[i])),
            "compile": lambda i: (lambda: compiled(ps[i], qs[i], ks[i], cache, offs[i])),
            "copy": copy,
            # The peers' calls here take int64 positions, a key and no offsets.
            **(peers.rope(ps, qs, ks, cache, neox) if rot == d and not (no_key or with_offsets or flat)
               and index == torch.int64 else {}),
        }))
        rows[-1]["op"] = ("RopeNeox" if neox else "RopeNonNeox") + ("FlatFwdOp" if flat else "FwdOp")
        del ps, offs, qs, ks, q2, k2
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
    harness.print_table("RopeNeoxCachedFwdOp / RopeNonNeoxCachedFwdOp and the flat forms (in place, q and k)", rows)


if __name__ == "__main__":
    main()
