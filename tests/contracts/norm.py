"""Cold-compile contract entries of the norm family (see tests/compile_contract.py)."""
import torch


def _rms_norm(device):
    from tileops.norm import RMSNormFwdOp
    x = torch.randn(8, 256, device=device, dtype=torch.float16 if device == "cuda" else torch.float32)
    w = torch.randn(256, device=device, dtype=x.dtype)
    return RMSNormFwdOp((256,)), (x, w)


CONTRACT = {
    "RMSNormFwdOp": _rms_norm,
}
