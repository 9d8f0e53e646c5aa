"""Embeds the torch-free kernel sources (src/kernels/**/*.cuh) into the library for NVRTC."""
from __future__ import annotations

import os


def collect(root: str) -> list[tuple[str, str]]:
    found = []
    for dirpath, _, files in os.walk(root):
        for f in sorted(files):
            if f.endswith(".cuh"):
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8") as fh:
                    found.append((os.path.relpath(path, root).replace(os.sep, "/"), fh.read()))
    return sorted(found)


def emit(sources: list[tuple[str, str]]) -> str:
    out = ["// Generated from src/kernels/**/*.cuh by scripts/codegen; do not edit.",
           '#include "targets/nvrtc/kernel_sources.h"', "", "namespace tileops::nvrtc {", "namespace {"]
    for i, (_, text) in enumerate(sources):
        # Split into chunks: compilers limit the length of one string literal.
        chunks = [text[k:k + 8000] for k in range(0, len(text), 8000)] or [""]
        body = "\n".join(f'R"tileops_src({c})tileops_src"' for c in chunks)
        out.append(f"const char kSource{i}[] =\n{body};")
    out.append("const KernelFile kFiles[] = {")
    for i, (name, _) in enumerate(sources):
        out.append(f'    {{"{name}", kSource{i}}},')
    out += ["};", "}  // namespace", "",
            "c10::ArrayRef<KernelFile> kernel_files() {",
            "  return c10::ArrayRef<KernelFile>(kFiles, sizeof(kFiles) / sizeof(kFiles[0]));",
            "}", "", "}  // namespace tileops::nvrtc"]
    return "\n".join(out) + "\n"
