"""Offline kernel warm-up for deployment images, without a GPU (NVRTC only).

    TILEOPS_RECORD_KERNELS=kernels.rec python serve.py          # a real run records what it builds
    python -m tileops.warmup --record kernels.rec --cache-dir /opt/tileops-kernels [--arch sm_90a]
    TILEOPS_CACHE_DIR_READONLY=/opt/tileops-kernels python serve.py   # finds every kernel: 0 compiles

Runs the ``tileops-warmup`` program built beside the library, with the torch wheel's NVRTC. The
runtime uses the image's CUBINs whatever its own NVRTC version (finding them never loads NVRTC); its
CUDA driver must accept CUBINs of the warm-up's CUDA release (a driver at least as new).
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import torch

from . import library_path

__all__ = ["program_path", "run", "main"]

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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tileops.warmup", description=__doc__.split("\n\n")[0])
    p.add_argument("--record", required=True, help="file written by a run with TILEOPS_RECORD_KERNELS=FILE")
    p.add_argument("--cache-dir", required=True, help="image cache folder to fill (for TILEOPS_CACHE_DIR_READONLY)")
    p.add_argument("--arch", action="append", default=[], help="only kernels recorded for this arch (repeatable)")
    p.add_argument("--jobs", type=int, default=None, help="NVRTC compilations at once (default: the CPU count)")
    args = p.parse_args(argv)
    return run(args.record, args.cache_dir, tuple(args.arch), args.jobs)


if __name__ == "__main__":
    sys.exit(main())
