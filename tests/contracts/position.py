"""Cold-compile contract entries of the position family (see tests/compile_contract.py). Only the
RoPE ops have a boundary: AlibiFwdOp/SinusoidalFwdOp have no tensor inputs, QKNormRopeFwdOp is composite."""
import torch


def _rope(name):
    def make(device):
        import tileops.position as pos
        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        positions = torch.arange(8, device=device) % 5
        q = torch.randn(8, 4, 64, device=device, dtype=dtype)
        k = torch.randn(8, 2, 64, device=device, dtype=dtype)
        angle = torch.arange(16, device=device, dtype=torch.float32)[:, None] * torch.rand(16, device=device)
        return getattr(pos, name)(), (positions, q, k, torch.cat([angle.cos(), angle.sin()], -1))
    return make


CONTRACT = {
    "RopeNeoxFwdOp": _rope("RopeNeoxFwdOp"),
    "RopeNonNeoxFwdOp": _rope("RopeNonNeoxFwdOp"),
}
