"""The CMake package: install layout, SONAME, a RUNPATH free of build-machine paths, and consumers built
out of tree against the installed (and moved) prefix, not the source tree."""
import json
import os
import subprocess
import sys

import torch

from support.packaging import BUILD, ROOT, WORK, cmake_build, run_clean

VERSION = "0.1.0"


def dynamic_section(path):
    return subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout


def test_install_layout(prefix):
    lib = prefix / "lib"
    assert os.readlink(lib / "libtileops.so") == "libtileops.so.0"
    assert os.readlink(lib / "libtileops.so.0") == f"libtileops.so.{VERSION}"
    assert (lib / f"libtileops.so.{VERSION}").is_file()
    assert os.access(prefix / "bin" / "tileops-warmup", os.X_OK)  # the offline warm-up (Deploy)
    assert sorted(p.name for p in (prefix / "include" / "tileops").iterdir()) == \
        sorted(p.name for p in (ROOT / "include" / "tileops").glob("*.h"))
    assert {p.name for p in (lib / "cmake" / "TileOPs").iterdir()} == {"TileOPsConfig.cmake",
                                                                       "TileOPsConfigVersion.cmake"}


def test_soname_and_runpath(prefix):
    dyn = dynamic_section(prefix / "lib" / f"libtileops.so.{VERSION}")
    assert "Library soname: [libtileops.so.0]" in dyn
    runpath = [line for line in dyn.splitlines() if "RUNPATH" in line or "RPATH" in line]
    assert runpath and all("[$ORIGIN]" in line for line in runpath), runpath
    # The build tree's copy does carry the build venv's torch/lib: installing must have rewritten it.
    assert os.path.dirname(torch.__file__) in dynamic_section(BUILD / "libtileops.so")


def test_moved_prefix_loads_from_python(prefix, tmp_path):
    lib = prefix / "lib" / "libtileops.so"
    code = f"""
import torch
torch.ops.load_library({str(lib)!r})
x, w = torch.randn(4, 32), torch.randn(32)
y = torch.ops.tileops.norm_rms_norm_fwd(x, w, [32])
torch.testing.assert_close(y, torch.nn.functional.rms_norm(x, [32], w))
print("ok")
"""
    assert run_clean([sys.executable, "-c", code], cwd=tmp_path).stdout.strip() == "ok"


def _compile_commands(build_dir):
    return json.loads((build_dir / "compile_commands.json").read_text())


def test_cpp_consumer_builds_against_the_prefix_and_runs(prefix, tmp_path):
    build_dir = WORK / "cpp_consumer"
    cmake_build(ROOT / "examples" / "cpp_consumer", build_dir, prefix)
    (cmd,) = _compile_commands(build_dir)
    assert str(prefix / "include") in cmd["command"] and str(ROOT / "include") not in cmd["command"]
    out = run_clean([build_dir / "cpp_consumer"], cwd=tmp_path).stdout
    assert "RMSNormFwdOp" in out and "max |y - ref|" in out


def test_example_backend_builds_against_the_prefix_and_runs(prefix, tmp_path):
    check_backend(prefix, tmp_path, WORK / "example_backend")


def test_example_backend_keeps_a_static_cxx_runtime_private(prefix, tmp_path):
    # A toolchain that links libstdc++ statically: the backend exports none of it, and still serves.
    build_dir = WORK / "example_backend_static"
    check_backend(prefix, tmp_path, build_dir, "-DCMAKE_SHARED_LINKER_FLAGS=-static-libstdc++")
    lib = build_dir / "libtileops_example_backend.so"
    syms = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    assert "tileops" in syms  # the check reads the right thing
    leaked = [s for s in syms.splitlines() if "St6locale" in s or "7num_put" in s]
    assert not leaked, leaked[:3]


def check_backend(prefix, tmp_path, build_dir, *defines):
    cmake_build(ROOT / "plugin" / "example_backend", build_dir, prefix, *defines)
    (cmd,) = _compile_commands(build_dir)
    assert str(prefix / "include") in cmd["command"] and str(ROOT / "include") not in cmd["command"]
    code = f"""
import torch, tileops
tileops.load({str(prefix / "lib" / "libtileops.so")!r})
tileops.load_backend({str(build_dir / "libtileops_example_backend.so")!r})
x, w = torch.randn(4, 32), torch.randn(32)
y = torch.ops.tileops.norm_rms_norm_fwd(x, w, [32], target="example_cpu")
torch.testing.assert_close(y, torch.nn.functional.rms_norm(x, [32], w))
print(sorted(tileops.target_names()))
"""
    out = run_clean([sys.executable, "-c", code], cwd=tmp_path, PYTHONPATH=str(ROOT / "python")).stdout
    assert "example_cpu" in out
