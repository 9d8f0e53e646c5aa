"""Every op with a compile boundary compiles cold with fullgraph=True into only its own operators."""

import pytest
import torch
import torch._dynamo

import tileops
from compile_contract import CONTRACT
from support.graphs import GraphRecorder

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op_class", sorted(CONTRACT))
def test_cold_fullgraph_compile(op_class, device):
    torch._dynamo.reset()
    tileops.clear_kernel_caches()
    op, inputs = CONTRACT[op_class](device)
    rec = GraphRecorder()

    compiled = torch.compile(lambda *a: op(*a), fullgraph=True, backend=rec)
    # Each call on its own copies: an op that writes an input (a decode state) would read the other's.
    traced, eager = ([t.clone() if isinstance(t, torch.Tensor) else t for t in inputs] for _ in range(2))
    result = compiled(*traced)
    allowed = {getattr(torch.ops.tileops, n.split("::")[1]).default for n in type(op).compile_op_names}
    # Tuple results are unpacked with getitem nodes; everything else must be the op's own operators.
    calls = rec.calls()
    assert calls and set(calls) <= allowed, calls
    torch.testing.assert_close(result, op(*eager))
    torch.testing.assert_close(traced, eager)  # and written inputs end alike


def test_registry_matches_the_boundary_ops():
    with_boundary = {e["class"] for e in tileops.op_table() if e["status"] == "implemented" and e["has_boundary"]}
    assert set(CONTRACT) == with_boundary
