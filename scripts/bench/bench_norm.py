"""Norm benchmarks on a GPU: our kernels beside torch eager (ref_api), torch.compile of it and a
device copy of the same bytes, in one run; plus host cost per eager call beside torch.add.
A benchmark, not a test.    python3 scripts/bench/bench_norm.py [--json out.json] [--quick] [--bwd-only] [--spatial-only]
"""
from __future__ import annotations

import argparse

import torch

import harness  # scripts/bench/harness.py
import peers  # scripts/bench/peers.py
import tileops


def rms_norm_rows(quick: bool) -> list[dict]:
    workloads = [("llama-8b-prefill", (2048, 4096), torch.float16)]
    if not quick:
        for wl in harness.manifest_workloads("norm", "RMSNormFwdOp"):
            for d in wl["dtypes"]:
                item = (wl["name"], tuple(wl["x"]), harness.DTYPES[d])
                if item not in workloads:
                    workloads.append(item)
    rows = []
    for name, (m, n), dtype in workloads:
        bytes_per_call = (2 * m * n + n) * dtype.itemsize
        n_sets = harness.n_sets_for(bytes_per_call)
        xs = [torch.randn(m, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
        ys = [torch.empty_like(x) for x in xs]
        w = torch.randn(n, device="cuda", dtype=dtype)
        compiled = harness.compiled(lambda x, w: torch.nn.functional.rms_norm(x, [n], w))
        rows.append(harness.measure(name, f"{m}x{n}", dtype, bytes_per_call, n_sets, {
            "ours": lambda i: (lambda: torch.ops.tileops.norm_rms_norm_fwd(xs[i], w, [n])),
            "eager": lambda i: (lambda: torch.nn.functional.rms_norm(xs[i], [n], w)),
            "compile": lambda i: (lambda: compiled(xs[i], w)),
            "copy": lambda i: (lambda: ys[i].copy_(xs[i])),
            **peers.rms_norm(xs, w, 1e-6),
        }))
        rows[-1]["op"] = "RMSNormFwdOp"
        del xs, ys
    return rows


def fused_and_layer_norm_rows() -> list[dict]:
    rows = []
    F = torch.nn.functional
    for wl in harness.manifest_workloads("norm", "FusedAddRMSNormFwdOp"):
        (m, n), dtype = wl["x"], harness.DTYPES[wl["dtypes"][0]]
        bytes_per_call = (4 * m * n + n) * dtype.itemsize  # read x and residual, write y and residual
        n_sets = harness.n_sets_for(bytes_per_call)
        xs = [torch.randn(m, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
        rs = [torch.randn(m, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
        big = [torch.empty(2 * m, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
        w = torch.randn(n, device="cuda", dtype=dtype)

        def eager(x, r, w):
            r.add_(x)
            return F.rms_norm(r, [n], w)

        compiled = harness.compiled(eager)
        rows.append(harness.measure("fused-add " + wl["name"], f"{m}x{n}", dtype, bytes_per_call, n_sets, {
            "ours": lambda i: (lambda: torch.ops.tileops.norm_fused_add_rms_norm_fwd_writes_residual(xs[i], rs[i], w, [n])),
            "eager": lambda i: (lambda: eager(xs[i], rs[i], w)),
            "compile": lambda i: (lambda: compiled(xs[i], rs[i], w)),
            "copy": lambda i: (lambda: big[i].copy_(big[(i + 1) % n_sets])),  # 2*M*N read + write
            **peers.fused_add_rms_norm(xs, rs, w, 1e-6),
        }))
        rows[-1]["op"] = "FusedAddRMSNormFwdOp"
        del xs, rs, big
    for wl in harness.manifest_workloads("norm", "LayerNormFwdOp"):
        (m, n), dtype = wl["x"], harness.DTYPES[wl["dtypes"][0]]
        bytes_per_call = (2 * m * n + 2 * n) * dtype.itemsize
        n_sets = harness.n_sets_for(bytes_per_call)
        xs = [torch.randn(m, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
        ys = [torch.empty_like(x) for x in xs]
        w, b = torch.randn(n, device="cuda", dtype=dtype), torch.randn(n, device="cuda", dtype=dtype)
        compiled = harness.compiled(lambda x, w, b: F.layer_norm(x, [n], w, b))
        rows.append(harness.measure("layer-norm " + wl["name"], f"{m}x{n}", dtype, bytes_per_call, n_sets, {
            "ours": lambda i: (lambda: torch.ops.tileops.norm_layer_norm_fwd(xs[i], w, b, [n])),
            "eager": lambda i: (lambda: F.layer_norm(xs[i], [n], w, b)),
            "compile": lambda i: (lambda: compiled(xs[i], w, b)),
            "copy": lambda i: (lambda: ys[i].copy_(xs[i])),
            **peers.layer_norm(xs, w, b, 1e-5),
        }))
        rows[-1]["op"] = "LayerNormFwdOp"
        del xs, ys
    return rows


def gemma_peers(xs, rs, w, eps: float) -> dict:
    """flashinfer's gemma_rmsnorm / gemma_fused_add_rmsnorm (in place, as ours _writes_residual) and
    Liger's RMSNorm with offset 1 in its 'gemma' casting mode; both take the weight in x's dtype."""
    out = {}
    if (fi := peers.flashinfer()) is not None:
        out["flashinfer"] = (lambda i: (lambda: fi.rmsnorm(torch.empty_like(xs[i]), xs[i], w, eps, True))) \
            if rs is None else (lambda i: (lambda: fi.fused_add_rmsnorm(xs[i], rs[i], w, eps, True)))
    if (lg := peers.liger()) is not None:
        out["liger"] = (lambda i: (lambda: lg.rms_norm.rms_norm_forward(xs[i], w, eps, 1.0, "gemma", None))) \
            if rs is None else \
            (lambda i: (lambda: lg.fused_add_rms_norm.fused_add_rms_norm_forward(xs[i], rs[i], w, eps, 1.0, "gemma")))
    return out


def serving_rows() -> list[dict]:
    """The serving forms beside the plain same-dtype rows: FusedAddRMSNormFwdOp with a float32 weight,
    GemmaRMSNormFwdOp and GemmaFusedAddRMSNormFwdOp (float32 weights, vLLM's GemmaRMSNorm written out
    as eager), the in-place fused branches. Bytes count the weight at its own width."""
    F = torch.nn.functional
    ops = torch.ops.tileops
    rows = []

    def gemma(x, w, n):
        return (F.rms_norm(x.float(), [n], None, 1e-6) * (1.0 + w.float())).to(x.dtype)

    def add_gemma(x, r, w, n):
        r.add_(x)
        return gemma(r, w, n)

    def add_rms(x, r, w, n):
        r.add_(x)
        return F.rms_norm(r, [n], w, 1e-6)

    cases = [(wl["name"], tuple(wl["x"]), harness.DTYPES[wl["dtypes"][0]], cls)
             for cls in ("GemmaRMSNormFwdOp", "GemmaFusedAddRMSNormFwdOp")
             for wl in harness.manifest_workloads("norm", cls)]
    cases += [(wl["name"], tuple(wl["x"]), harness.DTYPES[wl["dtypes"][0]], "FusedAddRMSNormFwdOp/f32w")
              for wl in harness.manifest_workloads("norm", "FusedAddRMSNormFwdOp")]
    for name, (m, n), dtype, cls in cases:
        fused = cls != "GemmaRMSNormFwdOp"
        bytes_per_call = (4 if fused else 2) * m * n * dtype.itemsize + 4 * n
        n_sets = harness.n_sets_for(bytes_per_call)
        xs = [torch.randn(m, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
        rs = [torch.randn(m, n, device="cuda", dtype=dtype) for _ in range(n_sets)] if fused else None
        big = [torch.empty((2 if fused else 1) * m, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
        w = torch.randn(n, device="cuda") * 0.5
        if cls == "GemmaRMSNormFwdOp":
            ours = lambda i: (lambda: ops.norm_gemma_rms_norm_fwd(xs[i], w, [n]))  # noqa: E731
            eager_fn = gemma
            eager = lambda i: (lambda: gemma(xs[i], w, n))  # noqa: E731
        else:
            op = ops.norm_gemma_fused_add_rms_norm_fwd_writes_residual if cls.startswith("Gemma") else \
                ops.norm_fused_add_rms_norm_fwd_writes_residual
            ours = lambda i, op=op: (lambda: op(xs[i], rs[i], w, [n], 1e-6))  # noqa: E731
            eager_fn = add_gemma if cls.startswith("Gemma") else add_rms
            eager = lambda i, f=eager_fn: (lambda: f(xs[i], rs[i], w, n))  # noqa: E731
        compiled = harness.compiled(eager_fn)
        comp = (lambda i: (lambda: compiled(xs[i], rs[i], w, n))) if fused else \
            (lambda i: (lambda: compiled(xs[i], w, n)))
        rows.append(harness.measure(f"{cls} {name}", f"{m}x{n}", dtype, bytes_per_call, n_sets, {
            "ours": ours, "eager": eager, "compile": comp,
            "copy": lambda i: (lambda: big[i].copy_(big[(i + 1) % n_sets])),
            **(gemma_peers(xs, rs, w.to(dtype), 1e-6) if cls.startswith("Gemma") else {}),
        }))
        rows[-1]["op"] = cls.split("/")[0]
        del xs, rs, big
    return rows


def quant_rows() -> list[dict]:
    """RMSNorm and fused add + RMSNorm with a float8_e4m3fn output, static (a per-tensor scale) and
    dynamic (a scale a row), the fused ones in place; eager is vLLM's formula written in torch. Bytes:
    x (and the residual read and written), q at one byte, the weight and the scales."""
    ops = torch.ops.tileops
    fp8 = torch.float8_e4m3fn
    rows = []

    def normed(s, w, n):
        sf = s.float()
        return ((sf * torch.rsqrt(sf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(s.dtype) * w).float()

    def static(x, w, scale, n):
        return (normed(x, w, n) * scale.reciprocal()).clamp(-448, 448).to(fp8)

    def dynamic(x, w, n):
        y = normed(x, w, n)
        sc = (y.abs().amax(-1, keepdim=True) / 448).clamp_min(1 / (448 * 512))
        return (y * sc.reciprocal()).clamp(-448, 448).to(fp8), sc

    def add_static(x, r, w, scale, n):
        r.add_(x)
        return static(r, w, scale, n)

    def add_dynamic(x, r, w, n):
        r.add_(x)
        return dynamic(r, w, n)

    for cls in ("RMSNormStaticQuantFwdOp", "FusedAddRMSNormStaticQuantFwdOp", "RMSNormDynamicQuantFwdOp",
                "FusedAddRMSNormDynamicQuantFwdOp"):
        for wl in harness.manifest_workloads("norm", cls):
            m, n = wl["x"]
            dtype = harness.DTYPES[wl["dtypes"][0]]
            fused, dyn = cls.startswith("Fused"), "Dynamic" in cls
            bytes_per_call = (3 if fused else 1) * m * n * dtype.itemsize + m * n + n * dtype.itemsize + 4 * m
            n_sets = harness.n_sets_for(bytes_per_call)
            xs = [torch.randn(m, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
            rs = [torch.randn(m, n, device="cuda", dtype=dtype) for _ in range(n_sets)] if fused else None
            big = [torch.empty(bytes_per_call // 2 + 16, device="cuda", dtype=torch.uint8) for _ in range(n_sets)]
            w = torch.rand(n, device="cuda", dtype=dtype) + 0.5
            scale = torch.tensor([0.01], device="cuda")
            if cls == "RMSNormStaticQuantFwdOp":
                ours = lambda i: (lambda: ops.norm_rms_norm_static_quant_fwd(xs[i], w, scale, [n]))  # noqa: E731
                fn, args = static, lambda i: (xs[i], w, scale, n)  # noqa: E731
            elif cls == "FusedAddRMSNormStaticQuantFwdOp":
                ours = lambda i: (lambda: ops.norm_fused_add_rms_norm_static_quant_fwd_writes_residual(  # noqa: E731
                    xs[i], rs[i], w, scale, [n]))
                fn, args = add_static, lambda i: (xs[i], rs[i], w, scale, n)  # noqa: E731
            elif cls == "RMSNormDynamicQuantFwdOp":
                ours = lambda i: (lambda: ops.norm_rms_norm_dynamic_quant_fwd(xs[i], w, None, [n]))  # noqa: E731
                fn, args = dynamic, lambda i: (xs[i], w, n)  # noqa: E731
            else:
                ours = lambda i: (lambda: ops.norm_fused_add_rms_norm_dynamic_quant_fwd_writes_residual(  # noqa: E731
                    xs[i], rs[i], w, None, [n]))
                fn, args = add_dynamic, lambda i: (xs[i], rs[i], w, n)  # noqa: E731
            compiled = harness.compiled(fn)
            rows.append(harness.measure(f"{cls} {wl['name']}", f"{m}x{n}", dtype, bytes_per_call, n_sets, {
                "ours": ours,
                "eager": lambda i, f=fn: (lambda: f(*args(i))),
                "compile": lambda i: (lambda: compiled(*args(i))),
                "copy": lambda i: (lambda: big[i].copy_(big[(i + 1) % n_sets])),
            }))
            rows[-1]["op"] = cls
            del xs, rs, big
    return rows


def backward_rows() -> list[dict]:
    """RMSNormBwdOp / LayerNormBwdOp (dx, dweight, dbias) beside torch's own backward kernels.

    eager: aten._fused_rms_norm_backward / aten.native_layer_norm_backward (what autograd of
    F.rms_norm / F.layer_norm runs on CUDA), fed the rstd (and mean) its forward saved, computed here
    outside the timing; where a torch build lacks _fused_rms_norm_backward, torch.autograd.grad of
    F.rms_norm (forward included). compile: torch.compile of the RMSNorm backward written out
    (the manifest's formula) / of aten.native_layer_norm_backward (inductor decomposes it). copy:
    dst.copy_(src) of 1.5*M*N elements, i.e. the op's 3*M*N elements of traffic (read x and dy,
    write dx); TB/s counts the manifest's roofline bytes.
    """
    F = torch.nn.functional
    aten = torch.ops.aten
    fused_rms = hasattr(aten, "_fused_rms_norm_backward") and hasattr(aten, "_fused_rms_norm")
    rows = []
    for op_class in ("RMSNormBwdOp", "LayerNormBwdOp"):
        layer = op_class == "LayerNormBwdOp"
        workloads = [(wl["name"], tuple(wl["x"]), harness.DTYPES[d])
                     for wl in harness.manifest_workloads("norm", op_class) for d in wl["dtypes"]]
        if ("llama-8b-prefill", (2048, 4096), torch.bfloat16) not in workloads:
            workloads.append(("llama-8b-prefill", (2048, 4096), torch.bfloat16))
        for name, (m, n), dtype in workloads:
            bytes_per_call = (3 * m * n + (3 if layer else 2) * n) * dtype.itemsize
            n_sets = harness.n_sets_for(bytes_per_call)
            xs = [torch.randn(m, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
            dys = [torch.randn(m, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
            w = torch.randn(n, device="cuda", dtype=dtype)
            b = torch.randn(n, device="cuda", dtype=dtype)
            src = [torch.empty(3 * m // 2, n, device="cuda", dtype=dtype) for _ in range(n_sets)]
            dst = [torch.empty_like(t) for t in src]
            if layer:
                stats = [torch.native_layer_norm(x, [n], w, b, 1e-5)[1:] for x in xs]  # (mean, rstd)
                mask = [True, True, True]

                def eager(i):
                    return lambda: aten.native_layer_norm_backward(dys[i], xs[i], [n], *stats[i], w, b, mask)

                compiled = harness.compiled(lambda dy, x, mean, rstd, w, b: aten.native_layer_norm_backward(
                    dy, x, [n], mean, rstd, w, b, [True, True, True]))

                def comp(i):
                    return lambda: compiled(dys[i], xs[i], *stats[i], w, b)

                def ours(i):
                    return lambda: torch.ops.tileops.norm_layer_norm_bwd(dys[i], xs[i], w, [n])
            else:
                eps = torch.finfo(torch.float32).eps
                if fused_rms:
                    rstds = [aten._fused_rms_norm(x, [n], w, eps)[1] for x in xs]

                    def eager(i):
                        return lambda: aten._fused_rms_norm_backward(dys[i], xs[i], [n], rstds[i], w, [True, True])
                else:
                    xg = [x.detach().requires_grad_() for x in xs]
                    wg = w.detach().requires_grad_()

                    def eager(i):
                        return lambda: torch.autograd.grad(F.rms_norm(xg[i], [n], wg, eps), (xg[i], wg), dys[i])

                def rms_bwd(dy, x, w):
                    xf, d = x.float(), dy.float()
                    g = d * w.float()
                    r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
                    dx = r * (g - xf * (r * r) * (g * xf).mean(-1, keepdim=True))
                    return dx.to(x.dtype), (d * xf * r).sum(0).to(x.dtype)

                compiled = harness.compiled(rms_bwd)

                def comp(i):
                    return lambda: compiled(dys[i], xs[i], w)

                def ours(i):
                    return lambda: torch.ops.tileops.norm_rms_norm_bwd(dys[i], xs[i], w, [n])
            label = ("layer-norm-bwd " if layer else "rms-norm-bwd ") + name
            rows.append(harness.measure(label, f"{m}x{n}", dtype, bytes_per_call, n_sets, {
                "ours": ours, "eager": eager, "compile": comp,
                "copy": lambda i: (lambda: dst[i].copy_(src[i])),
            }))
            rows[-1]["op"] = op_class
            del xs, dys, src, dst
    return rows


def spatial_norm_rows() -> list[dict]:
    """GroupNormFwdOp, InstanceNormFwdOp and BatchNormFwdOp on the manifests' workloads (TileOPs' CV
    shapes, affine on and off; instance norm with the input's stats or, eval, the running stats; batch
    norm training, which moves its running stats, or eval). Bytes: x read and y
    written, plus the weight and bias and the float32 running stats where the call passes them. Then
    BatchNormBwdOp's rows (batch_norm_bwd_rows)."""
    F = torch.nn.functional
    ops = torch.ops.tileops
    rows = []
    for cls in ("GroupNormFwdOp", "InstanceNormFwdOp", "BatchNormFwdOp"):
        for wl in harness.manifest_workloads("norm", cls):
            shape = tuple(wl["x"])
            c, numel = shape[1], 1
            for d in shape:
                numel *= d
            params = wl.get("params") or {}
            groups = params.get("num_groups", c)
            use_input_stats = params.get("use_input_stats", True)
            for d in wl["dtypes"]:
                dtype = harness.DTYPES[d]
                # An input the workload names as null is left out; weight and bias are there otherwise.
                w = None if "weight" in wl else torch.randn(c, device="cuda", dtype=dtype)
                b = None if "bias" in wl else torch.randn(c, device="cuda", dtype=dtype)
                training = params.get("training", False)
                # Running stats: instance norm in eval form; batch norm always (moved when training).
                stats = (cls == "InstanceNormFwdOp" and not use_input_stats) or cls == "BatchNormFwdOp"
                rm = torch.randn(c, device="cuda") if stats else None
                rv = torch.rand(c, device="cuda") + 0.5 if stats else None
                bytes_per_call = (2 * numel + c * ((w is not None) + (b is not None))) * dtype.itemsize + \
                    (8 * c if stats else 0)
                n_sets = harness.n_sets_for(bytes_per_call)
                xs = [torch.randn(shape, device="cuda", dtype=dtype) for _ in range(n_sets)]
                ys = [torch.empty_like(x) for x in xs]
                if cls == "GroupNormFwdOp":
                    fn = lambda x, w, b: F.group_norm(x, groups, w, b)  # noqa: E731
                    ours = lambda i, w=w, b=b: (lambda: ops.norm_group_norm_fwd(xs[i], w, b, groups))  # noqa: E731
                elif cls == "BatchNormFwdOp":
                    rm_e, rv_e = rm.clone(), rv.clone()  # eager moves its own copies
                    fn = lambda x, w, b: F.batch_norm(x, rm_e, rv_e, w, b, training)  # noqa: E731
                    bn = ops.norm_batch_norm_fwd_writes_running_mean_writes_running_var
                    ours = lambda i, w=w, b=b, bn=bn: (lambda: bn(xs[i], rm, rv, w, b, training))  # noqa: E731
                else:
                    # Eager writes back the running stats it is given: it gets copies.
                    rm_e = None if rm is None else rm.clone()
                    rv_e = None if rv is None else rv.clone()
                    fn = lambda x, w, b: F.instance_norm(x, rm_e, rv_e, w, b, use_input_stats)  # noqa: E731
                    ours = lambda i, w=w, b=b: (lambda: ops.norm_instance_norm_fwd(  # noqa: E731
                        xs[i], rm, rv, w, b, use_input_stats))
                compiled = harness.compiled(fn)
                label = {"GroupNormFwdOp": "group-norm ", "InstanceNormFwdOp": "instance-norm ",
                         "BatchNormFwdOp": "batch-norm "}[cls] + wl["name"]
                rows.append(harness.measure(label, "x".join(map(str, shape)), dtype, bytes_per_call, n_sets, {
                    "ours": ours,
                    "eager": lambda i, w=w, b=b, fn=fn: (lambda: fn(xs[i], w, b)),
                    "compile": lambda i, w=w, b=b, compiled=compiled: (lambda: compiled(xs[i], w, b)),
                    "copy": lambda i: (lambda: ys[i].copy_(xs[i])),
                }))
                rows[-1]["op"] = cls
                del xs, ys
    rows += batch_norm_bwd_rows()
    return rows


def batch_norm_bwd_rows() -> list[dict]:
    """BatchNormBwdOp on its workloads (BatchNormFwdOp's training shapes), from the batch statistics
    the forward saves. eager: aten.native_batch_norm_backward (what autograd of F.batch_norm in training
    calls), compile: torch.compile of the same call (inductor decomposes it). Bytes: dy and x read and
    dx written, the float32 weight, mean and rstd read and dweight and dbias written; copy moves as many
    bytes of dy's dtype."""
    aten = torch.ops.aten
    mask = [True, True, True]
    rows = []
    for wl in harness.manifest_workloads("norm", "BatchNormBwdOp"):
        shape = tuple(wl["x"])
        c, numel = shape[1], 1
        for d in shape:
            numel *= d
        for d in wl["dtypes"]:
            dtype = harness.DTYPES[d]
            bytes_per_call = 3 * numel * dtype.itemsize + 20 * c
            n_sets = harness.n_sets_for(bytes_per_call)
            xs = [torch.randn(shape, device="cuda", dtype=dtype) for _ in range(n_sets)]
            dys = [torch.randn(shape, device="cuda", dtype=dtype) for _ in range(n_sets)]
            w = torch.randn(c, device="cuda")
            stats = [torch.native_batch_norm(x, w, None, None, None, True, 0.1, 1e-5)[1:] for x in xs]  # mean, rstd
            src = [torch.empty(3 * numel // 2, device="cuda", dtype=dtype) for _ in range(n_sets)]
            dst = [torch.empty_like(t) for t in src]
            compiled = harness.compiled(lambda dy, x, w, mean, rstd: aten.native_batch_norm_backward(
                dy, x, w, None, None, mean, rstd, True, 1e-5, [True, True, True]))
            rows.append(harness.measure("batch-norm-bwd " + wl["name"], "x".join(map(str, shape)), dtype,
                                        bytes_per_call, n_sets, {
                "ours": lambda i, w=w: (lambda: torch.ops.tileops.norm_batch_norm_bwd(dys[i], xs[i], w, *stats[i])),
                "eager": lambda i, w=w: (lambda: aten.native_batch_norm_backward(
                    dys[i], xs[i], w, None, None, *stats[i], True, 1e-5, mask)),
                "compile": lambda i, w=w, compiled=compiled: (lambda: compiled(dys[i], xs[i], w, *stats[i])),
                "copy": lambda i: (lambda: dst[i].copy_(src[i])),
            }))
            rows[-1]["op"] = "BatchNormBwdOp"
            del xs, dys, src, dst
    return rows


def host_costs() -> dict:
    a = torch.randn(1, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(1, 64, device="cuda", dtype=torch.float16)
    w = torch.randn(64, device="cuda", dtype=torch.float16)
    from tileops.norm import RMSNormFwdOp
    op = RMSNormFwdOp(64)
    raw = torch.ops.tileops.norm_rms_norm_fwd.default
    raw_out = torch.ops.tileops.norm_rms_norm_fwd_out.default
    tileops_add = torch.ops.tileops.elementwise_add_fwd.default
    y = torch.empty_like(a)
    aten_add = torch.ops.aten.add.Tensor
    aten_rms = torch.ops.aten.rms_norm.default
    return harness.host_us_per_call({
        "torch.add": lambda: torch.add(a, b),
        # The same ATen op through torch.ops, the Python path every tileops op takes.
        "torch.ops.aten.add.Tensor": lambda: aten_add(a, b),
        # ATen's own RMSNorm through that path: the arguments' types of ours (Tensor?, SymInt[]).
        "torch.ops.aten.rms_norm.default": lambda: aten_rms(a, [64], w),
        "tileops op (torch.ops...default)": lambda: raw(a, w, [64]),
        "tileops op, out= given": lambda: raw_out(a, w, y, [64]),
        "tileops add (torch.ops...default)": lambda: tileops_add(a, b),
        "tileops Op class": lambda: op(a, w),
        "F.rms_norm eager": lambda: torch.nn.functional.rms_norm(a, [64], w),
    })


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="only 2048x4096 fp16")
    subsets = {  # --<name>-only: (rows, title)
        "bwd": (backward_rows, "RMSNormBwdOp and LayerNormBwdOp (dx, dweight, dbias)"),
        "spatial": (spatial_norm_rows, "GroupNormFwdOp, InstanceNormFwdOp, BatchNormFwdOp and BatchNormBwdOp"),
        "serving": (serving_rows, "Serving forms: float32 weights, Gemma (1 + w), fused in place"),
    }
    for name, (_, title) in subsets.items():
        ap.add_argument(f"--{name}-only", action="store_true", help=f"only {title}")
    args = ap.parse_args()
    tileops.load()
    for name, (make_rows, title) in subsets.items():
        if getattr(args, f"{name}_only"):
            subset = make_rows()
            harness.write_json(args.json, {"device": torch.cuda.get_device_properties(0).name,
                                           "torch": torch.__version__, "kernels": subset})
            harness.print_table(title, subset)
            return
    rows = rms_norm_rows(args.quick)
    other = [] if args.quick else fused_and_layer_norm_rows()
    serving = [] if args.quick else serving_rows()
    quant = [] if args.quick else quant_rows()
    bwd = [] if args.quick else backward_rows()
    spatial = [] if args.quick else spatial_norm_rows()
    host = host_costs()
    harness.write_json(args.json, {"device": torch.cuda.get_device_properties(0).name, "torch": torch.__version__,
                                   "kernels": rows + other + serving + quant + bwd + spatial, "host_us": host})
    harness.print_table("RMSNormFwdOp", rows)
    if other:
        harness.print_table("FusedAddRMSNormFwdOp (in place) and LayerNormFwdOp", other)
    if serving:
        harness.print_table(subsets["serving"][1], serving)
    if quant:
        harness.print_table("Quantised output: float8_e4m3fn, static and per-row scales, fused in place", quant)
    if bwd:
        harness.print_table(subsets["bwd"][1], bwd)
    if spatial:
        harness.print_table(subsets["spatial"][1], spatial)
    print("\nhost µs per eager call (1x64 fp16, median of 7x3000 calls):")
    for k, v in host.items():
        print(f"  {k:<36}{v:>7.2f} µs  ({v / host['torch.add']:.2f}x torch.add)")


if __name__ == "__main__":
    main()
