"""A float64 oracle for the linear-attention tests: one token per (batch, head), as loops over the
state's key rows."""
import math

import torch


def float64_step(kind, q, k, v, state, beta=None, g=None, gk=None, scale=None):
    """One token, per (batch, head), as loops over the key rows of the state."""
    q, k, v, s = q.double(), k.double(), v.double(), state.double().clone()
    b_, h_, dk, dv = s.shape
    o = torch.zeros(b_, h_, dv, dtype=torch.float64)
    for b in range(b_):
        for h in range(h_):
            if kind == "gla":
                for i in range(dk):
                    s[b, h, i] = math.exp(float(gk[b, h, i])) * s[b, h, i] + k[b, h, i] * v[b, h]
                sc = scale if scale > 0 else dk ** -0.5
                o[b, h] = sc * sum(q[b, h, i] * s[b, h, i] for i in range(dk))
                continue
            a = math.exp(float(g[b, h])) if kind == "gated" else 1.0
            old = sum(k[b, h, i] * s[b, h, i] for i in range(dk))  # [DV]
            v_new = float(beta[b, h]) * (v[b, h] - a * old)
            for i in range(dk):
                s[b, h, i] = a * s[b, h, i] + k[b, h, i] * v_new
            o[b, h] = sum(q[b, h, i] * s[b, h, i] for i in range(dk))
    return o, s
