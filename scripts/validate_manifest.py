"""Manifest validator: grammar and consistency of manifests/ with the library and the tests.

    python scripts/validate_manifest.py [--manifests manifests/*.yaml] [--library build/libtileops.so]

Fails (exit 1) with 'file:line: Class: rule' when:
  - an entry breaks the grammar (required/unknown keys, dtypes, shapes, rules, params, ...);
  - an implemented op's boundary disagrees with 'tensor inputs and no composition';
  - the library (when built) lacks an operator of an implemented op, registers a schema other than
    the generated one, or writes (Tensor(a!)) anything other than the op's mutated inputs;
  - the set of ops with a boundary differs from tests/compile_contract.py's registry.
"""
from __future__ import annotations

import argparse
import importlib.util
import glob
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from codegen.__main__ import load_ops  # noqa: E402
from codegen.emit_cpp import schema  # noqa: E402
from codegen.parse import ManifestError  # noqa: E402


def contract_classes(path: str) -> set[str]:
    """Keys of CONTRACT in the compile-contract registry (imported from its folder)."""
    folder, name = os.path.split(os.path.abspath(path))
    sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(name[:-3], path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
    if not hasattr(module, "CONTRACT"):
        raise SystemExit(f"{path}: no CONTRACT dict found")
    return set(module.CONTRACT)


def check_library(ops, library: str) -> list[str]:
    import torch
    torch.ops.load_library(library)
    errors = []
    # Every tileops operator the library registers must come from a manifest entry (and so write
    # exactly the branch's mutated inputs); a stale or hand-written registration is an error.
    expected = {f"tileops::{op.operator_name(b)}" for op in ops if op.status == "implemented" for b in op.branches}
    for name in sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("tileops::")):
        if name not in expected:
            errors.append(f"{library}: registers {name}, which no implemented manifest entry generates "
                          "(rebuild, or fix the manifest's mutated/buffer/optional fields)")
    for op in ops:
        if op.status != "implemented":
            continue
        for b in op.branches:
            name = op.operator_name(b)
            where = f"{op.path}:{op.line}: {op.cls}"
            try:
                registered = getattr(torch.ops.tileops, name).default._schema
            except (AttributeError, RuntimeError):
                errors.append(f"{where}: operator tileops::{name} is not registered by {library}")
                continue
            # Compare torch's normal form of both (it rewrites defaults: 'none' -> "none", 1e4 -> 10000.).
            if str(registered) != str(torch._C.parse_schema("tileops::" + schema(op, b))):
                errors.append(f"{where}: registered schema '{registered}' differs from the manifest's "
                              f"'tileops::{schema(op, b)}'; rebuild the library")
            written = {a.name for a in registered.arguments if a.alias_info is not None and a.alias_info.is_write}
            expected = set(b.writes) | ({"out"} if b.out else set())
            if written != expected:
                errors.append(f"{where}: tileops::{name} writes {sorted(written)} but the manifest says "
                              f"{sorted(expected)} (mutated inputs{' and out' if b.out else ''})")
    return errors


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--manifests", nargs="*", default=sorted(glob.glob(os.path.join(ROOT, "manifests", "*.yaml"))))
    ap.add_argument("--library", default=os.path.join(ROOT, "build", "libtileops.so"))
    ap.add_argument("--contract", default=os.path.join(ROOT, "tests", "compile_contract.py"))
    args = ap.parse_args(argv)
    try:
        ops = load_ops(args.manifests, ROOT)
    except ManifestError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    errors = []
    for op in ops:
        expect = bool(op.inputs) and not op.composition
        if op.has_boundary != expect:  # guards the model's own rule
            errors.append(f"{op.path}:{op.line}: {op.cls}: boundary {op.has_boundary} but tensor inputs and no "
                          f"composition say {expect}")
    boundary = {op.cls for op in ops if op.status == "implemented" and op.has_boundary}
    contract = contract_classes(args.contract)
    for cls in sorted(boundary - contract):
        errors.append(f"{args.contract}: {cls} has a compile boundary but no cold-compile entry in CONTRACT")
    for cls in sorted(contract - boundary):
        errors.append(f"{args.contract}: CONTRACT lists {cls}, which is not an implemented op with a boundary")
    if args.library and os.path.exists(args.library):
        errors += check_library(ops, args.library)
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    if not errors:
        print(f"validate_manifest: {len(ops)} entries OK ({len(boundary)} with a compile boundary)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
