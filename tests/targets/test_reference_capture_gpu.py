"""Ops the reference target serves on CUDA that read inputs on the host (positions, lengths, offsets,
routes) under CUDA graph capture: refused by name before the read (a device sync would break the
capture with a CUDA error), the stream still usable afterwards; outside capture they run as before."""
import pytest
import torch

import tileops

tileops.load()
ops = torch.ops.tileops
pytestmark = pytest.mark.gpu


def position_ids_call():
    x = torch.randn(8, 4, 64, device="cuda", dtype=torch.bfloat16)
    pos = torch.arange(8, device="cuda")
    return lambda: ops.position_rope_neox_position_ids_fwd(x, pos, 64)


def grouped_gemm_call():
    a = torch.randn(48, 32, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(3, 32, 16, device="cuda", dtype=torch.bfloat16)
    sizes = torch.tensor([16, 16, 16], device="cuda", dtype=torch.int32)
    offsets = torch.tensor([0, 16, 32], device="cuda", dtype=torch.int32)
    return lambda: ops.gemm_grouped_gemm_fwd(a, b, sizes, offsets, None, False, False)


@pytest.mark.parametrize("make,name", [(position_ids_call, "position_ids"), (grouped_gemm_call, "batch_sizes")])
def test_a_host_read_during_capture_is_refused_by_name(make, name):
    call = make()
    want = call()  # outside a capture: runs (and warms up whatever it builds)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match=rf"tileops::\w+: the reference target reads '{name}' on the host .* "
                                           r"being captured into a CUDA graph"):
        with torch.cuda.graph(g):
            call()
    torch.cuda.synchronize()
    torch.testing.assert_close(call(), want, rtol=0, atol=0)  # the stream and the process are intact
