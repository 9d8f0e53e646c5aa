"""Independent RoPE formulas for the position tests (float64): HF's rotate_half form for Neox and
Meta LLaMA's complex multiplication for GPT-J, neither sharing code with the C++ reference."""
import torch


def make_cache(max_pos, rot_dim, base=10000.0, dtype=torch.float32):
    """vLLM's cos_sin_cache: [max_pos, rot_dim], cos in the first half, sin in the second; computed
    in float64 and rounded once to `dtype` (rope_ref then uses exactly those rounded values)."""
    inv_freq = 1.0 / base ** (torch.arange(0, rot_dim, 2, dtype=torch.float64) / rot_dim)
    angle = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv_freq
    return torch.cat([angle.cos(), angle.sin()], -1).to(dtype)


def rope_ref(positions, x, cache, neox):
    """x [t, h, d] rotated on its first rot_dim dims, in float64 (returned, x untouched)."""
    rot = cache.shape[1]
    cs = cache.double()[positions.cpu()].to(x.device)
    cos, sin = cs[:, None, : rot // 2], cs[:, None, rot // 2:]
    out = x.double().clone()
    r = out[..., :rot]
    if neox:  # HF apply_rotary_pos_emb: x * cos + rotate_half(x) * sin with duplicated cos/sin
        x1, x2 = r[..., : rot // 2], r[..., rot // 2:]
        rotated = r * torch.cat([cos, cos], -1) + torch.cat([-x2, x1], -1) * torch.cat([sin, sin], -1)
    else:  # Meta LLaMA apply_rotary_emb: pairs as complex numbers times exp(i * angle)
        xc = torch.view_as_complex(r.reshape(*r.shape[:-1], rot // 2, 2).contiguous())
        rotated = torch.view_as_real(xc * torch.complex(cos, sin)).flatten(-2)
    out[..., :rot] = rotated
    return out


TOL = {torch.float32: 2e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}
# The (q, cos_sin_cache) dtype pairs the RoPE entries' dtype_combos allow, and some they refuse.
CACHE_COMBOS = [(torch.float16, torch.float16), (torch.float16, torch.float32), (torch.bfloat16, torch.bfloat16),
                (torch.bfloat16, torch.float32), (torch.float32, torch.float32)]
REFUSED_COMBOS = [(torch.float16, torch.bfloat16), (torch.bfloat16, torch.float16), (torch.float32, torch.float16),
                  (torch.float32, torch.bfloat16)]
COMBOS_TEXT = (r"\(float16, float16\), \(float16, float32\), \(bfloat16, bfloat16\), \(bfloat16, float32\), "
               r"\(float32, float32\)")


def assert_rope_close(got, ref):
    """Rounded-once results: within about an ulp of the dtype (elementwise, scaled by magnitude)."""
    tol = TOL[got.dtype]
    torch.testing.assert_close(got.double(), ref.to(got.dtype).double(), rtol=2 * tol, atol=2 * tol)
