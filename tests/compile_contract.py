"""The compile-contract registry: every implemented op with a compile boundary, and how to call it.

Each entry builds (op instance, example inputs) for a device. tests/test_compile_contract.py compiles
each one cold with fullgraph=True and checks the graph holds only the op's own operators;
scripts/validate_manifest.py keeps this registry equal to the set of ops that have a boundary.
"""
import torch


def _rms_norm(device):
    from tileops.norm import RMSNormFwdOp
    x = torch.randn(8, 256, device=device, dtype=torch.float16 if device == "cuda" else torch.float32)
    w = torch.randn(256, device=device, dtype=x.dtype)
    return RMSNormFwdOp((256,)), (x, w)


CONTRACT = {
    "RMSNormFwdOp": _rms_norm,
}
