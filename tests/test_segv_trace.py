"""scripts/debug/segv_trace.c (LD_PRELOAD) reports where a process segfaulted, and
scripts/debug/resolve_trace.py resolves libtileops.so offsets to source lines: what
scripts/gpu_check.sh relies on where the GPU machine has no gdb."""
import os
import shutil
import subprocess
import sys

import pytest

import tileops

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CC = shutil.which("cc") or shutil.which("gcc")


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    if CC is None:
        pytest.skip("no C compiler")
    lib = str(tmp_path_factory.mktemp("trace") / "segv_trace.so")
    subprocess.run([CC, "-shared", "-fPIC", "-O1", "-o", lib, os.path.join(ROOT, "scripts", "debug", "segv_trace.c"),
                    "-ldl"], check=True)
    return lib


def crash(trace, code):
    env = dict(os.environ, LD_PRELOAD=trace, PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode != 0
    return out.stderr


def test_a_segfault_names_the_object_and_the_caller(trace):
    err = crash(trace, "import ctypes; ctypes.string_at(1)")
    assert "SEGV at addr 0x1" in err
    assert any(line.startswith("bt ") and "_ctypes" in line for line in err.splitlines()), err


def test_offsets_in_libtileops_resolve_to_source_lines():
    # A trace line inside libtileops.so at the offset of tileops_counter resolves to that function.
    lib = os.path.realpath(tileops.library_path())
    syms = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    offset = next(int(line.split()[0], 16) for line in syms.splitlines() if line.endswith(" tileops_counter"))
    trace_lines = f"SEGV at addr 0x8\nbt 0x7f0000001000 {lib}(+{offset:#x}) tileops_counter\nbt 0x1 /lib/libc.so.6(+0x10) ?\n"
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "debug", "resolve_trace.py")],
                         input="noise\n" + trace_lines, capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0] == "SEGV at addr 0x8" and len(lines) == 3, out  # trace lines only
    assert "=> tileops_counter |" in lines[1] and ".cpp:" in lines[1], out  # function, then file:line
    assert "=>" not in lines[2]  # only libtileops.so is resolved
