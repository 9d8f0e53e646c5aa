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


def _bmm_fp8_kn(device):
    import tileops.gemm as gemm
    a = torch.randn(4, 5, 48, device=device).to(torch.float8_e4m3fn)
    b = torch.randn(4, 48, 6, device=device).to(torch.float8_e4m3fn)
    return gemm.BmmFp8KNFwdOp(), (a, b, torch.tensor(0.5, device=device), torch.tensor(2.0, device=device))


def _bmm_fp8_nk(device):
    import tileops.gemm as gemm
    a = torch.randn(4, 5, 48, device=device).to(torch.float8_e4m3fn)
    b = torch.randn(4, 6, 48, device=device).to(torch.float8_e4m3fn)
    return gemm.BmmFp8NKFwdOp(out_dtype=torch.float16), (a, b, torch.tensor(0.5, device=device),
                                                         torch.tensor(2.0, device=device))


def _grouped_gemm(device):
    import tileops.gemm as gemm
    dtype = torch.bfloat16 if device == "cuda" else torch.float16
    sizes = torch.tensor([3, 0, 4], dtype=torch.int32, device=device)
    offsets = torch.tensor([0, 3, 3], dtype=torch.int32, device=device)
    return gemm.GroupedGemmFwdOp(), (torch.randn(7, 16, device=device, dtype=dtype),
                                     torch.randn(3, 8, 16, device=device, dtype=dtype), sizes, offsets)


def _w4a16(device):
    import tileops.gemm as gemm
    packed = torch.randint(0, 256, (6, 32), dtype=torch.uint8, device=device)
    scale = torch.rand(6, 2, device=device) * 0.1
    zero = torch.randint(0, 16, (6, 2), dtype=torch.uint8, device=device)
    return gemm.GemmW4A16FwdOp(group_size=32), (torch.randn(5, 64, device=device, dtype=torch.float16), packed,
                                                 scale, zero)


CONTRACT = {
    "BmmFp8FwdOp": _bmm_fp8,
    "BmmFp8KNFwdOp": _bmm_fp8_kn,
    "BmmFp8NKFwdOp": _bmm_fp8_nk,
    "BmmFwdOp": _bmm,
    "GemmFwdOp": _gemm,
    "GemmFp8FwdOp": _gemm_fp8,
    "GemmW4A16FwdOp": _w4a16,
    "GroupedGemmFwdOp": _grouped_gemm,
}
