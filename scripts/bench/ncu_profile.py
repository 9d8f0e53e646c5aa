"""Nsight Compute profiles of the kernels behind the PERF.md misses, one workload a process.

    python3 scripts/bench/ncu_profile.py list                 # workload names
    python3 scripts/bench/ncu_profile.py run NAME             # one call inside cudaProfilerStart/Stop
    python3 scripts/bench/ncu_profile.py summarize DIR        # DIR/NAME.csv (ncu --page raw --csv) -> table

scripts/gpu_check.sh (PROFILE=1 or PROFILE="name ...") runs each workload under
`ncu --profile-from-start off --clock-control none --set full` (caches flushed before every pass:
cold L2, as the benchmarks) and prints the summary. A diagnostic, not a test.
"""
from __future__ import annotations

import csv
import os
import re
import sys

import torch

F = torch.nn.functional


def _bf16(*shape):
    return torch.randn(*shape, device="cuda", dtype=torch.bfloat16)


def _rope(neox):
    t, h, d = 8192, 32, 128
    q, k = _bf16(t, h, d), _bf16(t, h, d)
    pos = torch.randint(0, 8192, (t,), device="cuda")
    angle = torch.arange(8192, device="cuda", dtype=torch.float32)[:, None] * \
        (1.0 / 10000 ** (torch.arange(0, d, 2, device="cuda", dtype=torch.float32) / d))
    cache = torch.cat([angle.cos(), angle.sin()], -1)
    op = getattr(torch.ops.tileops, f"position_rope_{'neox' if neox else 'non_neox'}_fwd_writes_k_writes_q")
    return lambda: op(pos, q, k, cache)


def _norm(m, n, kind):
    x, w, b = _bf16(m, n), _bf16(n), _bf16(n)
    ops = torch.ops.tileops
    if kind == "rms":
        return lambda: ops.norm_rms_norm_fwd(x, w, [n])
    if kind == "ln":
        return lambda: ops.norm_layer_norm_fwd(x, w, b, [n])
    if kind == "fadd":
        r = _bf16(m, n)
        return lambda: ops.norm_fused_add_rms_norm_fwd_writes_residual(x, r, w, [n])
    dy = _bf16(m, n)
    if kind == "rms_bwd":
        return lambda: ops.norm_rms_norm_bwd(dy, x, w, [n])
    return lambda: ops.norm_layer_norm_bwd(dy, x, w, [n])


def _fused_add_compiled(m, n):
    """torch.compile of the fused add's reference (the peer that was faster at 2048x4096)."""
    x, r, w = _bf16(m, n), _bf16(m, n), _bf16(n)

    def ref(x, r, w):
        r = x + r
        return F.rms_norm(r, [n], w, torch.finfo(torch.float32).eps), r
    f = torch.compile(ref, fullgraph=True)
    return lambda: f(x, r, w)


def _unary(name, *params):
    x = _bf16(8192, 8192)
    op = getattr(torch.ops.tileops, f"activation_{name}_fwd")
    return lambda: op(x, *params)


def _spatial(kind, compiled):
    """InstanceNorm 8x128x32x32 and max_pool2d's resnet stem (f16), ours or torch.compile of torch's."""
    ops = torch.ops.tileops
    if kind == "instance_norm":
        x = torch.randn(8, 128, 32, 32, device="cuda", dtype=torch.float16)
        if compiled:
            f = torch.compile(lambda x: F.instance_norm(x), fullgraph=True)
            return lambda: f(x)
        return lambda: ops.norm_instance_norm_fwd(x, None, None, None, None)
    x = torch.randn(32, 64, 112, 112, device="cuda", dtype=torch.float16)
    if compiled:
        f = torch.compile(lambda x: F.max_pool2d(x, 3, 2, 1), fullgraph=True)
        return lambda: f(x)
    return lambda: ops.pool_max_pool2d_fwd(x, [3, 3], [2, 2], [1, 1], [1, 1], False)


