"""Helpers for tests/packaging: commands, clean environments, out-of-tree CMake builds, venvs."""
import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
WORK = BUILD / "packaging"


def run(cmd, *, timeout=900, env=None, cwd=None, ok=True):
    """Runs cmd; with ok=True a non-zero exit fails the test with the command's output."""
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, **(env or {})})
    if ok:
        assert proc.returncode == 0, f"{' '.join(map(str, cmd))} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def clean_env(**extra):
    """The environment minus what points into this checkout (PYTHONPATH, TILEOPS_LIBRARY)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TILEOPS_LIBRARY")}
    env.update(extra)
    return env


def run_clean(cmd, *, cwd, ok=True, timeout=600, **extra):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env=clean_env(**extra))
    if ok:
        assert proc.returncode == 0, f"{' '.join(map(str, cmd))} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def cmake_build(source: Path, build_dir: Path, prefix: Path, *defines: str) -> Path:
    """Configures and builds a CMake project against an installed TileOPs prefix and the shared torch
    (`defines`: more -D settings)."""
    run(["cmake", "-S", source, "-B", build_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
         "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
         f"-DCMAKE_PREFIX_PATH={prefix};{torch.utils.cmake_prefix_path}", *defines])
    run(["cmake", "--build", build_dir, "-j2"])
    return build_dir


def torch_closure() -> list[md.Distribution]:
    """torch's distribution and every distribution it requires, transitively (installed ones)."""
    seen, todo, out = set(), ["torch"], []
    while todo:
        name = re.split(r"[ ;<>=!~\[(]", todo.pop(), maxsplit=1)[0].lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue  # an optional or platform-specific requirement that is not installed
        out.append(dist)
        todo += [r for r in (dist.requires or []) if "extra ==" not in r]
    return out


def venv_with_only_torch(path: Path) -> Path:
    """A new venv whose only third-party packages are torch and its requirements: symlinks to the shared
    venv's copies in one folder, on the venv's path through a .pth line (no copy of torch's gigabytes)."""
    shutil.rmtree(path, ignore_errors=True)
    run([sys._base_executable, "-m", "venv", "--without-pip", path])  # pip's setuptools would shadow torch's
    site = Path(run([path / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
                .stdout.strip())
    only_torch = path / "torch-only"
    only_torch.mkdir()
    shared = Path(sysconfig.get_paths()["purelib"])
    for dist in torch_closure():
        tops = {Path(str(f)).parts[0] for f in dist.files or []}
        for top in tops:
            src = shared / top
            if src.exists() and not (only_torch / top).exists() and top not in ("..", "bin"):
                (only_torch / top).symlink_to(src)
    (site / "torch_only.pth").write_text(f"{only_torch}\n")
    return path / "bin" / "python"


