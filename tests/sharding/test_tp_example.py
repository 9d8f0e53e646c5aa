"""examples/tensor_parallel.py as the README runs it: two ranks (gloo on CPU, NCCL with two GPUs), the
sharded decoder block equal to the one-process block, eagerly and under torch.compile(fullgraph=True),
with the plan's four collectives and none from the tileops ops (issue 42, item 5)."""
import os
import re
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                                reason="torch.distributed with gloo")


def test_tensor_parallel_example():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    run = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "tensor_parallel.py")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    out = run.stdout
    assert run.returncode == 0, out + run.stderr[-3000:]
    assert re.search(r"^ranks: 2 \((gloo, cpu|nccl, cuda)\)$", out, re.M), out
    diffs = [float(d) for d in re.findall(r"^max \|.*= (\S+)", out, re.M)]
    assert len(diffs) == 2 and max(diffs) <= 1e-4, out
    assert "collectives of one sharded forward: {'all_gather_into_tensor': 2, 'reduce_scatter_tensor': 2}" in out
    calls = dict(re.findall(r"^  tileops\.(\w+)\(.*\): (\d+) collectives$", out, re.M))
    assert calls == {"norm_rms_norm_fwd": "0", "position_rope_neox_cached_fwd_writes_k_writes_q": "0",
                     "norm_fused_add_rms_norm_fwd": "0", "activation_silu_and_mul_fwd": "0"}, out
    assert "\nOK\n" in out
