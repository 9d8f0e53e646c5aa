"""python -m codegen --manifests manifests/*.yaml --kernels-root src/kernels --targets-root src/targets
--out build/generated"""
from __future__ import annotations

import argparse
import os
import sys

from . import emit_cpp, emit_docs, emit_kernels, emit_workloads
from .model import build_ops
from .parse import ManifestError, parse_file


def write_if_changed(path: str, text: str) -> bool:
    """Generated files are rewritten only when their content changes (keeps rebuilds incremental)."""
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return False
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    return True


def load_ops(manifest_paths: list[str], root: str | None = None):
    raws = []
    for p in sorted(manifest_paths):
        shown = os.path.relpath(p, root) if root else p
        raws.append(parse_file(p, shown))
    return build_ops(raws)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--manifests", nargs="+", required=True)
    ap.add_argument("--kernels-root", required=True)
    ap.add_argument("--targets-root", help="src/targets: its kernel lines fill OPS.md's cpu/cuda columns")
    ap.add_argument("--out", required=True)
    ap.add_argument("--registration-parts", type=int, default=1,
                    help="translation units the registration is cut into (registration_<k>.cpp)")
    args = ap.parse_args(argv)
    root = os.path.dirname(os.path.dirname(os.path.abspath(args.kernels_root)))  # repo root
    try:
        ops = load_ops(args.manifests, root)
        parts = emit_cpp.emit_registration_parts(ops, max(1, args.registration_parts))
        exprs = emit_cpp.emit_elementwise_exprs(ops)
        files = {f"tileops_generated/registration_{k}.cpp": text for k, text in enumerate(parts)}
        files.update({
            "tileops_generated/op_table.cpp": emit_cpp.emit_op_table(ops),
            "tileops_generated/ops.h": emit_cpp.emit_ops_header(ops),
            "tileops_generated/composite.h": emit_cpp.emit_composite_header(ops),
            "tileops_generated/callers.h": emit_cpp.emit_callers_header(ops),
            "tileops_generated/elementwise.h": emit_cpp.emit_elementwise_header(ops),
            # The elementwise expressions as functors (read by src/kernels/elementwise/op.cuh), embedded with
            # the kernel sources and written beside them for a reader.
            "kernels/elementwise/exprs.cuh": exprs,
            "tileops_generated/kernel_sources.cpp": emit_kernels.emit(
                emit_kernels.collect(args.kernels_root) + [("elementwise/exprs.cuh", exprs)]),
            "tileops_generated/workload_calls.cpp": emit_workloads.emit(ops),
            "docs/OPS.md": emit_docs.emit(ops, emit_docs.collect_kernels(args.targets_root) if args.targets_root
                                           else {}),
        })
        if args.targets_root:
            files["docs/TUNING.md"] = emit_docs.emit_tuning(emit_docs.collect_tuning_keys(args.targets_root))
    except (ManifestError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for rel, text in files.items():
        write_if_changed(os.path.join(args.out, rel), text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
