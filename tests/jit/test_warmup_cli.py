"""The offline warm-up as a deployment image build runs it: no GPU, NVRTC only, separate processes."""
import hashlib
import os
import stat
import struct
import subprocess
import sys

import pytest

from codegen.emit_kernels import collect

from tileops import warmup

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADERS = collect(os.path.join(ROOT, "src", "kernels"))  # what the library embeds, in its order
PLAIN = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:/<>()*&+;[]")


def enc(s: str) -> str:
    return "".join(chr(b) if b in PLAIN else f"%{b:02X}" for b in s.encode())


def headers_sha256() -> str:
    h = hashlib.sha256(struct.pack("<Q", len(HEADERS)))
    for name, text in HEADERS:
        n, t = name.encode(), text.encode()
        h.update(struct.pack("<Q", len(n)) + n + struct.pack("<Q", len(t)) + t)
    return h.hexdigest()


def record_line(name: str, header: str, expr: str, arch: str) -> str:
    """The line a GPU run writes for a kernel built by the nvrtc target's make_source()."""
    source = '#include "' + header + '"\n'
    return (f"tileops-kernel-v1 name={enc(name)} arch={arch} expr={enc(expr)} source={enc(source)}"
            f" headers={','.join(enc(n) for n, _ in HEADERS)} headers_sha256={headers_sha256()} options=")


@pytest.fixture
def record(tmp_path):
    path = tmp_path / "kernels.rec"
    lines = [record_line(f"alibi_slopes_fwd__{a}", "position/alibi_fwd.cuh", "tileops::alibi_slopes_fwd", a)
             for a in ("sm_90a", "sm_80")]
    path.write_text("\n".join(lines + lines[:1]) + "\n")  # a kernel recorded twice is built once
    return path


def cli(*args, **kw):
    return subprocess.run([warmup.program_path(), *map(str, args)], capture_output=True, text=True, timeout=600, **kw)


def entries(folder):
    return sorted(p.name for p in folder.iterdir())


def test_program_is_torch_free():
    ldd = subprocess.run(["ldd", warmup.program_path()], capture_output=True, text=True).stdout
    # Library names only: a load address such as 0x00007f9301cc1000 spells "c10".
    names = [line.split()[0] for line in ldd.splitlines() if line.strip()]
    assert names and not [n for n in names if any(w in n for w in ("torch", "c10", "libcuda", "nvrtc"))], ldd


def test_warmup_fills_an_image_cache_without_a_gpu(record, tmp_path):
    image = tmp_path / "image"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), CUDA_VISIBLE_DEVICES="")
    r = subprocess.run([sys.executable, "-m", "tileops.warmup", "--record", str(record), "--cache-dir", str(image)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "2 kernels: 2 compiled, 0 already present, 0 failed" in r.stdout, r.stdout
    names = entries(image)
    assert len(names) == 2 and all(n.startswith("alibi_slopes_fwd__sm_") and n.endswith(".cubin") for n in names)
    # Readable by every user of the image, writable by its owner only.
    assert stat.S_IMODE(image.stat().st_mode) == 0o755
    assert all(stat.S_IMODE((image / n).stat().st_mode) == 0o644 for n in names)
    again = cli("--record", record, "--cache-dir", image, "--arch", "sm_80")
    assert again.returncode == 0 and "1 kernels: 0 compiled, 1 already present" in again.stdout, again.stdout


def test_eight_warmups_racing_on_a_cold_folder_build_each_kernel_once(record, tmp_path):
    image = tmp_path / "image"
    procs = [subprocess.Popen([warmup.program_path(), "--record", str(record), "--cache-dir", str(image), "--jobs", "1"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(8)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    compiled = [int(o.split(" compiled")[0].rsplit(" ", 1)[1]) for o, _ in outs]
    assert sum(compiled) == 2, outs
    assert len(entries(image)) == 2, entries(image)  # no lock, no temp file left
    check = cli("--record", record, "--cache-dir", image)  # every entry whole and verified
    assert "0 compiled, 2 already present, 0 failed" in check.stdout, check.stdout + check.stderr


def test_record_of_other_kernel_sources_is_refused(record, tmp_path):
    record.write_text(record.read_text().replace(headers_sha256(), "0" * 64, 1))
    r = cli("--record", record, "--cache-dir", tmp_path / "image")
    assert r.returncode == 1
    assert "kernels.rec:1: kernel alibi_slopes_fwd__sm_90a was recorded by a library with other kernel sources" in r.stderr


def test_arch_without_recorded_kernels_is_refused(record, tmp_path):
    r = cli("--record", record, "--cache-dir", tmp_path / "image", "--arch", "sm_75")
    assert r.returncode == 1 and "no kernel was recorded for sm_75 (recorded: sm_80, sm_90a)" in r.stderr, r.stderr
    r = cli("--record", record, "--cache-dir", tmp_path / "image", "--arch", "compute_90")
    assert r.returncode == 2 and "not a real architecture" in r.stderr, r.stderr
    assert cli("--record", record).returncode == 2


def test_unsafe_cache_folder_is_refused(record, tmp_path):
    image = tmp_path / "image"
    image.mkdir()
    image.chmod(0o777)
    r = cli("--record", record, "--cache-dir", image)
    assert r.returncode == 1, r.stdout
    assert "writable by group or others" in r.stderr and "cannot use" in r.stderr, r.stderr
    assert entries(image) == []
