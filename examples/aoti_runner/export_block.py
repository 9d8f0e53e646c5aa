"""Exports a small transformer-style block that calls tileops ops (RMSNorm, rotary embedding, fused
add + RMSNorm, SiLU-and-mul) as an AOTInductor package for CPU, with a dynamic token dimension.

    python examples/aoti_runner/export_block.py OUT_DIR
writes OUT_DIR/block.pt2, OUT_DIR/inputs.pt (tensors for the runner) and OUT_DIR/expected.pt (eager).
"""
import sys
from pathlib import Path

import torch

import tileops

D, HEADS, FFN, MAX_POS = 64, 4, 128, 256


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.norm1 = torch.nn.Parameter(torch.rand(D, generator=g) + 0.5)
        self.norm2 = torch.nn.Parameter(torch.rand(D, generator=g) + 0.5)
        self.qkv = torch.nn.Parameter(torch.randn(D, 3 * D, generator=g) / D**0.5)
        self.up = torch.nn.Parameter(torch.randn(D, 2 * FFN, generator=g) / D**0.5)
        self.down = torch.nn.Parameter(torch.randn(FFN, D, generator=g) / FFN**0.5)
        inv_freq = 1.0 / 10000 ** (torch.arange(0, D // HEADS, 2) / (D // HEADS))
        angles = torch.arange(MAX_POS)[:, None] * inv_freq[None, :]
        self.register_buffer("cos_sin", torch.cat([angles.cos(), angles.sin()], dim=-1))

    def forward(self, x, residual, positions):
        t = x.shape[0]
        h = torch.ops.tileops.norm_rms_norm_fwd(x, self.norm1, [D])
        q, k, v = (h @ self.qkv).split(D, dim=-1)
        q, k = q.reshape(t, HEADS, D // HEADS).contiguous(), k.reshape(t, HEADS, D // HEADS).contiguous()
        torch.ops.tileops.position_rope_neox_cached_fwd_writes_k_writes_q(positions, q, k, self.cos_sin)
        mixed = (q * k).reshape(t, D) + v  # a stand-in for attention: the block is about the ops
        y, residual = torch.ops.tileops.norm_fused_add_rms_norm_fwd(mixed, residual, self.norm2, [D])
        return torch.ops.tileops.activation_silu_and_mul_fwd(y @ self.up) @ self.down, residual


def example_inputs(tokens: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(tokens, D, generator=g), torch.randn(tokens, D, generator=g),
            torch.randint(0, MAX_POS, (tokens,), generator=g))


def main(out: Path) -> None:
    tileops.load()
    out.mkdir(parents=True, exist_ok=True)
    block = Block().eval()
    tokens = torch.export.Dim("tokens", min=2, max=1024)
    with torch.no_grad():
        ep = torch.export.export(block, example_inputs(8, seed=1),
                                 dynamic_shapes=({0: tokens}, {0: tokens}, {0: tokens}))
        torch._inductor.aoti_compile_and_package(ep, package_path=str(out / "block.pt2"))
        inputs = example_inputs(37, seed=2)  # another token count than the export's
        torch.save(list(inputs), out / "inputs.pt")
        torch.save(list(block(*inputs)), out / "expected.pt")
    print(f"wrote {out / 'block.pt2'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
