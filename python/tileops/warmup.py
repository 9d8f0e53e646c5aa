"""Offline kernel warm-up for deployment images, without a GPU (NVRTC only).

From the manifests' workloads, for named devices or architectures (the plan depends on a device's
SM count and shared memory: a named device gives them, an arch gives its usual device's):

    python -m tileops.warmup --workloads --device h200 --cache-dir /opt/tileops-kernels
    TILEOPS_CACHE_DIR_READONLY=/opt/tileops-kernels python serve.py   # workload shapes: 0 compiles

From a record of a real run (any shapes it met):

    TILEOPS_RECORD_KERNELS=kernels.rec python serve.py          # a real run records what it builds
    python -m tileops.warmup --record kernels.rec --cache-dir /opt/tileops-kernels [--arch sm_90a]

Runs the ``tileops-warmup`` program built beside the library, with the torch wheel's NVRTC. The
runtime uses the image's CUBINs whatever its own NVRTC version (finding them never loads NVRTC); its
CUDA driver must accept CUBINs of the warm-up's CUDA release (a driver at least as new).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from . import library_path, load, op_table

__all__ = ["program_path", "run", "workload_calls", "plan_workloads", "run_workloads", "main"]

PROGRAM = "tileops-warmup"


def program_path() -> str:
    """The tileops-warmup program: beside libtileops.so, in the package's bin/, or on PATH."""
    lib_dir = Path(library_path()).parent
    for candidate in (lib_dir / PROGRAM, Path(__file__).resolve().parent / "bin" / PROGRAM):
        if candidate.is_file():
            return str(candidate)
    found = shutil.which(PROGRAM)
    if found:
        return found
    raise FileNotFoundError(f"tileops: {PROGRAM} not found beside {lib_dir} or on PATH; build it with scripts/setup.sh")


def _nvrtc_dirs() -> list[str]:
    """Where the torch wheel keeps libnvrtc."""
    site = Path(torch.__file__).resolve().parent.parent
    return [str(d) for d in (site / "nvidia" / "cu13" / "lib", site / "nvidia" / "cuda_nvrtc" / "lib") if d.is_dir()]


def run(record: str, cache_dir: str, archs: tuple[str, ...] = (), jobs: int | None = None) -> int:
    """Compiles every kernel of `record` for `archs` (all recorded ones when empty) into `cache_dir`;
    returns the program's exit status (0: every kernel is there)."""
    cmd = [program_path(), "--record", record, "--cache-dir", cache_dir]
    for a in archs:
        cmd += ["--arch", a]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    for d in _nvrtc_dirs():
        cmd += ["--nvrtc-dir", d]
    return subprocess.call(cmd)


def _lib() -> ctypes.CDLL:
    lib = load()
    for name in ("tileops_workload_calls_json", "tileops_begin_offline_plan", "tileops_end_offline_plan"):
        getattr(lib, name).restype = ctypes.c_char_p
    lib.tileops_begin_offline_plan.argtypes = [ctypes.c_char_p]
    return lib


def workload_calls(ops: tuple[str, ...] = ()) -> list[dict]:
    """The manifests' workloads as operator calls (generated into the library), of the op classes or
    names in `ops` (every op when empty). Raises ValueError naming the known ops for an unknown one."""
    calls = json.loads(_lib().tileops_workload_calls_json().decode())
    names = {c["op_class"]: c["op_class"] for c in calls}
    names.update({o["name"]: o["class"] for o in json.loads(_lib().tileops_op_table_json().decode())
                  if o["class"] in names})
    unknown = [o for o in ops if o not in names]
    if unknown:
        raise ValueError(f"tileops.warmup: no workloads for op {', '.join(unknown)} "
                         f"(ops with workloads: {', '.join(sorted(set(names.values())))})")
    wanted = {names[o] for o in ops}
    return [c for c in calls if not wanted or c["op_class"] in wanted]


