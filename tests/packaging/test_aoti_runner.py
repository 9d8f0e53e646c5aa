"""examples/aoti_runner: a C++ program built against the installed package and libtorch runs an
AOTInductor package whose graph calls tileops ops, at another token count than the export's; without
libtileops it stops with a message naming the missing op."""
import sys

import pytest
import torch

from support.packaging import ROOT, WORK, cmake_build, run, run_clean


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("aoti")
    run([sys.executable, ROOT / "examples" / "aoti_runner" / "export_block.py", out],
        env={"PYTHONPATH": str(ROOT / "python")})
    return out


@pytest.fixture(scope="module")
def runner(prefix):
    return cmake_build(ROOT / "examples" / "aoti_runner", WORK / "aoti_runner", prefix)


def test_runner_matches_eager(exported, runner, tmp_path):
    out = run_clean([runner / "aoti_runner", exported / "block.pt2", exported / "inputs.pt", tmp_path / "out.pt"],
                    cwd=tmp_path).stdout
    assert "ops registered" in out
    got, expected = torch.load(tmp_path / "out.pt"), torch.load(exported / "expected.pt")
    assert len(got) == len(expected) == 2 and got[0].shape[0] == 37
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)


def test_runner_without_the_library_names_the_missing_op(exported, runner, tmp_path):
    proc = run_clean([runner / "aoti_runner_without_tileops", exported / "block.pt2", exported / "inputs.pt",
                      tmp_path / "out.pt"], cwd=tmp_path, ok=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "aoti_runner: the package calls tileops::" in proc.stderr and "not registered" in proc.stderr, proc.stderr
