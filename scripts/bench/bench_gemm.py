"""GEMM benchmarks on a GPU: GemmFwdOp, BmmFwdOp and GemmFp8FwdOp on the manifest's workloads through the cublaslt
target, beside torch.matmul / torch.bmm (cuBLAS: the eager column), torch.compile of the same call
and a device copy of the operands' and output's bytes; GemmFp8FwdOp's per-128-block workloads through
the nvrtc target beside the float32 formula; GemmW4A16FwdOp's decode workloads through the
nvrtc target beside the weight dequantized in torch and torch.matmul (eager and compiled); then the
host time of a tiny cached call.
A benchmark, not a test.    python3 scripts/bench/bench_gemm.py [--json out.json] [--quick] [--target T]
"""
from __future__ import annotations

import argparse

import torch

import harness  # scripts/bench/harness.py
import tileops
import tileops.gemm

ops = torch.ops.tileops


def gemm_rows(target: str, quick: bool) -> list[dict]:
    rows = []
    for w in harness.manifest_workloads("gemm", "GemmFwdOp")[: 3 if quick else None]:
        ta, tb = w["params"]["trans_a"], w["params"]["trans_b"]
        (a0, a1), (b0, b1) = w["a"], w["b"]
        m, k = (a1, a0) if ta else (a0, a1)
        n = b0 if tb else b1
        for dname in w["dtypes"]:
            dtype = harness.DTYPES[dname]
            nbytes = (a0 * a1 + b0 * b1 + m * n) * dtype.itemsize
            n_sets = harness.n_sets_for(nbytes)
            As = [torch.randn(a0, a1, device="cuda", dtype=dtype) for _ in range(n_sets)]
            Bs = [torch.randn(b0, b1, device="cuda", dtype=dtype) for _ in range(n_sets)]
            flat = [torch.empty(a0 * a1 + b0 * b1 + m * n, device="cuda", dtype=dtype) for _ in range(n_sets)]
            flat2 = [torch.empty_like(f) for f in flat]

            def peer(a, b):
                return torch.matmul(a.t() if ta else a, b.t() if tb else b)

            compiled = harness.compiled(peer)
            row = harness.measure(w["name"], f"{m}x{n}x{k}", dtype, nbytes, n_sets, {
                "ours": lambda i: (lambda: ops.gemm_fwd(As[i], Bs[i], trans_a=ta, trans_b=tb, target=target)),
                "eager": lambda i: (lambda: peer(As[i], Bs[i])),
                "compile": lambda i: (lambda: compiled(As[i], Bs[i])),
                "copy": lambda i: (lambda: flat2[i].copy_(flat[i])),
            })
            row["op"], row["tflops"] = "GemmFwdOp", 2 * m * n * k / (row["ours_us"] * 1e-6) / 1e12
            rows.append(row)
            del As, Bs, flat, flat2
    return rows