# name -> factory of a zero-argument call (inputs allocated once)
WORKLOADS = {
    "rms_2048x8192": lambda: _norm(2048, 8192, "rms"),
    "rms_4096x16384": lambda: _norm(4096, 16384, "rms"),
    "rms_64x131072": lambda: _norm(64, 131072, "rms"),
    "fadd_2048x8192": lambda: _norm(2048, 8192, "fadd"),
    "ln_2048x4096": lambda: _norm(2048, 4096, "ln"),
    "ln_4096x16384": lambda: _norm(4096, 16384, "ln"),
    "rms_bwd_16384x4096": lambda: _norm(16384, 4096, "rms_bwd"),
    "ln_bwd_16384x4096": lambda: _norm(16384, 4096, "ln_bwd"),
    "rms_bwd_2048x4096": lambda: _norm(2048, 4096, "rms_bwd"),
    "ln_bwd_2048x4096": lambda: _norm(2048, 4096, "ln_bwd"),
    "fadd_2048x4096": lambda: _norm(2048, 4096, "fadd"),
    "fadd_compiled_2048x4096": lambda: _fused_add_compiled(2048, 4096),
    "softmax_4096x4096": lambda: (lambda x: lambda: torch.ops.tileops.reduction_softmax_fwd(x, -1))(_bf16(4096, 4096)),
    "softmax_8192x32000": lambda: (lambda x: lambda: torch.ops.tileops.reduction_softmax_fwd(x, -1))(_bf16(8192, 32000)),
    "softmax_4x128256": lambda: (lambda x: lambda: torch.ops.tileops.reduction_softmax_fwd(x, -1))(_bf16(4, 128256)),
    "gelu_8192x8192": lambda: _unary("gelu", "none"),
    "gelu_tanh_8192x8192": lambda: _unary("gelu", "tanh"),
    "silu_8192x8192": lambda: _unary("silu"),
    "rope_gptj": lambda: _rope(False),
    "rope_neox": lambda: _rope(True),
    "instance_norm_8x128x32x32": lambda: _spatial("instance_norm", False),
    "instance_norm_compiled_8x128x32x32": lambda: _spatial("instance_norm", True),
    "sum_columns_8192x4096": lambda: (lambda x: lambda: torch.ops.tileops.reduction_sum_fwd(x, [0]))(_bf16(8192, 4096)),
    "sum_all_8192x4096": lambda: (lambda x: lambda: torch.ops.tileops.reduction_sum_fwd(x, None))(_bf16(8192, 4096)),
    "sum_middle_64x1024x512": lambda: (lambda x: lambda: torch.ops.tileops.reduction_sum_fwd(x, [1]))(
        _bf16(64, 1024, 512)),
    "argmax_columns_8192x4096": lambda: (lambda x: lambda: torch.ops.tileops.reduction_argmax_fwd(x, 0))(
        _bf16(8192, 4096)),
    "argmax_rows_8192x4096": lambda: (lambda x: lambda: torch.ops.tileops.reduction_argmax_fwd(x, 1))(
        _bf16(8192, 4096)),
    "any_columns_bool_16384x4096": lambda: (lambda x: lambda: torch.ops.tileops.reduction_any_fwd(x, [0]))(
        torch.rand(16384, 4096, device="cuda") < 0.5),
    "log_sum_exp_rows_8192x4096": lambda: (lambda x: lambda: torch.ops.tileops.reduction_log_sum_exp_fwd(x, [1]))(
        _bf16(8192, 4096)),
    "max_pool2d_resnet_stem": lambda: _spatial("max_pool2d", False),
    "max_pool2d_compiled_resnet_stem": lambda: _spatial("max_pool2d", True),
}

# (column header, raw metric name, scale): what the summary prints per kernel.
# ncu's raw page reports in display units (us, Mbyte, %) with the CSV's second row naming them.
# DRAM writes undercount: what the kernel wrote may still sit in the 60 MB L2 when it ends.
COLUMNS = [
    ("us", "gpu__time_duration.sum", 1),
    ("mem%", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 1),
    ("rdMB", "dram__bytes_read.sum", 1),
    ("occ%", "sm__warps_active.avg.pct_of_peak_sustained_active", 1),
    ("regs", "launch__registers_per_thread", 1),
    ("blk", "launch__block_size", 1),
    ("grid", "launch__grid_size", 1),
    ("issue%", "smsp__issue_active.avg.pct_of_peak_sustained_active", 1),
    ("L2hit%", "lts__t_sector_hit_rate.pct", 1),
]
# To the columns' units (us, Mbyte); ncu picks a display unit per value.
UNIT_SCALE = {"nsecond": 1e-3, "msecond": 1e3, "byte": 1e-6, "Kbyte": 1e-3, "Gbyte": 1e3}
STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")


def run(name: str) -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import tileops

    tileops.load()
    call = WORKLOADS[name]()
    for _ in range(3):
        call()  # builds the kernels (NVRTC) outside the profiled range
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def _num(v: str) -> float | None:
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return None


def summarize(folder: str) -> None:
    head = f"{'workload':<20}{'kernel':<34}" + "".join(f"{c:>8}" for c, _, _ in COLUMNS) + "  top stalls (cycles/issue)"
    print(head)
    for name in WORKLOADS:
        path = os.path.join(folder, name + ".csv")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            rows = [r for r in csv.reader(f)]
        # ncu --page raw --csv: header, units, then one row per profiled kernel.
        if len(rows) < 3:
            print(f"{name:<20}(no kernel profiled)")
            continue
        hdr, units = rows[0], dict(zip(rows[0], rows[1]))
        for r in rows[2:]:
            rec = dict(zip(hdr, r))
            kname = re.sub(r"^(tileops::|at::native::|void )+", "", rec.get("Kernel Name", "?"))[:33]
            cells = []
            for _, metric, scale in COLUMNS:
                v = _num(rec.get(metric, ""))
                if v is not None:
                    v *= UNIT_SCALE.get(units.get(metric, ""), 1)
                cells.append(f"{v * scale:>8.1f}" if v is not None else f"{'-':>8}")
            # "selected" is the issuing warp itself, not a stall.
            stalls = sorted(((float(v.replace(",", "")), STALL.match(k).group(1)) for k, v in rec.items()
                             if STALL.match(k) and _num(v) is not None and STALL.match(k).group(1) != "selected"),
                            reverse=True)
            top = " ".join(f"{n}={v:.1f}" for v, n in stalls[:4])
            print(f"{name:<20}{kname:<34}" + "".join(cells) + "  " + top)


if __name__ == "__main__":
    if sys.argv[1] == "list":
        print(" ".join(WORKLOADS))
    elif sys.argv[1] == "run":
        run(sys.argv[2])
    else:
        summarize(sys.argv[2])
