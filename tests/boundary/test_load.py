"""The library loads without a GPU or driver: libcuda and libnvrtc are dlopen'ed at first use."""
import os
import subprocess
import sys

import tileops

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_no_cuda_driver_or_nvrtc_in_dynamic_dependencies():
    path = tileops.library_path()
    needed = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    ldd = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    assert "libtorch_cpu" in needed  # the check reads the right thing
    for lib in ("libcuda.so", "libnvrtc"):
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
