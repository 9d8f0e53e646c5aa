"""The library loads without a GPU or driver: libcuda, libnvrtc and libcublasLt are dlopen'ed at first use."""
import os
import re
import subprocess
import sys

import pytest

import tileops

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_no_cuda_driver_or_nvrtc_in_dynamic_dependencies():
    path = tileops.library_path()
    needed = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    ldd = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    assert "libtorch_cpu" in needed  # the check reads the right thing
    for lib in ("libcuda.so", "libnvrtc", "libcublasLt"):
        assert lib not in needed, f"{lib} is a DT_NEEDED of libtileops.so"
        assert lib not in ldd, f"{lib} is pulled in (transitively) by libtileops.so:\n{ldd}"


def test_loads_and_serves_cpu_with_no_gpu_visible():
    # A fresh process with every GPU hidden: load, call the op on CPU, compare with ref_api.
    code = (
        "import torch, tileops; tileops.load();"
        "x = torch.randn(3, 8); w = torch.randn(8);"
        "y = torch.ops.tileops.norm_rms_norm_fwd(x, w, [8]);"
        "assert torch.equal(y, torch.nn.functional.rms_norm(x, [8], w)); print('ok')"
    )
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def _relink(tmp_path, extra: str) -> str:
    """libtileops.so linked again from this build's objects, as `ninja` would, plus `extra` flags."""
    build = os.path.join(ROOT, "build")
    if not os.path.exists(os.path.join(build, "build.ninja")):
        pytest.skip("needs the CMake build folder (build/) this checkout was built in")
    cmds = subprocess.run(["ninja", "-C", build, "-t", "commands", "tileops"], capture_output=True, text=True,
                          check=True).stdout
    link = next(c for c in cmds.splitlines() if " -shared " in c and "libtileops.so" in c)
    link = link.removeprefix(": && ").removesuffix(" && :")
    out = str(tmp_path / "libtileops.so")
    link, n = re.subn(r" -o \S+", f" {extra} -o {out}", link, count=1)
    assert n == 1, link
    subprocess.run(link, shell=True, cwd=build, check=True, capture_output=True)
    return out


def test_a_statically_linked_cxx_runtime_stays_private(tmp_path):
    # Some toolchains (a GCC built into /opt, say) link libstdc++ statically. Exported, that copy's
    # std::locale ids and stream code mix with the process's own libstdc++: with another version
    # there, formatting an integer into an error message crashed the process.
    lib = _relink(tmp_path, "-static-libstdc++")
    syms = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    assert "tileops_" in syms  # the check reads the right thing
    leaked = [s.split()[-1] for s in syms.splitlines() if re.search(r"St6locale|7num_put|13basic_ostream", s)]
    assert not leaked, f"{len(leaked)} libstdc++ symbols exported, e.g. {leaked[:3]}"
    # The same library serves, and its errors format integers.
    code = ("import pytest, torch, tileops; tileops.load();"
            "p = torch.tensor([0, 70]); q = torch.randn(2, 2, 32); k = torch.randn(2, 2, 32);"
            "c = torch.randn(64, 32)\n"
            "with pytest.raises(IndexError, match='max_pos=64, .*got 70'):\n"
            "    torch.ops.tileops.position_rope_neox_cached_fwd_writes_k_writes_q(p, q, k, c)\n"
            "print('ok')")
    env = dict(os.environ, TILEOPS_LIBRARY=lib, PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