def bmm_rows(target: str, quick: bool) -> list[dict]:
    rows = []
    for w in harness.manifest_workloads("gemm", "BmmFwdOp")[: 2 if quick else None]:
        (bs, m, k), (_, _, n) = w["a"], w["b"]
        for dname in w["dtypes"]:
            dtype = harness.DTYPES[dname]
            nbytes = bs * (m * k + k * n + m * n) * dtype.itemsize
            n_sets = harness.n_sets_for(nbytes)
            As = [torch.randn(bs, m, k, device="cuda", dtype=dtype) for _ in range(n_sets)]
            Bs = [torch.randn(bs, k, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
            flat = [torch.empty(bs * (m * k + k * n + m * n), device="cuda", dtype=dtype) for _ in range(n_sets)]
            flat2 = [torch.empty_like(f) for f in flat]
            compiled = harness.compiled(torch.bmm)
            row = harness.measure(w["name"], f"{bs}x{m}x{n}x{k}", dtype, nbytes, n_sets, {
                "ours": lambda i: (lambda: ops.gemm_bmm_fwd(As[i], Bs[i], target=target)),
                "eager": lambda i: (lambda: torch.bmm(As[i], Bs[i])),
                "compile": lambda i: (lambda: compiled(As[i], Bs[i])),
                "copy": lambda i: (lambda: flat2[i].copy_(flat[i])),
            })
            row["op"], row["tflops"] = "BmmFwdOp", 2 * bs * m * n * k / (row["ours_us"] * 1e-6) / 1e12
            rows.append(row)
            del As, Bs, flat, flat2
    return rows


def fp8_rows(target: str, quick: bool) -> list[dict]:
    """GemmFp8FwdOp's per-tensor workloads beside torch._scaled_mm (the eager column); the block-scaled
    ones: fp8_block_rows."""
    rows = []
    ws = [w for w in harness.manifest_workloads("gemm", "GemmFp8FwdOp") if w["scale_a"] == [1, 1]]
    for w in ws[: 2 if quick else None]:
        (m, k), (n, _) = w["a"], w["b"]
        nbytes = m * k + n * k + 2 * m * n
        n_sets = harness.n_sets_for(nbytes)
        As = [torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn) for _ in range(n_sets)]
        Bs = [torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn) for _ in range(n_sets)]
        sa, sb = torch.ones(1, 1, device="cuda"), torch.ones(1, 1, device="cuda")
        sa0, sb0 = sa.reshape(()), sb.reshape(())
        flat = [torch.empty(nbytes, device="cuda", dtype=torch.uint8) for _ in range(n_sets)]
        flat2 = [torch.empty_like(f) for f in flat]

        def peer(a, b):
            return torch._scaled_mm(a, b.t(), scale_a=sa0, scale_b=sb0, out_dtype=torch.bfloat16)

        compiled = harness.compiled(peer)
        row = harness.measure(w["name"], f"{m}x{n}x{k}", torch.float8_e4m3fn, nbytes, n_sets, {
            "ours": lambda i: (lambda: ops.gemm_fp8_fwd(As[i], Bs[i], sa, sb, None, target=target)),
            "eager": lambda i: (lambda: peer(As[i], Bs[i])),
            "compile": lambda i: (lambda: compiled(As[i], Bs[i])),
            "copy": lambda i: (lambda: flat2[i].copy_(flat[i])),
        })
        row["op"], row["tflops"] = "GemmFp8FwdOp", 2 * m * n * k / (row["ours_us"] * 1e-6) / 1e12
        rows.append(row)
        del As, Bs, flat, flat2
    return rows


def fp8_block_rows(quick: bool) -> list[dict]:
    """GemmFp8FwdOp's per-128-block workloads on the nvrtc target. Eager is the formula a user writes
    without a block-scaled kernel (operands scaled in float32, then torch.matmul); compile fuses it."""
    rows = []
    ws = [w for w in harness.manifest_workloads("gemm", "GemmFp8FwdOp") if w["scale_a"] != [1, 1]]
    for w in ws[: 2 if quick else None]:
        (m, k), (n, _) = w["a"], w["b"]
        blocks = (k + 127) // 128
        nbytes = m * k + n * k + 4 * (m + n) * blocks + 2 * m * n
        n_sets = harness.n_sets_for(nbytes)
        As = [torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn) for _ in range(n_sets)]
        Bs = [torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn) for _ in range(n_sets)]
        sa, sb = torch.rand(m, blocks, device="cuda") + 0.5, torch.rand(n, blocks, device="cuda") + 0.5
        flat = [torch.empty(nbytes, device="cuda", dtype=torch.uint8) for _ in range(n_sets)]
        flat2 = [torch.empty_like(f) for f in flat]

        def peer(a, b):
            per_k = lambda s: s.repeat_interleave(128, 1)[:, :k]  # noqa: E731
            return torch.matmul(a.float() * per_k(sa), (b.float() * per_k(sb)).t()).to(torch.bfloat16)

        compiled = harness.compiled(peer)
        row = harness.measure(w["name"], f"{m}x{n}x{k}/b128", torch.float8_e4m3fn, nbytes, n_sets, {
            "ours": lambda i: (lambda: ops.gemm_fp8_fwd(As[i], Bs[i], sa, sb, None, target="nvrtc")),
            "eager": lambda i: (lambda: peer(As[i], Bs[i])),
            "compile": lambda i: (lambda: compiled(As[i], Bs[i])),
            "copy": lambda i: (lambda: flat2[i].copy_(flat[i])),
        })
        row["op"], row["tflops"] = "GemmFp8FwdOp", 2 * m * n * k / (row["ours_us"] * 1e-6) / 1e12
        rows.append(row)
        del As, Bs, flat, flat2
    return rows


