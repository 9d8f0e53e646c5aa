import torch


def _state_passing(device):
    import tileops.mamba as mamba
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    states = torch.randn(2, 5, 3, 16, device=device, dtype=dtype)
    decay = -torch.rand(2, 3, 5, device=device).cumsum(-1)
    return mamba.SSDStatePassingFwdOp(), (states, decay, torch.randn(2, 3, 16, device=device))


def _decode(device):
    import tileops.mamba as mamba
    dtype = torch.bfloat16 if device == "cuda" else torch.float16
    b, h, p, n, g = 4, 4, 8, 16, 2  # batch 4: a Shard(0) state stays put on 4 ranks
    return mamba.SSDDecodeFwdOp(), (-torch.rand(h, p, n, device=device), torch.rand(b, h, p, device=device) * 0.1,
                                    torch.randn(b, h, p, device=device, dtype=dtype),
                                    torch.randn(b, g, n, device=device, dtype=dtype),
                                    torch.randn(b, g, n, device=device, dtype=dtype),
                                    torch.randn(b, h, p, n, device=device))


CONTRACT = {
    "SSDStatePassingFwdOp": _state_passing,
    "SSDDecodeFwdOp": _decode,
}
