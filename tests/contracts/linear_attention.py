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


def _gdn_train(device, layout):
    import tileops.linear_attention as la
    b, s, h, d = 4, 8, 4, 8  # DK == DV (the BTHD entry's rule)
    shape = (b, s, h) if layout == "BTHD" else (b, h, s)
    q, k, v = (torch.randn(*shape, d, device=device, dtype=torch.bfloat16) * 0.5 for _ in range(3))
    g, beta = -torch.rand(*shape, device=device).bfloat16(), torch.rand(*shape, device=device).bfloat16()
    cls = la.GatedDeltaNetBTHDFwdOp if layout == "BTHD" else la.GatedDeltaNetBHTDFwdOp
    return cls(chunk_size=4), (q, k, v, g, beta)


def _gdn_bwd(device):
    import tileops.linear_attention as la
    b, h, s, dk, dv = 4, 4, 8, 6, 8
    q, k = (torch.randn(b, h, s, dk, device=device, dtype=torch.float16) * 0.5 for _ in range(2))
    v, dout = (torch.randn(b, h, s, dv, device=device, dtype=torch.float16) for _ in range(2))
    g, beta = -torch.rand(b, h, s, device=device).half(), torch.rand(b, h, s, device=device).half()
    states = torch.randn(b, h, s // 4 + 1, dk, dv, device=device).half()
    return la.GatedDeltaNetBwdOp(chunk_size=4), (dout, q, k, v, g, beta, states)


def _dn_train(device):
    import tileops.linear_attention as la
    b, h, s, dk, dv = 4, 4, 8, 6, 8
    q, k = (torch.randn(b, h, s, dk, device=device) * 0.5 for _ in range(2))
    return la.DeltaNetFwdOp(chunk_size=4), (q, k, torch.randn(b, h, s, dv, device=device),
                                            torch.rand(b, h, s, device=device))


def _dn_bwd(device):
    import tileops.linear_attention as la
    b, h, s, dk, dv, c = 4, 4, 8, 6, 8, 4
    r = lambda *shape: torch.randn(*shape, device=device, dtype=torch.bfloat16)  # noqa: E731
    q, k, v, dout, beta = r(b, h, s, dk), r(b, h, s, dk), r(b, h, s, dv), r(b, h, s, dv), r(b, h, s).sigmoid()
    states = torch.randn(b, h, s // c + 1, dk, dv, device=device)  # float32
    aw, au, w, u = r(b, h, s, c), r(b, h, s, c), r(b, h, s, dk), r(b, h, s, dv)
    return la.DeltaNetBwdOp(chunk_size=c), (dout, q, k, v, beta, states, aw, au, w, u)


def _gla_bwd(device):
    import tileops.linear_attention as la
    b, s, h, dk, dv = 4, 8, 4, 6, 8
    q, k = (torch.randn(b, s, h, dk, device=device, dtype=torch.float16) * 0.5 for _ in range(2))
    v, dout = (torch.randn(b, s, h, dv, device=device).half() for _ in range(2))
    g = -torch.rand(b, s, h, dk, device=device).half()
    states, dht = torch.randn(b, s // 4 + 1, h, dk, dv, device=device), torch.randn(b, h, dk, dv, device=device)
    return la.GLABwdOp(chunk_size=4, scale=0.3), (q, k, v, g, states, dout, dht)


CONTRACT = {
    "GatedDeltaNetPrefillBTHDFwdOp": lambda device: _gdn_prefill(device, "BTHD"),
    "GatedDeltaNetPrefillBHTDFwdOp": lambda device: _gdn_prefill(device, "BHTD"),
    "GLAFwdOp": _gla_seq,
    "DeltaNetDecodeFwdOp": _delta,
    "GatedDeltaNetDecodeFwdOp": _gated,
    "GLADecodeFwdOp": _gla,
    "GatedDeltaNetBHTDFwdOp": lambda device: _gdn_train(device, "BHTD"),
    "GatedDeltaNetBTHDFwdOp": lambda device: _gdn_train(device, "BTHD"),
    "GatedDeltaNetBwdOp": _gdn_bwd,
    "DeltaNetFwdOp": _dn_train,
    "DeltaNetBwdOp": _dn_bwd,
    "GLABwdOp": _gla_bwd,
}
