import torch


def _bmm(device):
    import tileops.gemm as gemm
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    return gemm.BmmFwdOp(), (torch.randn(3, 5, 8, device=device, dtype=dtype),
                             torch.randn(3, 8, 6, device=device, dtype=dtype))


def _gemm(device):
    import tileops.gemm as gemm
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    return gemm.GemmFwdOp(), (torch.randn(5, 8, device=device, dtype=dtype), torch.randn(6, 8, device=device, dtype=dtype))


CONTRACT = {
    "BmmFwdOp": _bmm,
    "GemmFwdOp": _gemm,
}