# Prefill shapes (TileOPs lists decode workloads only): a Llama-70B-like projection and an MLP's up.
W4A16_PREFILL = [{"name": "prefill-2k-8192x8192", "activation": [2048, 8192], "packed_weight": [8192, 4096],
                  "weight_scale": [8192, 64], "dtypes": ["float16", "bfloat16"]},
                 {"name": "prefill-4k-28672x8192", "activation": [4096, 8192], "packed_weight": [28672, 4096],
                  "weight_scale": [28672, 64], "dtypes": ["float16"]}]


def w4a16_rows(quick: bool, prefill: bool = False) -> list[dict]:
    """GemmW4A16FwdOp: the manifest's decode workloads on the nvrtc target, or (prefill) the shapes
    above on the cublaslt target. Eager is what a user without a W4A16 kernel writes: the weight
    dequantized by the op's formula, then torch.matmul; compile is Inductor's fusion of it."""
    rows, target = [], "cublaslt" if prefill else "nvrtc"
    workloads = W4A16_PREFILL if prefill else [
        w for w in harness.manifest_workloads("gemm", "GemmW4A16FwdOp") if w["name"].startswith("decode")]
    for w in workloads[: 1 if quick and prefill else 2 if quick else None]:
        (m, k), (n, kh), (_, groups) = w["activation"], w["packed_weight"], w["weight_scale"]
        group = k // groups
        for dname in w["dtypes"]:
            dtype = harness.DTYPES[dname]
            nbytes = (m * k + m * n) * dtype.itemsize + n * kh + 5 * n * groups
            n_sets = harness.n_sets_for(nbytes)
            Xs = [torch.randn(m, k, device="cuda", dtype=dtype) for _ in range(n_sets)]
            Ws = [torch.randint(0, 256, (n, kh), device="cuda", dtype=torch.uint8) for _ in range(n_sets)]
            Ss = [torch.rand(n, groups, device="cuda") * 0.01 for _ in range(n_sets)]
            Zs = [torch.randint(0, 16, (n, groups), device="cuda", dtype=torch.uint8) for _ in range(n_sets)]
            flat = [torch.empty(nbytes, device="cuda", dtype=torch.uint8) for _ in range(n_sets)]
            flat2 = [torch.empty_like(f) for f in flat]

            def peer(x, packed, scale, zero):
                q = torch.stack((packed & 15, packed >> 4), -1).reshape(n, k).float()
                per_k = lambda t: t.repeat_interleave(group, 1)  # noqa: E731
                wt = ((q - per_k(zero).float()) * per_k(scale.to(dtype).float())).to(dtype)
                return torch.matmul(x, wt.t())

            compiled = harness.compiled(peer)
            row = harness.measure(w["name"], f"{m}x{n}x{k}/g{group}", dtype, nbytes, n_sets, {
                "ours": lambda i: (lambda: ops.gemm_w4_a16_fwd(Xs[i], Ws[i], Ss[i], Zs[i], group_size=group,
                                                                target=target)),
                "eager": lambda i: (lambda: peer(Xs[i], Ws[i], Ss[i], Zs[i])),
                "compile": lambda i: (lambda: compiled(Xs[i], Ws[i], Ss[i], Zs[i])),
                "copy": lambda i: (lambda: flat2[i].copy_(flat[i])),
            })
            row["op"], row["tflops"] = "GemmW4A16FwdOp", 2 * m * n * k / (row["ours_us"] * 1e-6) / 1e12
            rows.append(row)
            del Xs, Ws, Ss, Zs, flat, flat2
    return rows


