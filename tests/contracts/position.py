"""Cold-compile contract entries of the position family (see tests/compile_contract.py). Only the
RoPE ops (3-D, flat and position ids) have a boundary: AlibiFwdOp/SinusoidalFwdOp have no tensor inputs,
QKNormRopeFwdOp is composite."""
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


def _rope_flat(name):
    # vLLM's call: q/k as [t, heads * head_size], int32 positions with per-token offsets.
    def make(device):
        import tileops.position as pos
        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        positions = (torch.arange(8, device=device) % 5).int()
        offsets = torch.full((8,), 3, device=device, dtype=torch.int32)
        q = torch.randn(8, 4 * 64, device=device, dtype=dtype)
        k = torch.randn(8, 2 * 64, device=device, dtype=dtype)
        angle = torch.arange(16, device=device, dtype=torch.float32)[:, None] * torch.rand(16, device=device)
        return getattr(pos, name)(head_size=64), (positions, q, k, torch.cat([angle.cos(), angle.sin()], -1), offsets)
    return make


def _rope_position_ids(device):
    import tileops.position as pos
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    x = torch.randn(8, 4, 64, device=device, dtype=dtype)
    return pos.RopeNeoxPositionIdsFwdOp(max_position=16, rotary_dim=32), (x, torch.arange(8, device=device) * 2)


CONTRACT = {
    "RopeNeoxPositionIdsFwdOp": _rope_position_ids,
    "RopeNeoxFwdOp": _rope("RopeNeoxFwdOp"),
    "RopeNonNeoxFwdOp": _rope("RopeNonNeoxFwdOp"),
    "RopeNeoxFlatFwdOp": _rope_flat("RopeNeoxFlatFwdOp"),
    "RopeNonNeoxFlatFwdOp": _rope_flat("RopeNonNeoxFlatFwdOp"),
}
