"""Compare the machine code (SASS) of every workload kernel between two builds, without a GPU: a refactor
of kernel sources that must not change what runs (names, includes, shared enums) is shown to compile to
the same instructions, kernel by kernel.

    python3 scripts/debug/sass_diff.py snapshot /tmp/sass-before    # the build as it is now
    ... change the kernel sources, rebuild (ninja -C build tileops tileops-warmup) ...
    python3 scripts/debug/sass_diff.py snapshot /tmp/sass-after
    python3 scripts/debug/sass_diff.py compare /tmp/sass-before /tmp/sass-after

`snapshot` compiles the kernels of the manifests' workloads (python -m tileops.warmup --workloads) for
each --device (default h200 and a100: sm_90a and sm_80) and writes one <kernel>.sass a kernel: nvdisasm's
listing without addresses and encodings. With --layouts it also plans the elementwise workloads with one
input at a time transposed, broadcast along its rows or read every other element, so the engine's tiled,
strided and vectorised-strided kernels are compared too (contiguous workloads plan none of them). `compare` exits 1 when a kernel's instructions differ or a
kernel is in one snapshot only. nvdisasm: --nvdisasm, else on PATH, else the pip package
nvidia-cuda-nvdisasm (pip install nvidia-cuda-nvdisasm).
"""
from __future__ import annotations

import argparse
import difflib
import glob
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# src/jit/disk_cache.cpp: magic[8] | u32 format | u32 kind | u32 nvrtc | u32 name_len | u64 image_len |
# name | image | tag[32]
HEADER = struct.Struct("<8sIIIIQ")
MAGIC = b"TOPSCUBN"


def cubin_image(data: bytes, where: str) -> bytes:
    """The ELF image inside a disk-cache file."""
    if len(data) < HEADER.size or data[:8] != MAGIC:
        raise ValueError(f"{where}: not a tileops kernel cache file")
    *_, name_len, image_len = HEADER.unpack_from(data)
    start = HEADER.size + name_len
    image = data[start:start + image_len]
    if len(image) != image_len or image[:4] != b"\x7fELF":
        raise ValueError(f"{where}: truncated or not an ELF image")
    return image


# An address comment, an encoding comment, or a label numbered by position.
NOISE = re.compile(r"/\*[0-9a-f]{4,}\*/|/\* 0x[0-9a-f]+ \*/")
# A mangled symbol (the kernel's own name spells its template arguments, which a refactor may rename)
# and a slot of constant bank 4 (the module's table of global addresses, filled when it loads).
SYMBOL = re.compile(r"_Z[A-Za-z0-9_]+")
GLOBAL_SLOT = re.compile(r"c\[0x4\]\[0x[0-9a-f]+\]")


def normalized(listing: str) -> str:
    """The instructions and directives of an nvdisasm listing, without addresses, encodings, mangled
    names and the slots of global addresses."""
    lines = (GLOBAL_SLOT.sub("c[0x4][global]", SYMBOL.sub("<symbol>", NOISE.sub("", line))).strip()
             for line in listing.splitlines())
    return "\n".join(line for line in lines if line) + "\n"


def kernel_name(path: str) -> str:
    """<spec name>-<disk key>.cubin -> <spec name>."""
    return os.path.basename(path).rsplit("-", 1)[0]


def find_nvdisasm(given: str | None) -> str:
    if given:
        return given
    found = shutil.which("nvdisasm")
    if found:
        return found
    import importlib.util
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations if spec else []):
        candidate = os.path.join(base, "cu13", "bin", "nvdisasm")
        if os.path.isfile(candidate):
            return candidate
    sys.exit("sass_diff: nvdisasm not found; pip install nvidia-cuda-nvdisasm, or pass --nvdisasm")


def layout_variants(shape: list[int], dtype):
    """The same logical tensor in three other layouts: transposed (the last two dims' strides swapped),
    one row broadcast over the others, every other element of a wider buffer."""
    import torch
    if len(shape) < 2 or min(shape) < 2:
        return
    yield torch.empty(shape[:-2] + [shape[-1], shape[-2]], dtype=dtype).transpose(-1, -2)
    yield torch.empty(shape[-1], dtype=dtype).expand(shape)
    yield torch.empty(shape[:-1] + [2 * shape[-1]], dtype=dtype)[..., ::2]