def grouped_rows(quick: bool) -> list[dict]:
    """GroupedGemmFwdOp on the cublaslt target beside a loop of torch.matmul over the groups (what a
    user writes with the sizes on the host). The op reads its sizes on the host, so the row is timed on
    the stream (host time included), not in a CUDA graph. Sizes: an even split and a skewed one."""
    rows = []
    for w in harness.manifest_workloads("gemm", "GroupedGemmFwdOp")[: 1 if quick else None]:
        (s, k), (g, b1, b2) = w["a"], w["b"]
        tb = w.get("params", {}).get("transpose_b", True)
        n = b1 if tb else b2
        skew = [max(0, int(s * 0.5 ** (i + 1))) for i in range(g)]
        skew[0] += s - sum(skew)
        for split, sizes in (("even", [s // g] * g), ("skewed", skew)):
            offsets = [sum(sizes[:i]) for i in range(g)]
            sz = torch.tensor(sizes, dtype=torch.int32, device="cuda")
            off = torch.tensor(offsets, dtype=torch.int32, device="cuda")
            for dname in w["dtypes"][:1] if quick else w["dtypes"]:
                dtype = harness.DTYPES[dname]
                nbytes = (s * k + g * b1 * b2 + s * n) * dtype.itemsize
                n_sets = 2
                As = [torch.randn(s, k, device="cuda", dtype=dtype) for _ in range(n_sets)]
                Bs = [torch.randn(g, b1, b2, device="cuda", dtype=dtype) for _ in range(n_sets)]
                flat = [torch.empty(nbytes // 2, device="cuda", dtype=torch.uint8) for _ in range(n_sets)]
                flat2 = [torch.empty_like(f) for f in flat]

                def loop(a, b):
                    out = torch.empty(s, n, device="cuda", dtype=dtype)
                    for i, (o, r) in enumerate(zip(offsets, sizes)):
                        if r:
                            torch.matmul(a[o:o + r], b[i].t() if tb else b[i], out=out[o:o + r])
                    return out

                row = harness.measure(f"{w['name']}-{split}", f"{s}x{n}x{k}/g{g}", dtype, nbytes, n_sets, {
                    "ours": lambda i: (lambda: ops.gemm_grouped_gemm_fwd(As[i], Bs[i], sz, off, None,
                                                                         transpose_b=tb, target="cublaslt")),
                    "eager": lambda i: (lambda: loop(As[i], Bs[i])),
                    "copy": lambda i: (lambda: flat2[i].copy_(flat[i])),
                }, timer=harness.stream_time_us)
                row["op"], row["tflops"] = "GroupedGemmFwdOp", 2 * s * n * k / (row["ours_us"] * 1e-6) / 1e12
                rows.append(row)
                del As, Bs, flat, flat2
    return rows


def host_rows(target: str) -> dict:
    """Host µs per call of a tiny cached GEMM (the GPU time is negligible): ours against torch.matmul."""
    a = torch.randn(8, 64, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    t = harness.host_us_per_call({
        "tileops.gemm_fwd": lambda: ops.gemm_fwd(a, b, target=target),
        "torch.matmul": lambda: torch.matmul(a, b.t()),
        "GemmFwdOp()": (lambda op: (lambda: op(a, b)))(tileops.gemm.GemmFwdOp(target=target)),
    })
    return {**t, "ratio_op": t["tileops.gemm_fwd"] / t["torch.matmul"], "ratio_class": t["GemmFwdOp()"] / t["torch.matmul"]}


def print_rows(title: str, rows: list[dict]) -> None:
    print(f"\n{title} — {torch.cuda.get_device_properties(0).name}, torch {torch.__version__}; "
          "median µs per call, cold-ish L2 (CUDA graph replay)")
    print(f"{'workload':<26}{'shape':<22}{'dtype':<9}{'ours':>9}{'eager':>9}{'compile':>9}{'copy':>8}"
          f"{'TFLOPS':>8}{'vs eager':>10}{'vs best':>8}")
    for r in rows:
        cell = lambda k: f"{r[k]:>9.1f}" if k in r else f"{'-':>9}"  # noqa: E731
        print(f"{r['workload']:<26}{r['shape']:<22}{r['dtype']:<9}{r['ours_us']:>9.1f}{cell('eager_us')}"
              f"{cell('compile_us')}{r['copy_us']:>8.1f}{r['tflops']:>8.0f}{r['eager_us'] / r['ours_us']:>9.2f}x"
              f"{r['vs_best_peer']:>7.2f}x")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="the first few workloads only")
    ap.add_argument("--target", default="cublaslt", help="the tileops target timed as 'ours'")
    ap.add_argument("--ops", default="GemmFwdOp,BmmFwdOp,GemmFp8FwdOp,GemmFp8FwdOp/block,GemmW4A16FwdOp,"
                                     "GemmW4A16FwdOp/prefill,GroupedGemmFwdOp",
                    help="the op classes whose rows are timed (comma-separated)")
    args = ap.parse_args()
    tileops.load()
    tables = {"GemmFwdOp": lambda: gemm_rows(args.target, args.quick),
              "BmmFwdOp": lambda: bmm_rows(args.target, args.quick),
              "GemmFp8FwdOp": lambda: fp8_rows(args.target, args.quick),
              "GemmFp8FwdOp/block": lambda: fp8_block_rows(args.quick),
              "GemmW4A16FwdOp": lambda: w4a16_rows(args.quick),
              "GemmW4A16FwdOp/prefill": lambda: w4a16_rows(args.quick, prefill=True),
              "GroupedGemmFwdOp": lambda: grouped_rows(args.quick)}
    rows = {name: tables[name]() if name in args.ops.split(",") else [] for name in tables}
    host = host_rows(args.target) if "GemmFwdOp" in args.ops.split(",") else {}
    harness.write_json(args.json, {"device": torch.cuda.get_device_properties(0).name, "torch": torch.__version__,
                                   "target": args.target, "kernels": rows, "host_us": host})
    print_rows(f"GemmFwdOp (target {args.target}) beside torch.matmul", rows["GemmFwdOp"])
    print_rows(f"BmmFwdOp (target {args.target}) beside torch.bmm", rows["BmmFwdOp"])
    print_rows(f"GemmFp8FwdOp per-tensor (target {args.target}) beside torch._scaled_mm", rows["GemmFp8FwdOp"])
    print_rows("GemmFp8FwdOp per-128-block (target nvrtc) beside the float32 formula", rows["GemmFp8FwdOp/block"])
    print_rows("GemmW4A16FwdOp decode (target nvrtc) beside dequantize + torch.matmul", rows["GemmW4A16FwdOp"])
    print_rows("GemmW4A16FwdOp prefill (target cublaslt) beside dequantize + torch.matmul",
               rows["GemmW4A16FwdOp/prefill"])
    print_rows("GroupedGemmFwdOp (target cublaslt) beside a loop of torch.matmul; timed on the stream",
               rows["GroupedGemmFwdOp"])
    print("\nhost µs per call, tiny bf16 GEMM: " + ", ".join(f"{k} {v:.2f}" for k, v in host.items()))


if __name__ == "__main__":
    main()
