"""Session fixtures for the packaging tests (helpers: tests/support/packaging.py).

Installs for the packaging tests, built once per session under build/packaging/ (kept between runs,
so a rerun rebuilds only what changed):

  prefix        `cmake --install build --prefix <first>`, then the folder moved elsewhere: everything
                below uses the moved copy, so a path baked in at install time would break it
  wheel         `pip wheel --no-build-isolation` in a build venv (scikit-build-core + the shared torch)
  wheel_python  a fresh venv that sees only torch and what torch requires, with the wheel installed
"""
import shutil
import sys
import sysconfig
from pathlib import Path

import pytest

from support.packaging import BUILD, ROOT, WORK, run, venv_with_only_torch


@pytest.fixture(scope="session")
def prefix() -> Path:
    """An installed TileOPs prefix, moved after installing."""
    first, moved = WORK / "install-here", WORK / "moved" / "tileops"
    for d in (first, moved):
        shutil.rmtree(d, ignore_errors=True)
    run(["cmake", "--install", BUILD, "--prefix", first])
    moved.parent.mkdir(parents=True, exist_ok=True)
    first.rename(moved)
    return moved


@pytest.fixture(scope="session")
def wheel() -> Path:
    """dist/tileops-*.whl built from this checkout with pip and scikit-build-core."""
    venv = WORK / "build-venv"
    py = venv / "bin" / "python"
    if not py.exists() or run([py, "-c", "import scikit_build_core, torch, yaml"], ok=False).returncode:
        shutil.rmtree(venv, ignore_errors=True)
        run([sys._base_executable, "-m", "venv", venv])
        site = run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
        # The build sees the shared venv (torch to build against, pyyaml for codegen) plus its own tools.
        Path(site, "shared.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "scikit-build-core>=0.10"])
    dist = WORK / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    # The compiler of the main build: ccache hashes its name, so with the same one the wheel's build
    # (CMakeLists.txt: one cache for both) takes every object the main build already compiled.
    cache = (BUILD / "CMakeCache.txt").read_text()
    cxx = next(l.split("=", 1)[1] for l in cache.splitlines() if l.startswith("CMAKE_CXX_COMPILER:"))
    run([py, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", dist, ROOT], timeout=1800,
        env={"CMAKE_BUILD_PARALLEL_LEVEL": "2", "CXX": cxx})
    (whl,) = dist.glob("tileops-*.whl")
    return whl


@pytest.fixture(scope="session")
def wheel_python(wheel) -> Path:
    """The python of a fresh venv (torch and its requirements only) with the wheel installed; --no-deps:
    torch is there, and a resolver free to pick another torch from a local wheel folder must not."""
    py = venv_with_only_torch(WORK / "wheel-venv")
    run([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--disable-pip-version-check", "--no-index", "--no-deps",
         wheel])
    return py
