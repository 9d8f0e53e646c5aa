"""The wheel: libtileops.so inside the tileops package; in a fresh venv that has only torch,
`import tileops; tileops.load()` and the quickstart work from any folder, and `import torch` alone
loads the library (the torch.backends entry point) in the main process and in spawned and forked
workers."""
import shutil
import subprocess
import zipfile

from support.packaging import ROOT, run_clean

RMS = """
x, w = torch.randn(4, 32), torch.randn(32)
y = torch.ops.tileops.norm_rms_norm_fwd(x, w, [32])
torch.testing.assert_close(y, torch.nn.functional.rms_norm(x, [32], w))
"""


def test_wheel_contents(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "tileops/libtileops.so" in names and "tileops/__init__.py" in names and "tileops/norm.py" in names
    assert "tileops/bin/tileops-warmup" in names and "tileops/warmup.py" in names
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[torch.backends]" in text and "tileops = tileops:_autoload" in text


def test_wheel_library_runpath_is_relative(wheel, tmp_path):
    zipfile.ZipFile(wheel).extract("tileops/libtileops.so", tmp_path)
    dyn = subprocess.run(["readelf", "-d", str(tmp_path / "tileops" / "libtileops.so")], capture_output=True,
                         text=True, check=True).stdout
    runpath = [line for line in dyn.splitlines() if "RUNPATH" in line or "RPATH" in line]
    assert runpath and all("[$ORIGIN/../torch/lib]" in line for line in runpath), runpath


def test_fresh_venv_has_only_torch(wheel_python, tmp_path):
    code = "import importlib.util as u; print([m for m in ('yaml', 'pytest', 'numpy') if u.find_spec(m)])"
    assert run_clean([wheel_python, "-c", code], cwd=tmp_path).stdout.strip() == "[]"


def test_load_and_call_from_any_folder(wheel_python, tmp_path):
    code = ("import torch, tileops\n"
            "print(tileops.library_path())\n"
            "tileops.load()\n" + RMS)
    out = run_clean([wheel_python, "-c", code], cwd=tmp_path, TORCH_DEVICE_BACKEND_AUTOLOAD="0").stdout
    venv = str(wheel_python.parent.parent)
    assert out.startswith(venv) and out.strip().endswith("site-packages/tileops/libtileops.so"), out


def test_quickstart_from_the_wheel(wheel_python, tmp_path):
    shutil.copy(ROOT / "examples" / "quickstart.py", tmp_path)
    out = run_clean([wheel_python, "quickstart.py"], cwd=tmp_path).stdout
    assert out.strip().endswith("OK") and "site-packages/tileops/libtileops.so" in out, out


def test_import_torch_alone_makes_the_ops_available(wheel_python, tmp_path):
    run_clean([wheel_python, "-c", "import torch" + RMS], cwd=tmp_path)


def test_import_tileops_before_torch_autoloads_too(wheel_python, tmp_path):
    # torch's autoload then runs inside tileops' own `import torch`, on a half-built module.
    run_clean([wheel_python, "-c", "import tileops.norm\nimport torch" + RMS], cwd=tmp_path)


def test_autoload_switch_off(wheel_python, tmp_path):
    proc = run_clean([wheel_python, "-c", "import torch" + RMS], cwd=tmp_path, ok=False,
                     TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert proc.returncode != 0 and "norm_rms_norm_fwd" in proc.stderr, proc.stderr


def test_autoload_in_spawned_and_forked_workers(wheel_python, tmp_path):
    (tmp_path / "workers.py").write_text(f"""
import multiprocessing as mp
import torch


def work(_):
{"".join("    " + line + chr(10) for line in RMS.strip().splitlines())}    return torch.ops.tileops.norm_rms_norm_fwd(torch.ones(1, 4), None, [4]).sum().item()


if __name__ == "__main__":
    for method in ("spawn", "fork"):
        with mp.get_context(method).Pool(2) as pool:
            print(method, pool.map(work, range(2)))
""")
    out = run_clean([wheel_python, "workers.py"], cwd=tmp_path).stdout.split("\n")
    assert out[:2] == ["spawn [4.0, 4.0]", "fork [4.0, 4.0]"], out


def test_warmup_program_ships_in_the_wheel(wheel_python, tmp_path):
    code = "import tileops.warmup as w; print(w.program_path())"
    out = run_clean([wheel_python, "-c", code], cwd=tmp_path).stdout.strip()
    assert out.endswith("site-packages/tileops/bin/tileops-warmup"), out
    usage = run_clean([wheel_python, "-m", "tileops.warmup", "--help"], cwd=tmp_path).stdout
    assert "--record" in usage and "--workloads" in usage and "--cache-dir" in usage
    # The Dockerfile's step from the installed wheel alone (the workloads are in the library), for
    # one op to keep it short; no GPU is visible.
    image = tmp_path / "image"
    out = run_clean([wheel_python, "-m", "tileops.warmup", "--workloads", "--device", "h200", "--op", "SoftmaxFwdOp",
                     "--cache-dir", str(image)], cwd=tmp_path, CUDA_VISIBLE_DEVICES="").stdout
    assert " compiled, 0 already present, 0 failed" in out and any(image.glob("softmax*.cubin")), out
