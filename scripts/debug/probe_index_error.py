"""Probe (GPU machine, torch 2.11): does raising c10::IndexError from a tileops kernel crash the process?"""
import sys

import torch

sys.path.insert(0, "python")
import tileops  # noqa: E402

tileops.load()
positions = torch.tensor([0, 70])
q = torch.randn(2, 2, 32)
k = torch.randn(2, 2, 32)
cache = torch.randn(64, 32)
try:
    torch.ops.tileops.position_rope_neox_fwd_writes_k_writes_q(positions, q, k, cache)
except IndexError as e:
    print("probe: IndexError raised cleanly:", str(e).splitlines()[0][:120])