def _arg(a: dict):
    if "shape" in a:  # CPU memory that is never touched: the plan reads shapes, dtypes and alignment
        return torch.empty(a["shape"], dtype=getattr(torch, a["dtype"]))
    if "device" in a:
        return torch.device("cpu")
    if "dtype" in a:
        return getattr(torch, a["dtype"])
    return a["value"]


def plan_workloads(devices: tuple[str, ...], ops: tuple[str, ...] = ()) -> list[str]:
    """Record lines (TILEOPS_RECORD_KERNELS format) of the kernels the workload calls of `ops` build
    on each named device or arch: each call goes through the op's checks with CPU tensors, and the
    nvrtc target plans it for that device without one. Raises ValueError for an unknown name."""
    lib, calls, lines = _lib(), workload_calls(ops), []
    # Ops that CUDA serves through the reference (ATen: no kernel of ours, or only a pending one) have
    # nothing to build ahead.
    ours = {e["class"] for e in op_table() if e["serving"]["cuda"] == "nvrtc"}
    skipped = sorted({c["op_class"] for c in calls} - ours)
    if ops and skipped:
        raise ValueError(f"tileops.warmup: {', '.join(skipped)} run on CUDA through the reference target (ATen): "
                         "no kernel to build ahead")
    calls = [c for c in calls if c["op_class"] in ours]
    for device in devices:
        err = lib.tileops_begin_offline_plan(device.encode()).decode()
        if err:
            raise ValueError(f"tileops.warmup: --device/--arch {device}: {err}")
        try:
            with torch.no_grad():
                for c in calls:
                    try:
                        getattr(torch.ops.tileops, c["operator"])(*[_arg(a) for a in c["args"]])
                    except RuntimeError as e:
                        raise RuntimeError(f"tileops.warmup: workload '{c['workload']}' of {c['op_class']} "
                                           f"({c['dtype']}) on {device}: {e}") from e
        finally:
            planned = lib.tileops_end_offline_plan().decode()
        lines += [ln for ln in planned.splitlines() if ln not in lines]
    return lines


def run_workloads(devices: tuple[str, ...], cache_dir: str, ops: tuple[str, ...] = (), jobs: int | None = None) -> int:
    """Compiles the kernels of the manifests' workloads of `ops` (every op when empty) for each named
    device or arch into `cache_dir`; returns the program's exit status (0: every kernel is there)."""
    lines = plan_workloads(devices, ops)
    with tempfile.TemporaryDirectory(prefix="tileops-warmup-") as tmp:
        record = os.path.join(tmp, "workloads.rec")
        Path(record).write_text("".join(ln + "\n" for ln in lines))
        return run(record, cache_dir, (), jobs)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tileops.warmup", description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--workloads", action="store_true", help="the kernels of the manifests' workloads")
    src.add_argument("--record", help="the kernels of a file written by a run with TILEOPS_RECORD_KERNELS=FILE")
    p.add_argument("--cache-dir", required=True, help="image cache folder to fill (for TILEOPS_CACHE_DIR_READONLY)")
    p.add_argument("--device", action="append", default=[],
                   help="--workloads: plan for this device (h200, h100, a100, l40s, a10; repeatable)")
    p.add_argument("--arch", action="append", default=[],
                   help="--workloads: plan for this arch's usual device (sm_90a, sm_80, ...); "
                        "--record: only kernels recorded for it (repeatable)")
    p.add_argument("--op", action="append", default=[],
                   help="--workloads: only this op's workloads (op class or name, repeatable; default: every op)")
    p.add_argument("--jobs", type=int, default=None, help="NVRTC compilations at once (default: the CPU count)")
    args = p.parse_args(argv)
    if args.record:
        if args.device or args.op:
            p.error("--device and --op go with --workloads")
        return run(args.record, args.cache_dir, tuple(args.arch), args.jobs)
    targets = tuple(args.device + args.arch)
    if not targets:
        p.error("--workloads needs at least one --device or --arch")
    try:
        return run_workloads(targets, args.cache_dir, tuple(args.op), args.jobs)
    except (ValueError, RuntimeError) as e:
        print(e, file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1


if __name__ == "__main__":
    sys.exit(main())
