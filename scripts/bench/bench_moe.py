"""MoE benchmarks on a GPU: MoeGroupedGemmNopadFwdOp and MoeGateUpFwdOp on the manifest's
DeepSeek-V3 workloads, the routed rows spread over the experts by a seeded draw (uneven, as routing is),
beside a Python loop of torch.matmul over the experts with the sizes already on the host (what a user
writes; gate-up adds F.silu(gate) * up) and a device copy of the operands' and output's bytes. Every
column is timed on the stream: the cublaslt target reads the runs on the host each call.
A benchmark, not a test.    python3 scripts/bench/bench_moe.py [--json out.json] [--quick] [--target T]
(--target nvrtc times the one-launch kernels that read the runs on the device.)
--rows-per-expert 16,32,... times each op's manifest shapes at those average rows an expert instead, the
nvrtc and the cublaslt target side by side: where the one-launch kernel stops paying (its plan's bound;
run it with TILEOPS_TUNE=moe_max_rows_per_expert=1048576 so that nvrtc takes every size).
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

import harness  # scripts/bench/harness.py
import tileops
from bench_gemm import print_rows  # the GEMM table's columns (TFLOPS, vs eager, vs best)

ops = torch.ops.tileops
OPS = ("MoeGroupedGemmNopadFwdOp", "MoeGateUpFwdOp")


def routed_sizes(rows: int, experts: int, seed: int = 0) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.multinomial(torch.ones(experts), rows, replacement=True, generator=g).bincount(minlength=experts).tolist()


def cases(op_class: str, quick: bool, per_expert: list[int], shapes: str = "") -> list[tuple]:
    """(workload name, numel, k, experts, n, dtype names): the manifest's, or its distinct (k, experts, n)
    (or those of `shapes`, "k:experts:n;...") at each average of rows an expert."""
    out = []
    for w in harness.manifest_workloads("moe", op_class)[: 1 if quick else None]:
        (numel, k), (experts, n, _) = w["a"], w["b"]
        out.append((w["name"], numel, k, experts, n, w["dtypes"]))
    if not per_expert:
        return out
    shapes = ([tuple(int(x) for x in sh.split(":")) + (("bfloat16",),) for sh in shapes.split(";")] if shapes
              else list(dict.fromkeys((k, e, n, tuple(d)) for _, _, k, e, n, d in out)))
    return [(f"{r} rows/expert", r * e, k, e, n, d) for k, e, n, d in shapes for r in per_expert]


def rows_for(op_class: str, target: str, quick: bool, per_expert: list[int], shapes: str = "") -> list[dict]:
    gated = op_class == "MoeGateUpFwdOp"
    fn = ops.moe_gate_up_fwd if gated else ops.moe_grouped_gemm_nopad_fwd
    rows = []
    for name, numel, k, experts, n, dtypes in cases(op_class, quick, per_expert, shapes):
        out_cols = n // 2 if gated else n
        sizes = routed_sizes(numel, experts)
        offsets = [sum(sizes[:e]) for e in range(experts)]
        sz = torch.tensor(sizes, dtype=torch.int32, device="cuda")
        off = torch.tensor(offsets, dtype=torch.int32, device="cuda")
        for dname in dtypes:
            dtype = harness.DTYPES[dname]
            nbytes = (numel * k + experts * n * k + numel * out_cols) * dtype.itemsize
            n_sets = 1 if experts * n * k * dtype.itemsize > 4 << 30 else 2  # the weights are GBs
            As = [torch.randn(numel, k, device="cuda", dtype=dtype) for _ in range(n_sets)]
            Bs = [torch.randn(experts, n, k, device="cuda", dtype=dtype) / k ** 0.5 for _ in range(n_sets)]
            flat = [torch.empty(nbytes // 2, device="cuda", dtype=torch.uint8) for _ in range(n_sets)]
            flat2 = [torch.empty_like(f) for f in flat]

            def loop(a, b):
                out = torch.empty(numel, out_cols, device="cuda", dtype=dtype)
                for e, (o, r) in enumerate(zip(offsets, sizes)):
                    if r:
                        y = torch.matmul(a[o:o + r], b[e].t())
                        out[o:o + r] = F.silu(y[:, :out_cols]) * y[:, out_cols:] if gated else y
                return out

            timed = {"ours": lambda i: (lambda: fn(As[i], Bs[i], sz, off, target=target))}
            if per_expert:  # the sweep: both targets
                timed = {"ours": lambda i: (lambda: fn(As[i], Bs[i], sz, off, target="nvrtc")),
                         "cublaslt": lambda i: (lambda: fn(As[i], Bs[i], sz, off, target="cublaslt"))}
            row = harness.measure(name, f"{numel}x{n}x{k}/e{experts}", dtype, nbytes, n_sets, {
                **timed,
                "eager": lambda i: (lambda: loop(As[i], Bs[i])),
                "copy": lambda i: (lambda: flat2[i].copy_(flat[i])),
            }, timer=harness.stream_time_us)
            row["op"], row["tflops"] = op_class, 2 * numel * n * k / (row["ours_us"] * 1e-6) / 1e12
            rows.append(row)
            del As, Bs, flat, flat2
            torch.cuda.empty_cache()
    return rows


def fused_rows(target: str, quick: bool) -> list[dict]:
    """FusedMoeFwdOp (routing, both GEMMs, the weighted sum) beside what a Hugging Face MoE block does:
    top-k of the scores, then a loop over the experts that gathers each one's tokens."""
    rows = []
    for w in harness.manifest_workloads("moe", "FusedMoeFwdOp")[: 1 if quick else None]:
        (t, hidden), (experts, n2, _) = w["hidden_states"], w["w_gate_up"]
        ffn, p = n2 // 2, {"scoring_func": "softmax", "routed_scaling_factor": 1.0, **w["params"]}
        for dname in w["dtypes"]:
            dtype = harness.DTYPES[dname]
            x = torch.randn(t, hidden, device="cuda", dtype=dtype)
            gating = torch.randn(t, experts, device="cuda")
            wgu = torch.randn(experts, n2, hidden, device="cuda", dtype=dtype) / hidden ** 0.5
            wd = torch.randn(experts, hidden, ffn, device="cuda", dtype=dtype) / ffn ** 0.5
            nbytes = (wgu.numel() + wd.numel() + 2 * x.numel()) * dtype.itemsize
            flat = torch.empty(nbytes // 2, device="cuda", dtype=torch.uint8)
            flat2 = torch.empty_like(flat)

            def loop():
                scores = gating.softmax(-1) if p["scoring_func"] == "softmax" else gating.sigmoid()
                wts, ids = scores.topk(p["top_k"], dim=-1)
                out = torch.zeros(t, hidden, device="cuda", dtype=torch.float32)
                for e in range(experts):
                    tok, slot = (ids == e).nonzero(as_tuple=True)
                    if tok.numel():
                        y = x[tok] @ wgu[e].t()
                        h = F.silu(y[:, :ffn]) * y[:, ffn:]
                        out.index_add_(0, tok, (h @ wd[e].t()).float() * wts[tok, slot, None])
                return (out * p["routed_scaling_factor"]).to(dtype)

            row = harness.measure(w["name"], f"{t}x{hidden}/e{experts}k{p['top_k']}f{ffn}", dtype, nbytes, 1, {
                "ours": lambda i: (lambda: ops.moe_fused_moe_fwd(x, gating, wgu, wd, None, **w["params"], target=target)),
                "eager": lambda i: loop,
                "copy": lambda i: (lambda: flat2.copy_(flat)),
            }, timer=harness.stream_time_us)
            row["op"], row["tflops"] = "FusedMoeFwdOp", 6 * t * p["top_k"] * ffn * hidden / (row["ours_us"] * 1e-6) / 1e12
            rows.append(row)
            del x, gating, wgu, wd, flat, flat2
            torch.cuda.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="the first workload of each op only")
    ap.add_argument("--target", default="cublaslt", help="the tileops target timed as 'ours'")
    ap.add_argument("--rows-per-expert", default="", help="comma-separated averages: the nvrtc/cublaslt sweep")
    ap.add_argument("--shapes", default="", help="with --rows-per-expert: 'k:experts:n;...' for the manifest's")
    args = ap.parse_args()
    per_expert = [int(r) for r in args.rows_per_expert.split(",") if r]
    tileops.load()
    rows = {op_class: rows_for(op_class, args.target, args.quick, per_expert, args.shapes) for op_class in OPS}
    if not per_expert:
        rows["FusedMoeFwdOp"] = fused_rows(args.target if args.target != "nvrtc" else "cublaslt", args.quick)
    if per_expert:
        args.target = "nvrtc"
        for op_class in OPS:
            print(f"\n{op_class}: nvrtc (one launch) beside cublaslt (a GEMM an expert), median µs")
            for r in rows[op_class]:
                print(f"{r['workload']:>16} {r['shape']:>22}  nvrtc {r['ours_us']:9.1f}  cublaslt "
                      f"{r['cublaslt_us']:9.1f}  nvrtc/cublaslt {r['ours_us'] / r['cublaslt_us']:.2f}  "
                      f"copy {r['copy_us']:8.1f}")
    harness.write_json(args.json, {"device": torch.cuda.get_device_properties(0).name, "torch": torch.__version__,
                                   "target": args.target, "kernels": rows})
    for op_class in OPS:
        print_rows(f"{op_class} (target {args.target}) beside a loop of torch.matmul; timed on the stream",
                   rows[op_class])
    if "FusedMoeFwdOp" in rows:
        print_rows("FusedMoeFwdOp (target cublaslt) beside top-k and a loop over the experts; timed on the stream",
                   rows["FusedMoeFwdOp"])


if __name__ == "__main__":
    main()
