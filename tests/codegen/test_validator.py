"""The manifest validator: passes on the repo, fails on a contract registry out of step."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VALIDATOR = os.path.join(ROOT, "scripts", "validate_manifest.py")


def run(*args):
    return subprocess.run([sys.executable, VALIDATOR, *args], capture_output=True, text=True, timeout=300)


def test_repo_manifests_validate():
    out = run()
    assert out.returncode == 0, out.stderr
    assert "entries OK" in out.stdout


def test_missing_cold_compile_entry_fails(tmp_path):
    contract = tmp_path / "compile_contract.py"
    contract.write_text("CONTRACT = {}\n")
    out = run("--contract", str(contract))
    assert out.returncode == 1
    assert "RMSNormFwdOp has a compile boundary but no cold-compile entry in CONTRACT" in out.stderr


def test_stale_contract_entry_fails(tmp_path):
    contract = tmp_path / "compile_contract.py"
    contract.write_text("CONTRACT = {'RMSNormFwdOp': None, 'GhostOp': None}\n")
    out = run("--contract", str(contract))
    assert out.returncode == 1 and "CONTRACT lists GhostOp" in out.stderr


def test_broken_manifest_fails_with_location(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("XOp:\n  family: x\n  ref_api: y\n  status: implemented\n  signature:\n    outputs:\n"
                   "      y: {dtype: float99, shape: '[2]'}\n")
    out = run("--manifests", str(bad), "--library", "")
    assert out.returncode == 1
    assert "bad.yaml:7: XOp: output 'y': unknown dtype 'float99'" in out.stderr


def test_manifest_that_disagrees_with_the_library_on_writes_fails(tmp_path):
    # Say FusedAddRMSNormFwdOp always writes residual: the library's out-of-place operator is then
    # a registration no manifest entry generates.
    manifests = []
    for name in sorted(os.listdir(os.path.join(ROOT, "manifests"))):
        text = open(os.path.join(ROOT, "manifests", name)).read()
        if name == "norm.yaml":
            assert "        mutated: optional" in text
            text = text.replace("        mutated: optional", "        mutated: true", 1)
        (tmp_path / name).write_text(text)
        manifests.append(str(tmp_path / name))
    out = run("--manifests", *manifests)
    assert out.returncode == 1
    assert "registers tileops::norm_fused_add_rms_norm_fwd, which no implemented manifest entry generates" in out.stderr


def test_dtype_combo_naming_an_unknown_input_or_dtype_fails_with_location(tmp_path):
    entry = ("XOp:\n  family: x\n  ref_api: y\n  status: spec-only\n  signature:\n    inputs:\n"
             "      q: {dtype: float16 | float32, shape: '[n]'}\n"
             "      c: {dtype: float16 | float32, shape: '[n]'}\n"
             "    outputs:\n      y: {dtype: same_as(q), shape: same_as(q)}\n"
             "    dtype_combos:\n      - {q: float16, c: float16}\n      - {q: float32, %s}\n")
    for bad, message in [("cc: float32", "bad.yaml:13: XOp: dtype combo #2 names unknown input 'cc'; inputs: q, c"),
                         ("c: float33", "bad.yaml:13: XOp: dtype combo #2: unknown dtype 'float33' for input 'c'; "
                                        "known: float16, bfloat16, float32")]:
        path = tmp_path / "bad.yaml"
        path.write_text(entry % bad)
        out = run("--manifests", str(path), "--library", "")
        assert out.returncode == 1
        assert message in out.stderr, out.stderr
