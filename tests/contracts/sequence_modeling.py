import torch

# Batch 4 where an op shards it (mHC, the FFT's leading dims): splits over 2 and 4 ranks.


def _engram_inputs(device, dtype, m=2, t=5, d=16):
    h = torch.randn(m, t, d, device=device, dtype=dtype)
    k, v = (torch.randn(m, t, d, device=device, dtype=dtype) * 0.5 for _ in range(2))
    w_h, w_v = (1 + 0.1 * torch.randn(d, device=device, dtype=dtype) for _ in range(2))
    conv_w = torch.randn(4, d, device=device, dtype=dtype) * 0.3
    return h, k, v, w_h, w_v, conv_w


def _gate_fwd(device):
    import tileops.sequence_modeling as sm
    return sm.EngramGateConvFwdOp(2, 5, 16), _engram_inputs(device, torch.bfloat16)


def _gate_bwd(device):
    import tileops.sequence_modeling as sm
    dtype = torch.bfloat16 if device == "cuda" else torch.float16
    ins = _engram_inputs(device, dtype)
    _, vhat, alpha, rrms_h, rrms_k, rrms_v = sm.EngramGateConvFwdOp(2, 5, 16)(*ins)
    dy = torch.randn(2, 5, 16, device=device, dtype=dtype)
    return sm.EngramGateConvBwdOp(2, 5, 16), (dy, *ins, vhat, alpha, rrms_h, rrms_k, rrms_v)


def _decode(device):
    import tileops.sequence_modeling as sm
    dtype = torch.float16
    b, d_mem, d, cache, taps, dilation = 4, 12, 16, 7, 3, 3
    return sm.EngramDecodeFwdOp(b, d_mem, d, cache, taps, dilation), (
        torch.randn(b, d_mem, device=device, dtype=dtype), torch.randn(b, d, device=device, dtype=dtype),
        torch.randn(b, 5, d, device=device, dtype=dtype),  # 5 of 7 rows: a cache still filling
        torch.randn(d_mem, d, device=device, dtype=dtype) * 0.3, torch.randn(d_mem, d, device=device, dtype=dtype) * 0.3,
        torch.ones(d, device=device, dtype=dtype), torch.ones(d, device=device, dtype=dtype),
        torch.randn(taps, d, device=device, dtype=dtype) * 0.3)


def _fft(device):
    import tileops.sequence_modeling as sm
    return sm.FFTC2CFwdOp(), (torch.randn(4, 3, 64, device=device, dtype=torch.complex64),)


def _mhc_pre(device):
    import tileops.sequence_modeling as sm
    b, n, c = 4, 4, 8
    return sm.MHCPreFwdOp(n, 0.7, 0.9, 1.1, 3), (
        torch.randn(n * c, n * n + 2 * n, device=device) * 0.2, torch.randn(b, n * c, device=device, dtype=torch.bfloat16),
        torch.randn(n * n + 2 * n, device=device) * 0.2)


def _mhc_post(device):
    import tileops.sequence_modeling as sm
    b, n, c = 4, 4, 8
    return sm.MHCPostFwdOp(), (torch.randn(b, c, device=device, dtype=torch.bfloat16), torch.rand(b, n, device=device) * 2,
                               torch.randn(b, n * c, device=device, dtype=torch.bfloat16))


CONTRACT = {
    "EngramDecodeFwdOp": _decode,
    "EngramGateConvBwdOp": _gate_bwd,
    "EngramGateConvFwdOp": _gate_fwd,
    "FFTC2CFwdOp": _fft,
    "MHCPostFwdOp": _mhc_post,
    "MHCPreFwdOp": _mhc_pre,
}
