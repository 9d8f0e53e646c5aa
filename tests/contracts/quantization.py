"""Cold-compile contract entries of the quantization family (see tests/compile_contract.py)."""
import torch


def _fp8_quant(device):
    import tileops.quantization as quantization
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    return quantization.FP8QuantFwdOp(), (torch.randn(2, 5, 3, 24, device=device, dtype=dtype),)


CONTRACT = {
    "FP8QuantFwdOp": _fp8_quant,
}
