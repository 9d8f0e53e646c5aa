"""Tuning sweep (not a test): times a few of our kernels beside a copy of the same bytes under the
tuning overrides in TILEOPS_TUNE="key=value,..." (read once per process, so run one process per
setting; --list-tune prints the keys, their ranges and what they set):
  default: cluster rows (RMSNorm 64x131072, softmax 4x128256 bf16: cluster_cta_bytes, cluster_vpt,
      cluster_max, staged_cluster_vpt) and the elementwise grid (Relu, Silu 8192x8192 bf16:
      act_ctas_per_sm); --cluster: the cluster rows alone, with the fused add beside them;
  --norm: row-per-CTA and staged rows (RMSNorm, LayerNorm, fused add, softmax: rms_vecs_per_thread,
      softmax_vecs_per_thread, staged_min_row_bytes (a huge value turns staging off), staged_row_vpt);
      --softmax: the softmax rows alone (4096x4096, 4096x16384, the vocabulary row 8192x32000);
  --bwd: RMSNormBwdOp / LayerNormBwdOp (dx and dweight[, dbias]: norm_bwd_*), beside a copy of the
      op's 3*M*N elements.
  --ew: the elementwise engine's contiguous loop (Abs, Exp, Selu 8192x8192 bf16, Add 8192x8192 and
      4x8192 with a fixed second operand: ew_unroll, ew_threads).
  --spatial: group / instance norm rows and batch norm eval (TileOPs' CV shapes, input stats with the
      affine and running stats without: gn_vecs_per_thread, gn_running_vecs_per_thread, gn_cta_threads).
  --reduce: the dim reductions over columns, a middle dim and all dims (sum, argmax, var, amax,
      logsumexp, any on 8192x4096 / 64x1024x512 bf16: reduce_cols_warps, reduce_ctas_per_sm,
      reduce_split_vecs, reduce_cols_split_rows, reduce_cols_vec).
    for b in 16384 32768; do TILEOPS_TUNE=cluster_cta_bytes=$b python3 scripts/bench/sweep.py; done
"""
from __future__ import annotations

import ctypes
import math
import os
import sys

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


def norm_rows(ops, softmax_only: bool = False) -> list[str]:
    out = []
    for m, n in ((2048, 4096), (2048, 8192), (4096, 16384)) if not softmax_only else ():
        w, b = torch.randn(n, device="cuda", dtype=torch.bfloat16), torch.randn(n, device="cuda", dtype=torch.bfloat16)
        out.append(time_vs_copy(f"rms {m}x{n}", m, n, lambda x: ops.norm_rms_norm_fwd(x, w, [n])))
        out.append(time_vs_copy(f"ln {m}x{n}", m, n, lambda x: ops.norm_layer_norm_fwd(x, w, b, [n])))
        # In place on a residual per input set (made at warm-up, before capture): 4 streams, so
        # copy/ours is over half the bytes.
        res: dict[int, torch.Tensor] = {}

        def residual(x):
            if x.data_ptr() not in res:
                res[x.data_ptr()] = torch.randn_like(x)
            return res[x.data_ptr()]
        out.append(time_vs_copy(f"fadd(2x bytes) {m}x{n}", m, n,
                                lambda x: ops.norm_fused_add_rms_norm_fwd_writes_residual(x, residual(x), w, [n])))
    out.append(time_vs_copy("softmax 4096x4096", 4096, 4096, lambda x: ops.reduction_softmax_fwd(x, -1)))
    out.append(time_vs_copy("softmax 4096x16384", 4096, 16384, lambda x: ops.reduction_softmax_fwd(x, -1)))
    out.append(time_vs_copy("softmax 8192x32000", 8192, 32000, lambda x: ops.reduction_softmax_fwd(x, -1)))
    out.append(time_vs_copy("log_softmax 4096x4096", 4096, 4096, lambda x: ops.reduction_log_softmax_fwd(x, -1)))
    return out


