"""The ABI guard: a libtileops built against one torch refuses to load into another, with one message
naming both versions. TILEOPS_TEST_RUNNING_TORCH stands in for the running torch."""
import sys

import torch

import tileops
from support.packaging import BUILD, ROOT, run_clean

LIB = str(BUILD / "libtileops.so")
BUILT = torch.__version__
CALL = "torch.ops.tileops.norm_rms_norm_fwd(torch.randn(2, 8), None, [8])"
OTHER = "2.9.1"  # a torch release no build of this library is made against (2.11 and 2.14 are)


def python(code, tmp_path, **env):
    return run_clean([sys.executable, "-c", "import torch, tileops\n" + code], cwd=tmp_path, ok=False,
                     PYTHONPATH=str(ROOT / "python"), **env)


def test_build_record_names_the_torch_it_was_built_against():
    record = tileops.build_record(LIB)
    assert record == {"torch": BUILT, "cxx11_abi": str(int(torch._C._GLIBCXX_USE_CXX11_ABI)),
                      "cuda": (torch.version.cuda or "none").split(".")[0]}


def test_load_refuses_another_torch_version_before_loading(tmp_path):
    proc = python(f"""
try:
    tileops.load({LIB!r})
except RuntimeError as e:
    print(e)
print("loaded" if torch.ops.loaded_libraries else "not loaded")
""", tmp_path, TILEOPS_TEST_RUNNING_TORCH=f"{OTHER}+cu128")
    lines = proc.stdout.splitlines()
    assert f"built against torch {BUILT}" in lines[0] and f"running torch is {OTHER}+cu128" in lines[0], proc.stdout
    assert lines[1] == "not loaded"


def test_load_refuses_another_cuda_major_and_cxx11_abi(tmp_path):
    for fake, what in ((f"{BUILT};cuda=12", "CUDA 12"), (f"{BUILT};cxx11_abi=0", "C++11 ABI 0")):
        proc = python(f"tileops.load({LIB!r})", tmp_path, TILEOPS_TEST_RUNNING_TORCH=fake)
        assert proc.returncode != 0 and f"running torch is {BUILT} (" in proc.stderr and what in proc.stderr, \
            proc.stderr


def test_direct_load_library_reports_at_load_and_refuses_calls(tmp_path):
    # torch.ops.load_library cannot be made to fail from inside the library: the library prints the
    # mismatch as it loads and every op call raises it.
    proc = python(f"""
torch.ops.load_library({LIB!r})
try:
    {CALL}
    print("called")
except RuntimeError as e:
    print("refused:", str(e).splitlines()[0])
""", tmp_path, TILEOPS_TEST_RUNNING_TORCH=OTHER)
    assert proc.stderr.count(f"running torch is {OTHER}") == 1, proc.stderr
    # The refusal names the op, like every other refusal.
    assert proc.stdout.startswith("refused: tileops::norm_rms_norm_fwd: libtileops was built against torch")
    assert OTHER in proc.stdout


def test_matching_torch_loads_and_calls(tmp_path):
    proc = python(f"tileops.load({LIB!r}); {CALL}; print('ok')", tmp_path)
    assert proc.stdout.strip() == "ok" and "running torch" not in proc.stderr, proc.stderr
