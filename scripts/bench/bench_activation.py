"""Activation benchmarks on a GPU: our kernels beside torch eager (ref_api), torch.compile of it and a
device copy of the same bytes (read x, write y), per manifest workload. A benchmark, not a test.
    python3 scripts/bench/bench_activation.py [--json out.json] [--quick] [--ops SigmoidFwdOp,...]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

import harness  # scripts/bench/harness.py
import peers  # scripts/bench/peers.py
import tileops

ops = torch.ops.tileops


def _gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


def _swiglu_oai(x, p):
    """vLLM's SwigluOAIAndMul.forward_native (gpt-oss), the eager peer."""
    alpha, limit = p.get("alpha", 1.702), p.get("limit", 7.0)
    gate, up = x[..., ::2].clamp(max=limit), x[..., 1::2].clamp(-limit, limit)
    return (up + 1) * (gate * torch.sigmoid(gate * alpha))


# class -> (our call(x, params), torch eager ref_api(x, params), gated?)
OPS = {
    "ReluFwdOp": (lambda x, p: ops.activation_relu_fwd(x), lambda x, p: torch.relu(x), False),
    "SiluFwdOp": (lambda x, p: ops.activation_silu_fwd(x), lambda x, p: F.silu(x), False),
    "GeluFwdOp": (lambda x, p: ops.activation_gelu_fwd(x, p.get("approximate", "none")),
                  lambda x, p: F.gelu(x, approximate=p.get("approximate", "none")), False),
    # Integer x gives float32 y: the copy it is compared with converts too (same bytes read and written).
    "SigmoidFwdOp": (lambda x, p: ops.activation_sigmoid_fwd(x), lambda x, p: torch.sigmoid(x), False),
    "SiluAndMulFwdOp": (lambda x, p: ops.activation_silu_and_mul_fwd(x),
                        lambda x, p: F.silu(x[..., : x.shape[-1] // 2]) * x[..., x.shape[-1] // 2:], True),
    "GeluAndMulFwdOp": (lambda x, p: ops.activation_gelu_and_mul_fwd(x),
                        lambda x, p: F.gelu(x[..., : x.shape[-1] // 2]) * x[..., x.shape[-1] // 2:], True),
    "GeluTanhAndMulFwdOp": (lambda x, p: ops.activation_gelu_tanh_and_mul_fwd(x),
                            lambda x, p: _gelu_tanh(x[..., : x.shape[-1] // 2]) * x[..., x.shape[-1] // 2:], True),
    "QuickGeluFwdOp": (lambda x, p: ops.activation_quick_gelu_fwd(x), lambda x, p: x * torch.sigmoid(1.702 * x), False),
    "MulAndSiluFwdOp": (lambda x, p: ops.activation_mul_and_silu_fwd(x),
                        lambda x, p: x[..., : x.shape[-1] // 2] * F.silu(x[..., x.shape[-1] // 2:]), True),
    "FatreluAndMulFwdOp": (lambda x, p: ops.activation_fatrelu_and_mul_fwd(x, p.get("threshold", 0.0)),
                           lambda x, p: F.threshold(x[..., : x.shape[-1] // 2], p.get("threshold", 0.0), 0.0)
                           * x[..., x.shape[-1] // 2:], True),
    "SwigluOAIAndMulFwdOp": (lambda x, p: ops.activation_swiglu_oai_and_mul_fwd(x, p.get("alpha", 1.702),
                                                                                 p.get("limit", 7.0)),
                             _swiglu_oai, True),
}


def rows_for(op_class: str, quick: bool) -> list[dict]:
    ours, eager, gated = OPS[op_class]
    rows = []
    for wl in harness.manifest_workloads("activation", op_class):
        params = wl.get("params", {})
        for d in wl["dtypes"][:1] if quick else wl["dtypes"]:
            dtype = harness.DTYPES[d]
            shape = tuple(wl["x"])
            numel = 1
            for s in shape:
                numel *= s
            out_numel = numel // 2 if gated else numel
            x0 = harness.random_tensor(shape, dtype)
            out_dtype = ours(x0, params).dtype  # x's, or float32 for SigmoidFwdOp on integer x
            bytes_per_call = numel * dtype.itemsize + out_numel * out_dtype.itemsize
            n_sets = harness.n_sets_for(bytes_per_call)
            xs = [x0] + [harness.random_tensor(shape, dtype) for _ in range(n_sets - 1)]
            # The copy moves the same bytes: unary, read numel elements of x's dtype and write numel of
            # y's; gated (read 2*N, write N), copy 1.5*N elements.
            srcs = [x.view(-1)[: 3 * out_numel // 2] if gated else x for x in xs]
            dsts = [torch.empty(s.numel(), device="cuda", dtype=out_dtype).view(s.shape) for s in srcs]
            compiled = harness.compiled(lambda x: eager(x, params))
            label = wl["name"] + ("" if not params else "-" + "-".join(str(v) for v in params.values()))
            rows.append(harness.measure(f"{label}", "x".join(map(str, shape)), dtype, bytes_per_call, n_sets, {
                "ours": lambda i: (lambda: ours(xs[i], params)),
                "eager": lambda i: (lambda: eager(xs[i], params)),
                "compile": lambda i: (lambda: compiled(xs[i])),
                "copy": lambda i: (lambda: dsts[i].copy_(srcs[i])),
                **(peers.silu_and_mul(xs) if op_class == "SiluAndMulFwdOp" and dtype != torch.float32 else {}),
            }))
            rows[-1]["op"] = op_class
            del x0, xs, srcs, dsts
            if quick:
                break
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="first workload and dtype of each op")
    ap.add_argument("--ops", help="comma-separated op classes (default: all)")
    args = ap.parse_args()
    tileops.load()
    report = {"device": torch.cuda.get_device_properties(0).name, "torch": torch.__version__, "kernels": []}
    for op_class in args.ops.split(",") if args.ops else OPS:
        rows = rows_for(op_class, args.quick)
        report["kernels"] += rows
        harness.print_table(op_class, rows)
    harness.write_json(args.json, report)


if __name__ == "__main__":
    main()
