"""tests/support/failures_log.py names each failure as it happens, once, also under xdist."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

SAMPLE = '''
import pytest

def test_passes():
    assert True

def test_fails():
    assert 1 == 2, "one is not two"

@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")

def test_setup_fails(broken):
    pass
'''


def run(tmp_path, *extra):
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    log = tmp_path / "failures.txt"
    env = dict(os.environ, TILEOPS_FAILURES_LOG=str(log), PYTHONPATH=os.path.dirname(HERE))
    env.pop("PYTEST_XDIST_WORKER", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                           "support.failures_log", *extra, str(tmp_path / "test_sample.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return sorted(log.read_text().splitlines())


def test_each_failure_is_named_with_its_phase_and_reason(tmp_path):
    lines = run(tmp_path)
    assert len(lines) == 2, lines
    assert lines[0].startswith("test_sample.py::test_fails [call] AssertionError: one is not two")
    assert lines[1].startswith("test_sample.py::test_setup_fails [setup] RuntimeError: fixture broke")


def test_under_xdist_each_failure_is_named_once(tmp_path):
    pytest.importorskip("xdist")
    lines = run(tmp_path, "-n", "2")
    assert [line.split(" ")[0] for line in lines] == ["test_sample.py::test_fails",
                                                      "test_sample.py::test_setup_fails"], lines
