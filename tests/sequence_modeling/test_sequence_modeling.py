"""The sequence-modeling family (manifests/sequence_modeling.yaml) on CPU: each op against a float64
formula written here on small shapes, EngramGateConvBwdOp against torch.autograd of the forward's
formula of y (and through the autograd pairing), and the refusals naming op, argument and rule."""
import math
import re

import pytest
import torch

import tileops

tileops.load()
ops = torch.ops.tileops
FWD, BWD = ops.sequence_modeling_engram_gate_conv_fwd, ops.sequence_modeling_engram_gate_conv_bwd
DECODE, FFT = ops.sequence_modeling_engram_decode_fwd, ops.sequence_modeling_fftc2_c_fwd
PRE, POST = ops.sequence_modeling_mhc_pre_fwd, ops.sequence_modeling_mhc_post_fwd
EPS = 1e-6


def close(got, want, dtype, scale=1.0):
    """got (in dtype) against the float64 want: a few roundings of dtype, relative to want's size."""
    tol = {torch.float16: 4e-3, torch.bfloat16: 3e-2, torch.float32: 1e-5}[dtype]
    size = want.abs().max().item() if want.numel() else 0.0
    torch.testing.assert_close(got.double(), want.double(), rtol=tol, atol=tol * scale * max(1.0, size))


# ---- Engram: the formula in float64 ----------------------------------------------------------------

def rrms64(x):
    return (x.square().mean(-1) + EPS).rsqrt()


def causal_conv64(u, w):
    """c[:, t] = sum_p w[p] * u[:, t - (K - 1) + p], zero before the sequence, one position at a time."""
    taps, c = w.shape[0], torch.zeros_like(u)
    for t in range(u.shape[1]):
        for p in range(taps):
            s = t - (taps - 1) + p
            if s >= 0:
                c[:, t] += w[p] * u[:, s]
    return c


def gate64(h, k, v, w_h, w_v, conv_w):
    """(y, vhat, alpha, rrms_h, rrms_k, rrms_v) of EngramGateConvFwdOp; differentiable."""
    rh, rk = rrms64(h), rrms64(k)
    alpha = torch.sigmoid((h * rh[..., None] * w_h * k * rk[..., None] * w_h).sum(-1) / math.sqrt(h.shape[-1]))
    vhat = alpha[..., None] * v
    rv = rrms64(vhat)
    c = causal_conv64(vhat * rv[..., None] * w_v, conv_w)
    return c * torch.sigmoid(c) + vhat, vhat, alpha, rh, rk, rv


