"""GemmFp8FwdOp's float64 oracle: each 128-wide block of K summed exactly, scaled by its scale_a and
scale_b (per tensor: one value broadcast), plus the bias."""
import torch


def fp8_blocks_float64(a, b, scale_a, scale_b, bias):
    m, k = a.shape
    n, blocks = b.shape[0], (k + 127) // 128
    sa, sb = scale_a.double().expand(m, blocks), scale_b.double().expand(n, blocks)
    d = torch.zeros(m, n, dtype=torch.float64, device=a.device)
    for i in range(blocks):
        sl = slice(128 * i, 128 * (i + 1))
        d += (a.double()[:, sl] @ b.double()[:, sl].T) * sa[:, i:i + 1] * sb[:, i][None]
    return d if bias is None else d + bias.double()
