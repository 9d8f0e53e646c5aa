"""MoE expert GEMM benchmarks on a GPU: MoeGroupedGemmNopadFwdOp and MoeGateUpFwdOp on the manifest's
DeepSeek-V3 workloads, the routed rows spread over the experts by a seeded draw (uneven, as routing is),
beside a Python loop of torch.matmul over the experts with the sizes already on the host (what a user
writes; gate-up adds F.silu(gate) * up) and a device copy of the operands' and output's bytes. Every
column is timed on the stream: the cublaslt target reads the runs on the host each call.
A benchmark, not a test.    python3 scripts/bench/bench_moe.py [--json out.json] [--quick] [--target T]
(--target nvrtc times the one-launch kernels that read the runs on the device.)
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


def rows_for(op_class: str, target: str, quick: bool) -> list[dict]:
    gated = op_class == "MoeGateUpFwdOp"
    fn = ops.moe_gate_up_fwd if gated else ops.moe_grouped_gemm_nopad_fwd
    rows = []
    for w in harness.manifest_workloads("moe", op_class)[: 1 if quick else None]:
        (numel, k), (experts, n, _) = w["a"], w["b"]
        out_cols = n // 2 if gated else n
        sizes = routed_sizes(numel, experts)
        offsets = [sum(sizes[:e]) for e in range(experts)]
        sz = torch.tensor(sizes, dtype=torch.int32, device="cuda")
        off = torch.tensor(offsets, dtype=torch.int32, device="cuda")
        for dname in w["dtypes"]:
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

            row = harness.measure(w["name"], f"{numel}x{n}x{k}/e{experts}", dtype, nbytes, n_sets, {
                "ours": lambda i: (lambda: fn(As[i], Bs[i], sz, off, target=target)),
                "eager": lambda i: (lambda: loop(As[i], Bs[i])),
                "copy": lambda i: (lambda: flat2[i].copy_(flat[i])),
            }, timer=harness.stream_time_us)
            row["op"], row["tflops"] = op_class, 2 * numel * n * k / (row["ours_us"] * 1e-6) / 1e12
            rows.append(row)
            del As, Bs, flat, flat2
            torch.cuda.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="the first workload of each op only")
    ap.add_argument("--target", default="cublaslt", help="the tileops target timed as 'ours'")
    args = ap.parse_args()
    tileops.load()
    rows = {op_class: rows_for(op_class, args.target, args.quick) for op_class in OPS}
    harness.write_json(args.json, {"device": torch.cuda.get_device_properties(0).name, "torch": torch.__version__,
                                   "target": args.target, "kernels": rows})
    for op_class in OPS:
        print_rows(f"{op_class} (target {args.target}) beside a loop of torch.matmul; timed on the stream",
                   rows[op_class])


if __name__ == "__main__":
    main()
