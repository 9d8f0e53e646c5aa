"""Cold-compile contract entries of the position family (see tests/compile_contract.py). Only the
RoPE ops (3-D, flat, position ids and TileOPs' scaled ones) have a boundary: AlibiFwdOp/SinusoidalFwdOp
have no tensor inputs, QKNormRopeFwdOp is composite."""
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


def _rope_x(name, **params):
    # TileOPs' entries over x: x of layout '2d' (the positions are its seq axis); LongRoPE's factors.
    def make(device):
        import tileops.position as pos
        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        x = torch.randn(2, 8, 4, 64, device=device, dtype=dtype)
        extra = (torch.linspace(1.0, 4.0, 32, device=device),) if name == "RopeLongRopeFwdOp" else ()
        return getattr(pos, name)(layout="2d", **params), (x,) + extra
    return make


CONTRACT = {
    "RopeNeoxPositionIdsFwdOp": _rope_position_ids,
    "RopeNeoxCachedFwdOp": _rope("RopeNeoxCachedFwdOp"),
    "RopeNonNeoxCachedFwdOp": _rope("RopeNonNeoxCachedFwdOp"),
    "RopeNeoxCachedFlatFwdOp": _rope_flat("RopeNeoxCachedFlatFwdOp"),
    "RopeNonNeoxCachedFlatFwdOp": _rope_flat("RopeNonNeoxCachedFlatFwdOp"),
    "RopeNeoxFwdOp": _rope_x("RopeNeoxFwdOp", base=500000.0),
    "RopeNonNeoxFwdOp": _rope_x("RopeNonNeoxFwdOp"),
    "RopeLlama31FwdOp": _rope_x("RopeLlama31FwdOp", base=500000.0),
    "RopeYarnFwdOp": _rope_x("RopeYarnFwdOp", scale=4.0, attn_factor=1.1386),
    "RopeLongRopeFwdOp": _rope_x("RopeLongRopeFwdOp", max_position_embeddings=16384),
}
