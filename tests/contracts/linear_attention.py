import torch

# Batch 4 and heads 4 split over 2 and 4 ranks; DV 8 too.


def _inputs(device, dtype, extra):
    b, h, dk, dv = 4, 4, 6, 8
    q, k = (torch.randn(b, h, dk, device=device, dtype=dtype) * 0.5 for _ in range(2))
    v = torch.randn(b, h, dv, device=device, dtype=dtype)
    state = torch.randn(b, h, dk, dv, device=device, dtype=dtype)
    return q, k, v, extra(b, h, dk), state


def _delta(device):
    import tileops.linear_attention as la
    q, k, v, beta, state = _inputs(device, torch.bfloat16, lambda b, h, dk: torch.rand(b, h, device=device))
    return la.DeltaNetDecodeFwdOp(), (q, k, v, beta.bfloat16(), state)


def _gated(device):
    import tileops.linear_attention as la
    q, k, v, g, state = _inputs(device, torch.float16, lambda b, h, dk: -torch.rand(b, h, device=device))
    return la.GatedDeltaNetDecodeFwdOp(), (q, k, v, g.half(), torch.rand(4, 4, device=device).half(), state)


def _gla(device):
    import tileops.linear_attention as la
    q, k, v, gk, state = _inputs(device, torch.float32, lambda b, h, dk: -torch.rand(b, h, dk, device=device))
    return la.GLADecodeFwdOp(scale=0.3), (q, k, v, gk, state)


CONTRACT = {
    "DeltaNetDecodeFwdOp": _delta,
    "GatedDeltaNetDecodeFwdOp": _gated,
    "GLADecodeFwdOp": _gla,
}