def plan_layouts(devices: list[str], ops: list[str]) -> list[str]:
    """Record lines of the kernels the elementwise workloads plan with each input in each layout of
    layout_variants (the other inputs contiguous), on each device."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import torch
    import tileops
    from tileops import warmup
    elementwise = {e["class"] for e in tileops.op_table() if e["elementwise"] and e["serving"]["cuda"] == "nvrtc"}
    calls = [c for c in warmup.workload_calls(tuple(ops)) if c["op_class"] in elementwise]
    lib, lines = warmup._lib(), []
    for device in devices:
        err = lib.tileops_begin_offline_plan(device.encode()).decode()
        if err:
            raise ValueError(f"sass_diff: --device {device}: {err}")
        try:
            with torch.no_grad():
                for c in calls:
                    for k, a in enumerate(c["args"]):
                        if "shape" not in a:
                            continue
                        for variant in layout_variants(a["shape"], getattr(torch, a["dtype"])):
                            args = [variant if j == k else warmup._arg(b) for j, b in enumerate(c["args"])]
                            try:
                                getattr(torch.ops.tileops, c["operator"])(*args)
                            except RuntimeError:
                                pass  # a layout the op refuses (an input it writes, say): no kernel
        finally:
            planned = lib.tileops_end_offline_plan().decode()
        lines += [ln for ln in planned.splitlines() if ln not in lines]
    return lines


def snapshot(out: str, devices: list[str], ops: list[str], nvdisasm: str, layouts: bool = False) -> int:
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sass-diff-") as cache:
        cmd = [sys.executable, "-m", "tileops.warmup", "--workloads", "--cache-dir", cache]
        for d in devices:
            cmd += ["--device", d]
        for o in ops:
            cmd += ["--op", o]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.path.join(ROOT, "python"),
                                                                        os.environ.get("PYTHONPATH")])))
        if subprocess.call(cmd, env=env) != 0:
            return 1
        if layouts:
            record = os.path.join(cache, "layouts.rec")
            with open(record, "w") as f:
                f.writelines(ln + "\n" for ln in plan_layouts(devices, ops))
            from tileops import warmup
            if warmup.run(record, cache) != 0:
                return 1
        files = sorted(glob.glob(os.path.join(cache, "*.cubin")))
        for path in files:
            with open(path, "rb") as f:
                image = cubin_image(f.read(), path)
            elf = os.path.join(cache, "image.elf")
            with open(elf, "wb") as f:
                f.write(image)
            listing = subprocess.run([nvdisasm, "-c", elf], capture_output=True, text=True, check=True).stdout
            with open(os.path.join(out, kernel_name(path) + ".sass"), "w") as f:
                f.write(normalized(listing))
    print(f"sass_diff: {len(files)} kernels -> {out}")
    return 0


def compare(a: str, b: str, show: int = 40) -> int:
    names_a = {os.path.basename(p) for p in glob.glob(os.path.join(a, "*.sass"))}
    names_b = {os.path.basename(p) for p in glob.glob(os.path.join(b, "*.sass"))}
    differ = []
    for name in sorted(names_a & names_b):
        with open(os.path.join(a, name)) as fa, open(os.path.join(b, name)) as fb:
            la, lb = fa.read().splitlines(), fb.read().splitlines()
        if la != lb:
            differ.append(name)
            diff = list(difflib.unified_diff(la, lb, f"{a}/{name}", f"{b}/{name}", lineterm="", n=1))
            print("\n".join(diff[:show]) + ("\n..." if len(diff) > show else ""))
    only = sorted(names_a ^ names_b)
    for name in only:
        print(f"only in {a if name in names_a else b}: {name}")
    same = len(names_a & names_b) - len(differ)
    print(f"sass_diff: {same} kernels identical, {len(differ)} differ, {len(only)} in one snapshot only")
    return 1 if differ or only else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("snapshot", help="SASS of the workload kernels of the current build")
    s.add_argument("out")
    s.add_argument("--device", action="append", default=[], help="named device (default: h200 and a100)")
    s.add_argument("--op", action="append", default=[], help="only this op's workloads (repeatable)")
    s.add_argument("--nvdisasm")
    s.add_argument("--layouts", action="store_true", help="also the elementwise workloads in other layouts")
    c = sub.add_parser("compare", help="exit 1 where two snapshots differ")
    c.add_argument("a")
    c.add_argument("b")
    args = p.parse_args(argv)
    if args.cmd == "snapshot":
        return snapshot(args.out, args.device or ["h200", "a100"], args.op, find_nvdisasm(args.nvdisasm), args.layouts)
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
