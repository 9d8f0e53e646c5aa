"""The ABI guard: a libtileops built against one torch refuses to load into another, with one message
naming both versions. A library "built against another torch" is a copy of this build whose build
record (the bytes both the Python loader and the library's own check read) names other values."""
import sys

import torch

import tileops
from support.packaging import BUILD, ROOT, run_clean

LIB = str(BUILD / "libtileops.so")
BUILT = torch.__version__
CUDA = (torch.version.cuda or "none").split(".")[0]
ABI = str(int(torch._C._GLIBCXX_USE_CXX11_ABI))
CALL = "torch.ops.tileops.norm_rms_norm_fwd(torch.randn(2, 8), None, [8])"
OTHER = ("1.0.0+" + "x" * 40)[:len(BUILT)]  # a torch no build of this library is made against, as long


def built_against(tmp_path, torch=BUILT, cuda=CUDA, cxx11_abi=ABI):
    """A copy of the library whose record says it was built against these (each as long as the real one,
    so the file's layout is unchanged)."""
    data = (BUILD / "libtileops.so").read_bytes()
    real = f"tileops-build-record:torch={BUILT};cxx11_abi={ABI};cuda={CUDA};".encode()
    fake = f"tileops-build-record:torch={torch};cxx11_abi={cxx11_abi};cuda={cuda};".encode()
    assert data.count(real) == 1 and len(fake) == len(real)
    path = tmp_path / "other" / "libtileops.so"
    path.parent.mkdir()
    path.write_bytes(data.replace(real, fake))
    return str(path)


def python(code, tmp_path):
    return run_clean([sys.executable, "-c", "import torch, tileops\n" + code], cwd=tmp_path, ok=False,
                     PYTHONPATH=str(ROOT / "python"))


def test_build_record_names_the_torch_it_was_built_against():
    assert tileops.build_record(LIB) == {"torch": BUILT, "cxx11_abi": ABI, "cuda": CUDA}


def test_load_refuses_another_torch_version_before_loading(tmp_path):
    lib = built_against(tmp_path, torch=OTHER)
    assert tileops.build_record(lib)["torch"] == OTHER
    proc = python(f"""
try:
    tileops.load({lib!r})
except RuntimeError as e:
    print(e)
print("loaded" if torch.ops.loaded_libraries else "not loaded")
""", tmp_path)
    lines = proc.stdout.splitlines()
    assert f"built against torch {OTHER}" in lines[0] and f"running torch is {BUILT}" in lines[0], proc.stdout
    assert lines[1] == "not loaded"


def test_load_refuses_another_cuda_major_and_cxx11_abi(tmp_path):
    for i, (fields, what) in enumerate(((dict(cuda="9" * len(CUDA)), f"(C++11 ABI {ABI}, CUDA {'9' * len(CUDA)})"),
                                        (dict(cxx11_abi=str(1 - int(ABI))), f"(C++11 ABI {1 - int(ABI)}, CUDA"))):
        (tmp_path / str(i)).mkdir()
        lib = built_against(tmp_path / str(i), **fields)
        proc = python(f"tileops.load({lib!r})", tmp_path)
        assert proc.returncode != 0 and f"built against torch {BUILT} {what}" in proc.stderr, proc.stderr


def test_direct_load_library_reports_at_load_and_refuses_calls(tmp_path):
    # torch.ops.load_library cannot be made to fail from inside the library: the library prints the
    # mismatch as it loads and every op call raises it.
    lib = built_against(tmp_path, torch=OTHER)
    proc = python(f"""
torch.ops.load_library({lib!r})
try:
    {CALL}
    print("called")
except RuntimeError as e:
    print("refused:", str(e).splitlines()[0])
""", tmp_path)
    assert proc.stderr.count(f"built against torch {OTHER}") == 1, proc.stderr
    # The refusal names the op, like every other refusal.
    assert proc.stdout.startswith(f"refused: tileops::norm_rms_norm_fwd: libtileops was built against torch {OTHER}")
    assert f"running torch is {BUILT.split('+')[0]}" in proc.stdout


def test_matching_torch_loads_and_calls(tmp_path):
    proc = python(f"tileops.load({built_against(tmp_path)!r}); {CALL}; print('ok')", tmp_path)
    assert proc.stdout.strip() == "ok" and "running torch" not in proc.stderr, proc.stderr
