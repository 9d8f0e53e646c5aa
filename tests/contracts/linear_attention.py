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


def _gdn_prefill(device, layout):
    import tileops.linear_attention as la
    b, s, h, dk, dv = 4, 8, 4, 6, 8
    shape = (b, s, h) if layout == "BTHD" else (b, h, s)
    q, k = (torch.randn(*shape, dk, device=device, dtype=torch.bfloat16) * 0.5 for _ in range(2))
    v = torch.randn(*shape, dv, device=device, dtype=torch.bfloat16)
    g, beta = -torch.rand(*shape, device=device).bfloat16(), torch.rand(*shape, device=device).bfloat16()
    cls = la.GatedDeltaNetPrefillBTHDFwdOp if layout == "BTHD" else la.GatedDeltaNetPrefillBHTDFwdOp
    return cls(chunk_size=4), (q, k, v, g, beta)


def _gla_seq(device):
    import tileops.linear_attention as la
    b, s, h, dk, dv = 4, 8, 4, 6, 8
    q, k = (torch.randn(b, s, h, dk, device=device, dtype=torch.float16) * 0.5 for _ in range(2))
    v, g = torch.randn(b, s, h, dv, device=device).half(), -torch.rand(b, s, h, dk, device=device).half()
    return la.GLAFwdOp(chunk_size=4), (q, k, v, g, torch.randn(b, h, dk, dv, device=device))


CONTRACT = {
    "GatedDeltaNetPrefillBTHDFwdOp": lambda device: _gdn_prefill(device, "BTHD"),
    "GatedDeltaNetPrefillBHTDFwdOp": lambda device: _gdn_prefill(device, "BHTD"),
    "GLAFwdOp": _gla_seq,
    "DeltaNetDecodeFwdOp": _delta,
    "GatedDeltaNetDecodeFwdOp": _gated,
    "GLADecodeFwdOp": _gla,
}