def engram_inputs(dtype, m=2, t=7, d=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    def r(*s, scale=1.0):
        return (torch.randn(*s, generator=g) * scale).to(dtype)
    return (r(m, t, d), r(m, t, d, scale=0.5), r(m, t, d, scale=0.5), (1 + 0.2 * torch.randn(d, generator=g)).to(dtype),
            (1 + 0.2 * torch.randn(d, generator=g)).to(dtype), r(4, d, scale=0.4))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gate_conv_fwd_matches_the_float64_formula(dtype):
    ins = engram_inputs(dtype)
    got = FWD(*ins, 2, 7, 24)
    want = gate64(*(t.double() for t in ins))
    for name, g, w in zip(("y", "vhat", "alpha", "rrms_h", "rrms_k", "rrms_v"), got, want):
        assert g.shape == w.shape, name
        assert g.dtype == (dtype if name in ("y", "vhat") else torch.float32), name
        close(g, w, dtype if name in ("y", "vhat") else torch.float32)


def test_gate_conv_fwd_is_causal():
    h, k, v, w_h, w_v, conv_w = engram_inputs(torch.float16)
    y = FWD(h, k, v, w_h, w_v, conv_w, 2, 7, 24)[0]
    h2, k2, v2 = h.clone(), k.clone(), v.clone()
    h2[:, 4:], k2[:, 4:], v2[:, 4:] = 0.5, -0.5, 2.0  # the future changes, positions 0..3 do not
    y2 = FWD(h2, k2, v2, w_h, w_v, conv_w, 2, 7, 24)[0]
    assert torch.equal(y[:, :4], y2[:, :4]) and not torch.equal(y[:, 4:], y2[:, 4:])


def test_gate_conv_fwd_empty_batch():
    ins = engram_inputs(torch.bfloat16, m=0)
    y, vhat, alpha, *_ = FWD(*ins, 0, 7, 24)
    assert y.shape == vhat.shape == (0, 7, 24) and alpha.shape == (0, 7)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gate_conv_bwd_matches_autograd_of_the_formula(dtype):
    ins = engram_inputs(dtype, seed=1)
    _, vhat, alpha, rh, rk, rv = FWD(*ins, 2, 7, 24)  # the saved tensors, as the forward gives them
    dy = torch.randn(2, 7, 24, generator=torch.Generator().manual_seed(2)).to(dtype)
    got = BWD(dy, *ins, vhat, alpha, rh, rk, rv, 2, 7, 24)

    leaves = [t.double().requires_grad_() for t in ins]
    want = torch.autograd.grad(gate64(*leaves)[0], leaves, dy.double())
    for name, gt, w, x in zip(("dh", "dk", "dv", "drms_w_h", "drms_w_v", "dconv_w"), got, want, ins):
        assert gt.dtype == dtype and gt.shape == x.shape, name
        close(gt, w, dtype, scale=2.0)


def test_gate_conv_autograd_pairing_gives_the_formula_gradients():
    prev = tileops.enable_autograd(True)
    try:
        dtype = torch.float16
        ins = [t.requires_grad_() for t in engram_inputs(dtype, seed=4)]
        from tileops.sequence_modeling import EngramGateConvFwdOp
        y, vhat, alpha, rh, rk, rv = EngramGateConvFwdOp(2, 7, 24)(*ins)
        # the saved statistics are marked not differentiable (no_grad in the pairing), y is not
        assert y.requires_grad and not any(t.requires_grad for t in (vhat, alpha, rh, rk, rv))
        gy = torch.randn(2, 7, 24).to(dtype)
        (y.float() * gy.float()).sum().backward()
        leaves = [t.detach().double().requires_grad_() for t in ins]
        want = torch.autograd.grad(gate64(*leaves)[0], leaves, gy.double())
        for x, w in zip(ins, want):
            close(x.grad, w, dtype, scale=2.0)
    finally:
        tileops.enable_autograd(prev)


def test_gate_conv_refusals():
    h, k, v, w_h, w_v, conv_w = engram_inputs(torch.bfloat16)
    op = "tileops::sequence_modeling_engram_gate_conv_fwd"
    with pytest.raises(RuntimeError, match=re.escape(f"{op}: 'h' must have shape [m, seq_len, d]")):
        FWD(h, k, v, w_h, w_v, conv_w, 2, 6, 24)  # seq_len param disagrees with h
    with pytest.raises(RuntimeError, match=re.escape(f"{op}: 'conv_w' must have shape [4, d]")):
        FWD(h, k, v, w_h, w_v, conv_w[:3], 2, 7, 24)
    with pytest.raises(TypeError, match=re.escape(f"{op}: 'h' must have dtype float16 | bfloat16, got float32")):
        FWD(h.float(), k.float(), v.float(), w_h.float(), w_v.float(), conv_w.float(), 2, 7, 24)
    with pytest.raises(TypeError, match=re.escape(f"{op}: 'v' must have the dtype of 'h'")):
        FWD(h, k, v.half(), w_h, w_v, conv_w, 2, 7, 24)
    with pytest.raises(ValueError, match=re.escape(f"{op}: shape rule 'd > 0' is violated (left side 0, right side 0) with d=0")):
        FWD(h[..., :0], k[..., :0], v[..., :0], w_h[:0], w_v[:0], conv_w[:, :0], 2, 7, 0)
    bop = "tileops::sequence_modeling_engram_gate_conv_bwd"
    saved = FWD(h, k, v, w_h, w_v, conv_w, 2, 7, 24)[1:]
    with pytest.raises(RuntimeError, match=re.escape(f"{bop}: 'alpha' must have shape [m, seq_len]")):
        BWD(h, h, k, v, w_h, w_v, conv_w, saved[0], saved[1][:, :3], *saved[2:], 2, 7, 24)


# ---- EngramDecodeFwdOp ------------------------------------------------------------------------------

def decode64(e, h, state, w_k, w_v, w_h, w_v_rms, conv_w, cache, dilation):
    """(y_t, new_conv_state) in float64, the cache left-padded to `cache` rows, tap by tap."""
    e, h, state, w_k, w_v, w_h, w_v_rms, conv_w = (t.double() for t in (e, h, state, w_k, w_v, w_h, w_v_rms, conv_w))
    k, v = e @ w_k, e @ w_v
    alpha = torch.sigmoid((h * rrms64(h)[:, None] * w_h * k * rrms64(k)[:, None] * w_h).sum(-1) / math.sqrt(h.shape[-1]))
    vhat = alpha[:, None] * v
    u = vhat * rrms64(vhat)[:, None] * w_v_rms
    padded = torch.cat([torch.zeros(h.shape[0], cache - state.shape[1], h.shape[1], dtype=torch.float64), state], 1)
    taps = conv_w.shape[0]
    c = conv_w[taps - 1] * u
    for p in range(taps - 1):
        steps_ago = (taps - 1 - p) * dilation  # row cache - j is j steps ago
        c = c + conv_w[p] * padded[:, cache - steps_ago]
    new = torch.cat([padded, u[:, None]], 1)[:, 1:]  # the oldest row out, u in (none kept of none)
    return c * torch.sigmoid(c) + vhat, new


def decode_inputs(dtype, b=3, d_mem=10, d=16, rows=7, taps=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    def r(*s, scale=1.0):
        return (torch.randn(*s, generator=g) * scale).to(dtype)
    return (r(b, d_mem), r(b, d), r(b, rows, d), r(d_mem, d, scale=0.4), r(d_mem, d, scale=0.4),
            (1 + 0.2 * torch.randn(d, generator=g)).to(dtype), (1 + 0.2 * torch.randn(d, generator=g)).to(dtype),
            r(taps, d, scale=0.4))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("rows,cache,taps,dilation", [(9, 9, 4, 3), (4, 9, 4, 3), (0, 6, 3, 2), (2, 2, 1, 5), (0, 0, 1, 1)])
def test_decode_matches_the_float64_step(dtype, rows, cache, taps, dilation):
    ins = decode_inputs(dtype, rows=rows, taps=taps)
    y, new = DECODE(*ins, 3, 10, 16, cache, taps, dilation)
    want_y, want_new = decode64(*ins, cache, dilation)
    assert y.dtype == new.dtype == dtype and new.shape == (3, cache, 16)
    close(y, want_y, dtype)
    close(new, want_new, dtype)
    if cache > 1:  # the cache shifts by one row: the kept rows are copied exactly
        assert torch.equal(new[:, :-1].double(), want_new[:, :-1])


def test_decode_steps_continue_the_prefill_convolution():
    """With kernel 4 and dilation 1, decoding a sequence token by token from an empty cache gives
    EngramGateConvFwdOp's y for the projections the decode step computes."""
    dtype, b, d_mem, d, t = torch.float16, 2, 12, 16, 9
    g = torch.Generator().manual_seed(5)
    e = (torch.randn(b, t, d_mem, generator=g) * 0.5).to(dtype)
    h = torch.randn(b, t, d, generator=g).to(dtype)
    w_k, w_v = ((torch.randn(d_mem, d, generator=g) * 0.4).to(dtype) for _ in range(2))
    w_h, w_vr = ((1 + 0.2 * torch.randn(d, generator=g)).to(dtype) for _ in range(2))
    conv_w = (torch.randn(4, d, generator=g) * 0.4).to(dtype)
    state, ys = torch.zeros(b, 0, d, dtype=dtype), []
    for i in range(t):
        y, state = DECODE(e[:, i], h[:, i], state, w_k, w_v, w_h, w_vr, conv_w, b, d_mem, d, 3, 4, 1)
        ys.append(y)
    k, v = (e.double() @ w.double() for w in (w_k, w_v))
    want = gate64(h.double(), k, v, w_h.double(), w_vr.double(), conv_w.double())[0]
    close(torch.stack(ys, 1), want, dtype, scale=2.0)


def test_decode_refusals():
    ins = decode_inputs(torch.bfloat16, rows=7)
    op = "tileops::sequence_modeling_engram_decode_fwd"
    with pytest.raises(ValueError, match=re.escape(f"{op}: shape rule 'L <= max_conv_len' is violated (left side 7, right side 6)")):
        DECODE(*ins, 3, 10, 16, 6, 4, 2)
    with pytest.raises(ValueError, match=re.escape(
            f"{op}: shape rule 'max_conv_len >= dilation * (conv_kernel_size - 1)' is violated (left side 8, right side 9)")):
        DECODE(*ins, 3, 10, 16, 8, 4, 3)
    with pytest.raises(ValueError, match=re.escape(f"{op}: shape rule 'dilation >= 1' is violated (left side 0, right side 1)")):
        DECODE(*ins, 3, 10, 16, 9, 4, 0)
    with pytest.raises(RuntimeError, match=re.escape(f"{op}: 'conv_w' must have shape [conv_kernel_size, d]")):
        DECODE(*ins, 3, 10, 16, 9, 3, 1)
    with pytest.raises(RuntimeError, match=re.escape(f"{op}: 'w_k' must have shape [d_mem, d]")):
        DECODE(ins[0], ins[1], ins[2], ins[3].t().contiguous(), *ins[4:], 3, 10, 16, 9, 4, 1)


# ---- FFTC2CFwdOp -----------------------------------------------------------------------------------

def dft64(x):
    n = x.shape[-1]
    j = torch.arange(n, dtype=torch.float64)
    w = torch.exp(torch.complex(torch.zeros(n, n, dtype=torch.float64), -2 * math.pi * torch.outer(j, j) / n))
    return x.to(torch.complex128) @ w.T


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("shape", [(1,), (2,), (64,), (3, 128), (2, 2, 256)])
def test_fft_matches_the_float64_dft(dtype, shape):
    x = torch.randn(*shape, dtype=dtype)
    y = FFT(x)
    assert y.dtype == dtype and y.shape == x.shape
    tol = 1e-5 if dtype == torch.complex64 else 1e-12
    torch.testing.assert_close(y.to(torch.complex128), dft64(x), rtol=tol, atol=tol * math.sqrt(shape[-1]) * 4)


def test_fft_reads_a_strided_input():
    base = torch.randn(4, 2 * 32, dtype=torch.complex64)
    x = base[:, ::2]
    torch.testing.assert_close(FFT(x), FFT(x.contiguous()), rtol=0, atol=0)


def test_fft_refusals():
    op = "tileops::sequence_modeling_fftc2_c_fwd"
    with pytest.raises(ValueError, match=re.escape(f"{op}: shape rule 'is_pow2(n) == 1' is violated (left side 0, right side 1) with n=12")):
        FFT(torch.randn(3, 12, dtype=torch.complex64))
    with pytest.raises(ValueError, match=re.escape(f"{op}: shape rule 'n > 0' is violated")):
        FFT(torch.randn(3, 0, dtype=torch.complex64))
    with pytest.raises(TypeError, match=re.escape(f"{op}: 'input' must have dtype complex64 | complex128, got float32")):
        FFT(torch.randn(3, 16))
    with pytest.raises(RuntimeError, match=re.escape(f"{op}: 'input' must have shape [..., n]")):
        FFT(torch.tensor(1j, dtype=torch.complex64))


# ---- mHC ---------------------------------------------------------------------------------------------

def mhc_pre64(phi, x, b, n, a_pre, a_post, a_res, repeat, eps):
    phi, x, b = phi.double(), x.double(), b.double()
    batch, width = x.shape
    r = x.square().sum(-1).sqrt() / math.sqrt(width) + 1e-4
    hc = (x @ phi) / r[:, None]
    pre = torch.sigmoid(a_pre * hc[:, :n] + b[:n])
    post = 2 * torch.sigmoid(a_post * hc[:, n:2 * n] + b[n:2 * n])
    res = (a_res * hc[:, 2 * n:] + b[2 * n:]).reshape(batch, n, n)
    res = torch.exp(res - res.max(-1, keepdim=True).values)
    for _ in range(repeat):
        res = res / (res.sum(-1, keepdim=True) + eps)
        res = res / (res.sum(-2, keepdim=True) + eps)
    streams = x.reshape(batch, n, width // n)
    x_layer = torch.einsum("bj,bjc->bc", pre, streams)
    x_res = torch.einsum("bij,bjc->bic", res, streams).reshape(batch, width)
    return x_res, x_layer, post


def mhc_pre_inputs(b=3, n=4, c=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n * c, n * n + 2 * n, generator=g) * 0.3, torch.randn(b, n * c, generator=g).bfloat16(),
            torch.randn(n * n + 2 * n, generator=g) * 0.3)


@pytest.mark.parametrize("n,repeat", [(4, 0), (4, 1), (4, 20), (2, 3), (1, 2)])
def test_mhc_pre_matches_the_float64_formula(n, repeat):
    phi, x, b = mhc_pre_inputs(n=n)
    got = PRE(phi, x, b, n, 0.8, 1.2, 0.6, repeat, 0.02)
    want = mhc_pre64(phi, x, b, n, 0.8, 1.2, 0.6, repeat, 0.02)
    for name, g, w, dt in zip(("x_res", "x_layer", "h_post"), got, want, (torch.bfloat16, torch.bfloat16, torch.float32)):
        assert g.dtype == dt and g.shape == w.shape, name
        close(g, w, dt)


def test_mhc_pre_then_post_is_the_hyper_connection():
    """MHCPostFwdOp adds the layer's output, spread by MHCPreFwdOp's h_post, to its x_res."""
    phi, x, b = mhc_pre_inputs(seed=1)
    x_res, x_layer, h_post = PRE(phi, x, b, 4, 1.0, 1.0, 1.0, 5, 0.02)
    out = POST(x_layer, h_post, x_res)  # the layer taken as the identity
    want = (h_post.double()[:, :, None] * x_layer.double()[:, None, :]).reshape(3, 32) + x_res.double()
    close(out, want, torch.bfloat16)


def test_mhc_post_matches_the_float64_formula():
    g = torch.Generator().manual_seed(2)
    layer, h_post = torch.randn(3, 8, generator=g).bfloat16(), torch.rand(3, 4, generator=g) * 2
    x_res = torch.randn(3, 32, generator=g).bfloat16()
    out = POST(layer, h_post, x_res)
    want = torch.stack([h_post.double()[:, i, None] * layer.double() + x_res.double()[:, 8 * i:8 * (i + 1)]
                        for i in range(4)], 1).reshape(3, 32)
    assert out.dtype == torch.bfloat16
    close(out, want, torch.bfloat16)


def test_mhc_refusals():
    phi, x, b = mhc_pre_inputs()
    op = "tileops::sequence_modeling_mhc_pre_fwd"
    with pytest.raises(ValueError, match=re.escape(f"{op}: shape rule 'D % n_expand == 0' is violated (left side 2, right side 0)")):
        PRE(torch.randn(32, 15), x, torch.randn(15), 3, 1.0, 1.0, 1.0, 1, 0.02)
    with pytest.raises(RuntimeError, match=re.escape(f"{op}: 'phi' must have shape [D, n_expand * n_expand + 2 * n_expand]")):
        PRE(phi, x, b, 2, 1.0, 1.0, 1.0, 1, 0.02)  # phi has 24 columns, n_expand 2 wants 8
    with pytest.raises(TypeError, match=re.escape(f"{op}: 'x' must have dtype bfloat16, got float16")):
        PRE(phi, x.half(), b, 4, 1.0, 1.0, 1.0, 1, 0.02)
    with pytest.raises(ValueError, match=re.escape(f"{op}: shape rule 'sinkhorn_repeat >= 0' is violated (left side -1, right side 0)")):
        PRE(phi, x, b, 4, 1.0, 1.0, 1.0, -1, 0.02)
    pop = "tileops::sequence_modeling_mhc_post_fwd"
    with pytest.raises(RuntimeError, match=re.escape(f"{pop}: 'x_res' must have shape [batch, n_expand * c_x]")):
        POST(torch.randn(3, 8).bfloat16(), torch.rand(3, 4), torch.randn(3, 24).bfloat16())
    with pytest.raises(TypeError, match=re.escape(f"{pop}: 'h_post' must have dtype float32, got bfloat16")):
        POST(torch.randn(3, 8).bfloat16(), torch.rand(3, 4).bfloat16(), torch.randn(3, 32).bfloat16())