def bwd_rows(ops) -> list[str]:
    """The backward ops on rotating (x, dy) sets, beside a copy of their 3*M*N elements of traffic."""
    out = []
    dtype = torch.bfloat16
    for m, n in ((2048, 4096), (16384, 4096), (2048, 8192), (4096, 16384)):
        n_sets = harness.n_sets_for(3 * m * n * dtype.itemsize)
        xs = [torch.randn(m, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
        dys = [torch.randn(m, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
        src = [torch.empty(3 * m // 2, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
        dst = [torch.empty_like(t) for t in src]
        w = torch.randn(n, device="cuda", dtype=dtype)
        copy = harness.graph_time_us(lambda i: (lambda: dst[i].copy_(src[i])), n_sets)
        for name, op in (("rms_bwd", ops.norm_rms_norm_bwd), ("ln_bwd", ops.norm_layer_norm_bwd)):
            ours = harness.graph_time_us(lambda i: (lambda: op(dys[i], xs[i], w, [n])), n_sets)
            out.append(f"{name} {m}x{n} ours {ours:6.1f} µs copy {copy:5.1f} µs copy/ours {copy / ours:4.2f}")
        del xs, dys, src, dst
    return out


def ew_rows(ops) -> list[str]:
    out = [time_vs_copy(f"{name} 8192x8192", 8192, 8192, op) for name, op in
           (("abs", ops.elementwise_abs_fwd), ("exp", ops.elementwise_exp_fwd), ("selu", ops.elementwise_selu_fwd))]
    other = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)  # the same second operand each call
    out.append(time_vs_copy("add 8192x8192", 8192, 8192, lambda x: ops.elementwise_add_fwd(x, other)))
    small = torch.randn(4, 8192, device="cuda", dtype=torch.bfloat16)
    out.append(time_vs_copy("add 4x8192", 4, 8192, lambda x: ops.elementwise_add_fwd(x, small)))
    return out


def reduce_rows(ops) -> list[str]:
    out = []
    for name, op in (("sum", ops.reduction_sum_fwd), ("argmax", ops.reduction_argmax_fwd),
                     ("var", ops.reduction_var_fwd), ("amax", ops.reduction_amax_fwd),
                     ("logsumexp", ops.reduction_log_sum_exp_fwd), ("any", ops.reduction_any_fwd)):
        one = name == "argmax"  # int dim
        out.append(time_vs_copy(f"{name} cols 8192x4096", 8192, 4096, lambda x: op(x, 0 if one else [0])))
        out.append(time_vs_copy(f"{name} middle 64x1024x512", 8192, 4096,
                                lambda x: op(x.view(64, 1024, 512), 1 if one else [1])))
        if not one and name != "logsumexp":  # logsumexp takes dims
            out.append(time_vs_copy(f"{name} all 8192x4096", 8192, 4096, lambda x: op(x, None)))
    return out


def spatial_rows(ops) -> list[str]:
    """GroupNormFwdOp / InstanceNormFwdOp / BatchNormFwdOp (eval) on rotating inputs, beside a copy of x."""
    out = []
    cases = [("in-affine", (8, 128, 32, 32), torch.float16), ("in-affine", (8, 128, 32, 32), torch.bfloat16),
             ("in-affine", (4, 256, 28, 28), torch.float16), ("in-affine", (4, 64, 30, 30), torch.float16),
             ("in-running", (8, 128, 32, 32), torch.float16), ("in-running", (8, 128, 32, 32), torch.bfloat16),
             ("in-running", (4, 256, 28, 28), torch.float16), ("in-running", (4, 64, 30, 30), torch.float16),
             ("bn-eval", (4, 128, 32, 32), torch.float16), ("gn32-affine", (8, 128, 32, 32), torch.float16),
             ("gn32-affine", (4, 256, 28, 28), torch.float16), ("gn16-affine", (4, 128, 30, 30), torch.float16)]
    for name, shape, dtype in cases:
        c = shape[1]
        n_sets = harness.n_sets_for(2 * math.prod(shape) * dtype.itemsize)
        xs = [torch.randn(shape, device="cuda", dtype=dtype) for _ in range(n_sets)]
        ys = [torch.empty_like(x) for x in xs]
        w, b = torch.randn(c, device="cuda", dtype=dtype), torch.randn(c, device="cuda", dtype=dtype)
        rm, rv = torch.randn(c, device="cuda"), torch.rand(c, device="cuda") + 0.5
        if name == "in-affine":
            call = lambda x: ops.norm_instance_norm_fwd(x, None, None, w, b, True)  # noqa: E731
        elif name == "in-running":
            call = lambda x: ops.norm_instance_norm_fwd(x, rm, rv, None, None, False)  # noqa: E731
        elif name == "bn-eval":
            bn = ops.norm_batch_norm_fwd_writes_running_mean_writes_running_var
            call = lambda x, bn=bn: bn(x, rm, rv, w, b, False)  # noqa: E731
        else:
            groups = 32 if name.startswith("gn32") else 16
            call = lambda x, g=groups: ops.norm_group_norm_fwd(x, w, b, g)  # noqa: E731
        ours = harness.graph_time_us(lambda i: (lambda: call(xs[i])), n_sets)
        copy = harness.graph_time_us(lambda i: (lambda: ys[i].copy_(xs[i])), n_sets)
        out.append(f"{name} {'x'.join(map(str, shape))} {str(dtype)[6:]} ours {ours:5.2f} µs copy {copy:5.2f} µs "
                   f"copy/ours {copy / ours:4.2f}")
        del xs, ys
    return out


def main() -> None:
    lib = tileops.load()
    if "--list-tune" in sys.argv:
        lib.tileops_tuning_keys.restype = ctypes.c_char_p
        print(lib.tileops_tuning_keys().decode(), end="")
        return
    knobs = os.environ.get("TILEOPS_TUNE") or "defaults"
    ops = torch.ops.tileops
    if "--softmax" in sys.argv:
        print(f"[{knobs}] " + " | ".join(norm_rows(ops, softmax_only=True)))
        return
    if "--bwd" in sys.argv:
        print(f"[{knobs}]\n  " + "\n  ".join(bwd_rows(ops)))
        return
    if "--norm" in sys.argv:
        print(f"[{knobs}]\n  " + "\n  ".join(norm_rows(ops)))
        return
    if "--reduce" in sys.argv:
        print(f"[{knobs}]\n  " + "\n  ".join(reduce_rows(ops)))
        return
    if "--spatial" in sys.argv:
        print(f"[{knobs}]\n  " + "\n  ".join(spatial_rows(ops)))
        return
    if "--ew" in sys.argv:
        print(f"[{knobs}] " + " | ".join(ew_rows(ops)))
        return
    w = torch.randn(131072, device="cuda", dtype=torch.bfloat16)
    out = [time_vs_copy("rms 64x131072", 64, 131072, lambda x: ops.norm_rms_norm_fwd(x, w, [131072])),
           time_vs_copy("softmax 4x128256", 4, 128256, lambda x: ops.reduction_softmax_fwd(x, -1))]
    if "--cluster" in sys.argv:
        r = torch.randn(64, 131072, device="cuda", dtype=torch.bfloat16)  # one residual: L2-warm, a lower bound
        out.append(time_vs_copy("fadd 64x131072", 64, 131072,
                                lambda x: ops.norm_fused_add_rms_norm_fwd_writes_residual(x, r, w, [131072])))
    else:
        out += [time_vs_copy("relu 8192x8192", 8192, 8192, ops.activation_relu_fwd),
                time_vs_copy("silu 8192x8192", 8192, 8192, ops.activation_silu_fwd)]
    print(f"[{knobs}] " + " | ".join(out))


if __name__ == "__main__":
    main()
