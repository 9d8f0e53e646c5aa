"""How far GemmFp8FwdOp's per-tensor results are from a float64 sum, on each target and for
torch._scaled_mm, on a GPU: relative to |d| and to the sum of |terms| (what the GPU tests bound).
    python3 scripts/debug/probe_fp8_gemm.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "python"))
import tileops  # noqa: E402


def float64_product(a, b, sa, sb, bias):
    d = (a.double() @ b.double().T) * float(sa) * float(sb)
    return d if bias is None else d + bias.double()


def main():
    tileops.load()
    ops = torch.ops.tileops
    torch.manual_seed(0)
    for m, n, k in [(1, 1792, 2048), (128, 2112, 896), (33, 64, 48), (64, 256, 512)]:
        for bias_dtype in (None, torch.bfloat16):
            a = (torch.randn(m, k, device="cuda") * 4).to(torch.float8_e4m3fn)
            b = (torch.randn(n, k, device="cuda") * 4).to(torch.float8_e4m3fn)
            sa, sb = torch.rand(1, 1, device="cuda") + 0.5, torch.rand(1, 1, device="cuda") + 0.5
            bias = None if bias_dtype is None else torch.randn(n, device="cuda", dtype=bias_dtype)
            want = float64_product(a, b, sa, sb, bias)
            terms = float64_product(a.float().abs(), b.float().abs(), sa, sb, None)
            got = {t: ops.gemm_fp8_fwd(a, b, sa, sb, bias, target=t) for t in ("cublaslt", "reference")}
            got["_scaled_mm"] = torch._scaled_mm(a, b.t(), scale_a=sa.reshape(()), scale_b=sb.reshape(()), bias=bias,
                                                 out_dtype=torch.bfloat16)
            cells = []
            for name, d in got.items():
                err = (d.double() - want).abs()
                cells.append(f"{name}: err/|d| {float((err / want.abs().clamp_min(1e-3)).max()):.1e}, "
                             f"err/terms {float((err / terms.clamp_min(1e-9)).max()):.1e}")
            same = torch.equal(got["cublaslt"], got["_scaled_mm"])
            print(f"{m}x{n}x{k} bias={bias_dtype}: " + " | ".join(cells) + f" | cublaslt == _scaled_mm: {same}")


if __name__ == "__main__":
    main()
