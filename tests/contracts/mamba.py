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


def _da_cumsum(device):
    import tileops.mamba as mamba
    return mamba.DaCumsumFwdOp(chunk_len=4, dtype=torch.bfloat16, dt_softplus=True), (
        torch.randn(2, 8, 3, device=device), -torch.rand(3, device=device), torch.randn(3, device=device))


def _chunk_state(device):
    import tileops.mamba as mamba
    dtype = torch.bfloat16 if device == "cuda" else torch.float16
    b, nc, q, h, p, n = 2, 2, 4, 4, 3, 5
    return mamba.SSDChunkStateFwdOp(), (torch.randn(b, nc * q, h, p, device=device, dtype=dtype),
                                        torch.randn(b, nc * q, 2, n, device=device, dtype=dtype),
                                        torch.rand(b, h, nc, q, device=device).to(dtype),
                                        -torch.rand(b, h, nc, q, device=device).cumsum(-1), None)


def _chunk_scan(device):
    import tileops.mamba as mamba
    dtype = torch.bfloat16 if device == "cuda" else torch.float16
    b, nc, q, h, p, n = 2, 2, 4, 4, 3, 5
    return mamba.SSDChunkScanFwdOp(), (torch.randn(b, nc * q, h, p, device=device, dtype=dtype),
                                       torch.randn(b, nc, 2, q, q, device=device, dtype=dtype),
                                       -torch.rand(b, h, nc, q, device=device).cumsum(-1),
                                       torch.randn(b, nc * q, 2, n, device=device, dtype=dtype),
                                       torch.randn(b, nc, h, p, n, device=device),
                                       torch.rand(b, h, nc, q, device=device).to(dtype))


def _cb_producer(device):
    import tileops.mamba as mamba
    dtype = torch.bfloat16 if device == "cuda" else torch.float16
    b, nc, q, g, n = 4, 3, 4, 2, 5
    return mamba.CBProducerFwdOp(batch=b, num_chunks=nc, n_groups=g, chunk_len=q, d_state=n), (
        torch.randn(b, nc * q, g, n, device=device, dtype=dtype), torch.randn(b, nc * q, g, n, device=device, dtype=dtype))


CONTRACT = {
    "CBProducerFwdOp": _cb_producer,
    "DaCumsumFwdOp": _da_cumsum,
    "SSDChunkStateFwdOp": _chunk_state,
    "SSDChunkScanFwdOp": _chunk_scan,
    "SSDStatePassingFwdOp": _state_passing,
    "SSDDecodeFwdOp": _decode,
}
