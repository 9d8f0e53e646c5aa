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


def _gemm_fp8(device):
    import tileops.gemm as gemm
    a = torch.randn(5, 160, device=device).to(torch.float8_e4m3fn)
    b = torch.randn(6, 160, device=device).to(torch.float8_e4m3fn)
    scale_a, scale_b = torch.rand(5, 2, device=device) + 0.5, torch.rand(1, 1, device=device) + 0.5
    return gemm.GemmFp8FwdOp(), (a, b, scale_a, scale_b, torch.randn(6, device=device, dtype=torch.bfloat16))


def _bmm_fp8(device):
    import tileops.gemm as gemm
    a = torch.randn(4, 5, 48, device=device).to(torch.float8_e4m3fn)
    b = torch.randn(4, 6, 48, device=device).to(torch.float8_e4m3fn)
    return gemm.BmmFp8FwdOp(trans_b=True), (a, b, torch.tensor(0.5, device=device), torch.tensor(2.0, device=device))


CONTRACT = {
    "BmmFp8FwdOp": _bmm_fp8,
    "BmmFwdOp": _bmm,
    "GemmFwdOp": _gemm,
    "GemmFp8FwdOp": _gemm_fp8,
}
