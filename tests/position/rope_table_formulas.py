"""Independent float64 formulas for TileOPs' RoPE entries over x (RopeNeoxFwdOp, RopeNonNeoxFwdOp,
RopeLlama31FwdOp, RopeYarnFwdOp, RopeLongRopeFwdOp), written from the papers / Hugging Face's rope init functions, sharing no code
with the C++ reference: each returns (inverse frequencies [head_dim // 2], float64; amplitude)."""
import math

import torch


def plain(head_dim, base=10000.0):
    """RoFormer's frequencies: theta_i = base^(-2i/d), no scaling."""
    return base ** -(torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim), 1.0


def llama31(head_dim, base=10000.0, scale_factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
            original_max_position=8192):
    """Llama 3.1: keep the short wavelengths, divide the long ones by the factor, blend between."""
    f = base ** -(torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    wavelen = 2 * math.pi / f
    cycles = original_max_position / wavelen  # turns a frequency makes over the original context
    t = ((cycles - low_freq_factor) / (high_freq_factor - low_freq_factor)).clamp(0, 1)
    # t = 1 above high_freq_factor turns (kept), 0 below low_freq_factor (divided), linear between
    return t * f + (1 - t) * f / scale_factor, 1.0


def yarn_tileops(head_dim, base=10000.0, scale=16.0, original_max_position=4096, beta_fast=32.0, beta_slow=1.0,
                 attn_factor=1.0):
    """TileOPs' YaRN (TVM's older rope_freq_yarn): the interpolated frequencies put the scale on the
    base, the correction dims count half = head_dim / 2 dims. Not Hugging Face's YaRN (yarn_hf)."""
    half = head_dim // 2
    e = torch.arange(half, dtype=torch.float64) / half
    extra, inter = base ** -e, (scale * base) ** -e

    def dim_of(turns):  # the dim whose wavelength makes `turns` turns over the original context
        return half * math.log(original_max_position / (2 * math.pi * turns)) / (2 * math.log(base))
    low = max(math.floor(dim_of(beta_fast)), 0)
    high = min(math.ceil(dim_of(beta_slow)), half - 1)
    high = high + 1 if high == low else high
    keep = 1 - ((torch.arange(half, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    return extra * keep + inter * (1 - keep), attn_factor


def yarn_hf(head_dim, base=10000.0, scale=16.0, original_max_position=4096, beta_fast=32.0, beta_slow=1.0):
    """Hugging Face's / vLLM's YaRN (the paper's): extrapolated f / scale, correction dims over head_dim."""
    f = base ** -(torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)

    def dim_of(turns):
        return head_dim * math.log(original_max_position / (2 * math.pi * turns)) / (2 * math.log(base))
    low = max(math.floor(dim_of(beta_fast)), 0)
    high = min(math.ceil(dim_of(beta_slow)), head_dim - 1)
    high = high + 0.001 if high == low else high
    keep = 1 - ((torch.arange(head_dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    return f * keep + f / scale * (1 - keep), (0.1 * math.log(scale) + 1.0 if scale > 1 else 1.0)


def longrope(head_dim, base=10000.0, rescale_factors=None, max_position_embeddings=4096,
             original_max_position_embeddings=4096):
    """LongRoPE: per-frequency divisors (a model's short or long factors), amplitude from the extension."""
    f = base ** -(torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    if rescale_factors is not None:
        f = f / torch.as_tensor(rescale_factors, dtype=torch.float64).cpu()
    s = max_position_embeddings / original_max_position_embeddings
    amp = math.sqrt(1 + math.log(s) / math.log(original_max_position_embeddings)) if s > 1 else 1.0
    return f, amp


def rotate64(x, inv_freq, amplitude, layout, pairs=False):
    """x rotated in float64 at the positions of its sequence axis, Neox halves (pairs: RoFormer's
    adjacent pairs (x[2i], x[2i+1])), with the table's cos and
    sin (times the amplitude) rounded to x's dtype as the entries define it; also the per-element bound
    on the part of the error a float32 table may add (angles and frequencies a few ulps off, and a
    16-bit table entry that rounds the other way), to be scaled by |x1| + |x2|."""
    seq_dim = 0 if layout == "1d" else 1
    pos = torch.arange(x.shape[seq_dim], dtype=torch.float64)
    angle = pos[:, None] * inv_freq[None, :]
    cos = (angle.cos() * amplitude).to(x.dtype).double()
    sin = (angle.sin() * amplitude).to(x.dtype).double()
    eps16 = torch.finfo(x.dtype).eps if x.dtype != torch.float32 else 0.0
    slack = amplitude * (64 * torch.finfo(torch.float32).eps * (1 + angle) + eps16)
    if layout == "2d":
        cos, sin, slack = (t[None, :, None, :] for t in (cos, sin, slack))
    half = x.shape[-1] // 2
    x64 = x.double().cpu()
    if pairs:
        x1, x2 = x64[..., 0::2], x64[..., 1::2]
        want = torch.empty_like(x64)
        want[..., 0::2], want[..., 1::2] = x1 * cos - x2 * sin, x2 * cos + x1 * sin
        return want, (slack * (x1.abs() + x2.abs())).repeat_interleave(2, -1)
    x1, x2 = x64[..., :half], x64[..., half:]
    want = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
    return want, torch.cat([slack, slack], -1) * (x1.abs() + x2.abs()).repeat(*([1] * (x.dim() - 1)), 2)


TOL = {torch.float32: 2e-6, torch.bfloat16: 8e-3, torch.float16: 1e-3}


def assert_close_to(y, want, slack):
    """Rounded once to y's dtype (TOL of it, relative), plus the table's own slack."""
    err = (y.double().cpu() - want).abs()
    bound = 2 * TOL[y.dtype] * (want.abs() + 1) + slack
    bad = err > bound
    assert not bad.any(), f"{int(bad.sum())} elements off, worst {float((err - bound).max())} over the bound"
