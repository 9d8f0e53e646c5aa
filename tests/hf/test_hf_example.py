"""examples/hf_patch.py, as the README runs it: CI runs the example, so it keeps working."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("transformers")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_example_runs_and_agrees():
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "python")}
    out = subprocess.run([sys.executable, "examples/hf_patch.py"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "tileops.patch(LlamaForCausalLM): " in out.stdout
    assert "greedy tokens equal -> equal" in out.stdout
