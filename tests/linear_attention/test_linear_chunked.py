"""The chunked training entries of the linear-attention family (manifests/linear_attention.yaml):
GatedDeltaNetBHTDFwdOp / GatedDeltaNetBTHDFwdOp, DeltaNetFwdOp and the backward ops GatedDeltaNetBwdOp,
DeltaNetBwdOp and GLABwdOp, on CPU. Forwards against a float64 token recurrence written here (o and
the states at chunk starts) and the WY matrices from their definition; the intermediates against the
chunked form a kernel computes from them; backwards against torch.autograd through that float64
recurrence; refusals naming the op, the argument and the rule."""
import pytest
import torch

import tileops
from tileops.linear_attention import (
    DeltaNetBwdOp,
    DeltaNetFwdOp,
    GatedDeltaNetBHTDFwdOp,
    GatedDeltaNetBTHDFwdOp,
    GatedDeltaNetBwdOp,
    GLABwdOp,
    GLAFwdOp,
)

tileops.load()
ops = torch.ops.tileops
TOL = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}
GRAD_TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 6e-2}


# ---- float64 oracles, token by token (differentiable: the backward tests take autograd of them) ----

def delta_rule64(q, k, v, beta, g=None, state=None):
    """[B, H, S, D] float64 (g: a log-decay [B, H, S], None for DeltaNet). Per token:
    a = exp(g), v_new = beta (v - a state^T k), state = a state + k v_new^T, o = state^T q.
    Returns o and the list of states, states[t] the state after t tokens."""
    b, h, s, dk = q.shape
    state = q.new_zeros(b, h, dk, v.shape[-1]) if state is None else state
    outs, states = [], [state]
    for t in range(s):
        if g is not None:
            state = state * g[:, :, t].exp()[..., None, None]
        v_new = beta[:, :, t, None] * (v[:, :, t] - torch.einsum("bhkv,bhk->bhv", state, k[:, :, t]))
        state = state + k[:, :, t, :, None] * v_new[:, :, None, :]
        outs.append(torch.einsum("bhkv,bhk->bhv", state, q[:, :, t]))
        states.append(state)
    return torch.stack(outs, 2), states


def gla64(q, k, v, g, scale, state):
    """[B, H, S, D] float64, g per key [B, H, S, DK]: state = exp(g)[:, None] state + k v^T,
    o = scale state^T q. Returns o and the list of states after each token count."""
    outs, states = [], [state]
    for t in range(q.shape[2]):
        state = g[:, :, t].exp()[..., None] * state + k[:, :, t, :, None] * v[:, :, t, None, :]
        outs.append(scale * torch.einsum("bhkv,bhk->bhv", state, q[:, :, t]))
        states.append(state)
    return torch.stack(outs, 2), states


def wy64(k, beta, g, chunk):
    """Per chunk, from the definition: A = inverse(I + M), M[i, j] = beta_i exp(G_i - G_j) k_i . k_j for
    j < i (G the chunk-local inclusive prefix sum of g; no decay when g is None), by explicit loops and
    torch.linalg.inv. [B, H, S, C]: row t holds row t mod C of its chunk's A."""
    b, h, s, _ = k.shape
    k, beta = k.double(), beta.double()
    out = torch.zeros(b, h, s, chunk, dtype=torch.float64)
    for c0 in range(0, s, chunk):
        cum = torch.zeros(b, h, chunk, dtype=torch.float64) if g is None else g[:, :, c0:c0 + chunk].double().cumsum(-1)
        m = torch.eye(chunk, dtype=torch.float64).repeat(b, h, 1, 1)
        for i in range(chunk):
            for j in range(i):
                kk = (k[:, :, c0 + i] * k[:, :, c0 + j]).sum(-1)
                m[:, :, i, j] = beta[:, :, c0 + i] * torch.exp(cum[:, :, i] - cum[:, :, j]) * kk
        out[:, :, c0:c0 + chunk] = torch.linalg.inv(m)
    return out


def sequence(b=2, h=3, s=8, dk=5, dv=4, dtype=torch.float32, seed=0, gated=True):
    """[B, H, S, D] inputs at the scale a trained model keeps: |k| = 1, 0 < beta < 1, g in (-0.5, 0]."""
    gen = torch.Generator().manual_seed(seed)
    k = torch.nn.functional.normalize(torch.randn(b, h, s, dk, generator=gen), dim=-1)
    x = dict(q=torch.randn(b, h, s, dk, generator=gen), k=k, v=torch.randn(b, h, s, dv, generator=gen),
             g=-torch.rand(b, h, s, generator=gen) * 0.5, beta=torch.rand(b, h, s, generator=gen))
    if not gated:
        del x["g"]
    return {n: t.to(dtype) for n, t in x.items()}


def f64(x):
    return {n: t.double() for n, t in x.items()}


def close(got, want, tol):
    torch.testing.assert_close(got.double(), want.double(), rtol=tol, atol=tol)


# ---- forwards ----

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_gated_delta_net_fwd_is_the_recurrence_with_its_chunk_states_and_wy_matrices(dtype):
    x = sequence(dtype=dtype)
    o, h, aw, au = GatedDeltaNetBHTDFwdOp(chunk_size=4)(x["q"], x["k"], x["v"], x["g"], x["beta"])
    assert o.shape == (2, 3, 8, 4) and h.shape == (2, 3, 3, 5, 4) and aw.shape == au.shape == (2, 3, 8, 4)
    assert o.dtype == h.dtype == aw.dtype == au.dtype == dtype
    y = f64(x)
    want_o, states = delta_rule64(y["q"], y["k"], y["v"], y["beta"], y["g"])
    close(o, want_o, TOL[dtype])
    close(h, torch.stack(states[::4], 2), TOL[dtype])  # h[:, :, c]: the state after 4c tokens, h[..., 0] = 0
    assert torch.equal(aw, au)
    close(aw, wy64(x["k"], x["beta"], x["g"], 4), TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_bthd_is_bhtd_transposed_bit_for_bit(dtype):
    x = sequence(dk=4, dv=4, dtype=dtype, seed=1)
    bhtd = ops.linear_attention_gated_delta_net_bhtd_fwd(x["q"], x["k"], x["v"], x["g"], x["beta"], chunk_size=4)
    t = {n: x[n].transpose(1, 2).contiguous() for n in x}
    bthd = ops.linear_attention_gated_delta_net_bthd_fwd(t["q"], t["k"], t["v"], t["g"], t["beta"], chunk_size=4)
    assert torch.equal(bthd[0], bhtd[0].transpose(1, 2))
    assert torch.equal(bthd[1], bhtd[1])  # h is head-major in both
    assert torch.equal(bthd[2], bhtd[2].transpose(1, 2)) and torch.equal(bthd[3], bhtd[3].transpose(1, 2))


def test_training_forward_is_the_prefill_bit_for_bit():
    x = sequence(dtype=torch.bfloat16, seed=2)
    o, h, _, _ = ops.linear_attention_gated_delta_net_bhtd_fwd(x["q"], x["k"], x["v"], x["g"], x["beta"], chunk_size=2)
    po, final = ops.linear_attention_gated_delta_net_prefill_bhtd_fwd(x["q"], x["k"], x["v"], x["g"], x["beta"])
    assert torch.equal(o, po) and torch.equal(h[:, :, -1], final)


def test_gated_intermediates_give_the_chunked_form():
    """What a chunked kernel computes from h and aw (float32 here, checked in float64): per chunk with
    G = cumsum(g), D = exp(G), V_new = A diag(beta) (V - D K h[c]),
    o = D Q h[c] + (tril(Q K^T) * exp(G_i - G_j)) V_new, h[c + 1] = exp(G_last) h[c] + (exp(G_last - G) K)^T V_new."""
    x = sequence(s=12, seed=3)
    o, h, aw, _ = GatedDeltaNetBHTDFwdOp(chunk_size=4)(x["q"], x["k"], x["v"], x["g"], x["beta"])
    y, h, a_rows, o = f64(x), h.double(), aw.double(), o.double()
    for c in range(3):
        sl = slice(4 * c, 4 * c + 4)
        q, k, v, beta = y["q"][:, :, sl], y["k"][:, :, sl], y["v"][:, :, sl], y["beta"][:, :, sl, None]
        cum = y["g"][:, :, sl].cumsum(-1)
        decay = cum.exp()[..., None]
        a = a_rows[:, :, sl]
        v_new = a @ (beta * (v - decay * (k @ h[:, :, c])))
        attn = torch.tril((q @ k.transpose(-1, -2)) * torch.exp(cum[..., :, None] - cum[..., None, :]))
        close(o[:, :, sl], decay * (q @ h[:, :, c]) + attn @ v_new, 1e-5)
        last = cum[..., -1:]
        want_next = last.exp()[..., None] * h[:, :, c] + (torch.exp(last - cum)[..., None] * k).transpose(-1, -2) @ v_new
        close(h[:, :, c + 1], want_next, 1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_delta_net_fwd_is_the_recurrence_with_float32_states_and_its_wy_tensors(dtype):
    x = sequence(dtype=dtype, seed=4, gated=False)
    o, h, aw, au, w, u = DeltaNetFwdOp(chunk_size=4)(x["q"], x["k"], x["v"], x["beta"])
    assert h.dtype == torch.float32 and o.dtype == aw.dtype == au.dtype == w.dtype == u.dtype == dtype
    assert h.shape == (2, 3, 3, 5, 4) and w.shape == (2, 3, 8, 5) and u.shape == (2, 3, 8, 4)
    y = f64(x)
    want_o, states = delta_rule64(y["q"], y["k"], y["v"], y["beta"])
    close(o, want_o, TOL[dtype])
    close(h, torch.stack(states[::4], 2), 1e-5)  # float32 whatever the inputs
    a = wy64(x["k"], x["beta"], None, 4)
    assert torch.equal(aw, au)
    close(aw, a, TOL[dtype])
    chunks = lambda t: t.unflatten(2, (2, 4))  # noqa: E731
    a = chunks(a)
    close(w, (a @ chunks(y["k"] * y["beta"][..., None])).flatten(2, 3), TOL[dtype])
    close(u, (a @ chunks(y["v"] * y["beta"][..., None])).flatten(2, 3), TOL[dtype])


def test_delta_net_intermediates_give_the_chunked_form():
    """v_new = u - w h[c], o = Q h[c] + tril(Q K^T) v_new, h[c + 1] = h[c] + K^T v_new (float32, in float64)."""
    x = sequence(s=12, seed=5, gated=False)
    o, h, _, _, w, u = [t.double() for t in DeltaNetFwdOp(chunk_size=4)(x["q"], x["k"], x["v"], x["beta"])]
    y = f64(x)
    for c in range(3):
        sl = slice(4 * c, 4 * c + 4)
        q, k = y["q"][:, :, sl], y["k"][:, :, sl]
        v_new = u[:, :, sl] - w[:, :, sl] @ h[:, :, c]
        close(o[:, :, sl], q @ h[:, :, c] + torch.tril(q @ k.transpose(-1, -2)) @ v_new, 1e-5)
        close(h[:, :, c + 1], h[:, :, c] + k.transpose(-1, -2) @ v_new, 1e-5)


def test_delta_net_is_gated_delta_net_without_decay_bit_for_bit():
    x = sequence(seed=6)
    o, h, aw, _, _, _ = ops.linear_attention_delta_net_fwd(x["q"], x["k"], x["v"], x["beta"], chunk_size=4)
    go, gh, gaw, _ = ops.linear_attention_gated_delta_net_bhtd_fwd(x["q"], x["k"], x["v"], torch.zeros_like(x["g"]),
                                                                   x["beta"], chunk_size=4)
    assert torch.equal(o, go) and torch.equal(h, gh) and torch.equal(aw, gaw)


# ---- backwards: torch.autograd through the float64 recurrence ----

def autograd64(fn, tensors, names, cotangents):
    leaves = {n: tensors[n].double().requires_grad_(True) for n in names}
    outs = fn(leaves)
    loss = sum((o * c.double()).sum() for o, c in zip(outs, cotangents))
    return dict(zip(names, torch.autograd.grad(loss, [leaves[n] for n in names])))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gated_delta_net_bwd_is_autograd_of_the_recurrence(dtype):
    x = sequence(s=12, dtype=dtype, seed=7)
    dout = torch.randn(2, 3, 12, 4, generator=torch.Generator().manual_seed(8)).to(dtype)
    _, h, _, _ = GatedDeltaNetBHTDFwdOp(chunk_size=4)(x["q"], x["k"], x["v"], x["g"], x["beta"])
    got = GatedDeltaNetBwdOp(chunk_size=4)(dout, x["q"], x["k"], x["v"], x["g"], x["beta"], h)
    names = ["q", "k", "v", "g", "beta"]
    want = autograd64(lambda t: [delta_rule64(t["q"], t["k"], t["v"], t["beta"], t["g"])[0]], x, names, [dout])
    for n, grad in zip(names, got):
        assert grad.dtype == dtype and grad.shape == x[n].shape, n
        close(grad, want[n], GRAD_TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_delta_net_bwd_is_autograd_of_the_recurrence(dtype):
    x = sequence(s=12, dtype=dtype, seed=9, gated=False)
    dout = torch.randn(2, 3, 12, 4, generator=torch.Generator().manual_seed(10)).to(dtype)
    _, h, aw, au, w, u = DeltaNetFwdOp(chunk_size=4)(x["q"], x["k"], x["v"], x["beta"])
    got = DeltaNetBwdOp(chunk_size=4)(dout, x["q"], x["k"], x["v"], x["beta"], h, aw, au, w, u)
    names = ["q", "k", "v", "beta"]
    want = autograd64(lambda t: [delta_rule64(t["q"], t["k"], t["v"], t["beta"])[0]], x, names, [dout])
    for n, grad in zip(names, got):
        assert grad.dtype == dtype and grad.shape == x[n].shape, n
        close(grad, want[n], GRAD_TOL[dtype])


@pytest.mark.parametrize("gated", [True, False])
def test_autograd_pairing_backpropagates_through_the_forward(gated):
    """With the pairing on, o's gradient reaches q, k, v (g) and beta through the backward op (o's
    gradient is the backward's `dout`); the saved states and WY tensors are not differentiable."""
    x = sequence(s=12, seed=14, gated=gated)
    names = ["q", "k", "v", "g", "beta"] if gated else ["q", "k", "v", "beta"]
    leaves = {n: x[n].clone().requires_grad_(True) for n in names}
    dout = torch.randn(2, 3, 12, 4, generator=torch.Generator().manual_seed(15))
    prev = tileops.enable_autograd(True)
    try:
        fwd = GatedDeltaNetBHTDFwdOp(chunk_size=4) if gated else DeltaNetFwdOp(chunk_size=4)
        o, *saved = fwd(*[leaves[n] for n in names])
    finally:
        tileops.enable_autograd(prev)
    assert o.requires_grad and not any(t.requires_grad for t in saved)
    (o * dout).sum().backward()
    want = autograd64(lambda t: [delta_rule64(t["q"], t["k"], t["v"], t["beta"], t.get("g"))[0]], x, names, [dout])
    for n in names:
        close(leaves[n].grad, want[n], GRAD_TOL[torch.float32])


def test_backward_reads_the_chunk_states_it_is_given():
    """h[:, :, c] is the state entering chunk c: a backward given the states of the same tokens run from
    another start has that start's gradients (here: the recurrence from state0, with states from it)."""
    x = sequence(s=8, seed=11)
    y = f64(x)
    state0 = torch.randn(2, 3, 5, 4, generator=torch.Generator().manual_seed(12), dtype=torch.float64)
    _, states = delta_rule64(y["q"], y["k"], y["v"], y["beta"], y["g"], state=state0)
    h = torch.stack(states[::4], 2).float()
    dout = torch.randn(2, 3, 8, 4, generator=torch.Generator().manual_seed(13))
    got = ops.linear_attention_gated_delta_net_bwd(dout, x["q"], x["k"], x["v"], x["g"], x["beta"], h, chunk_size=4)
    names = ["q", "k", "v", "g", "beta"]
    want = autograd64(lambda t: [delta_rule64(t["q"], t["k"], t["v"], t["beta"], t["g"], state=state0)[0]], x,
                      names, [dout])
    for n, grad in zip(names, got):
        close(grad, want[n], 1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("with_initial", [False, True])
def test_gla_bwd_is_autograd_of_the_recurrence_with_the_final_state_gradient(dtype, with_initial):
    gen = torch.Generator().manual_seed(14)
    b, s, hh, dk, dv, chunk, scale = 2, 12, 3, 5, 4, 4, 0.4
    q, k = (torch.randn(b, s, hh, dk, generator=gen).to(dtype) for _ in range(2))
    v = torch.randn(b, s, hh, dv, generator=gen).to(dtype)
    g = (-torch.rand(b, s, hh, dk, generator=gen) * 0.5).to(dtype)
    dout = torch.randn(b, s, hh, dv, generator=gen).to(dtype)
    dht = torch.randn(b, hh, dk, dv, generator=gen)
    initial = torch.randn(b, hh, dk, dv, generator=gen) if with_initial else torch.zeros(b, hh, dk, dv)
    # h [B, NC + 1, H, DK, DV]: GLAFwdOp run chunk by chunk, each from the last one's final state.
    fwd, states = GLAFwdOp(chunk_size=chunk, scale=scale), [initial]
    for c in range(s // chunk):
        sl = slice(c * chunk, (c + 1) * chunk)
        states.append(fwd(q[:, sl], k[:, sl], v[:, sl], g[:, sl], states[-1])[1])
    h = torch.stack(states, 1)
    got = GLABwdOp(chunk_size=chunk, scale=scale, has_initial_state=with_initial)(q, k, v, g, h, dout, dht)
    flag = GLABwdOp(chunk_size=chunk, scale=scale, has_initial_state=not with_initial)(q, k, v, g, h, dout, dht)
    assert all(torch.equal(a, b_) for a, b_ in zip(got, flag))  # the flag changes nothing

    hm = lambda t: t.transpose(1, 2)  # noqa: E731  [B, S, H, D] -> [B, H, S, D]

    def fn(t):
        o, st = gla64(hm(t["q"]), hm(t["k"]), hm(t["v"]), hm(t["g"]), scale, initial.double())
        return [hm(o), st[-1]]
    want = autograd64(fn, dict(q=q, k=k, v=v, g=g), ["q", "k", "v", "g"], [dout, dht])
    tol = 1e-4 if dtype == torch.float32 else 1e-3  # float32 outputs; the inputs are the same values
    for n, grad in zip(["q", "k", "v", "g"], got):
        assert grad.dtype == torch.float32 and grad.shape == dict(q=q, k=k, v=v, g=g)[n].shape, n
        close(grad, want[n], tol)


# ---- refusals: the op, the argument, the rule ----

def test_forward_refusals_name_the_op_and_the_rule():
    x = sequence(s=6)
    args = (x["q"], x["k"], x["v"], x["g"], x["beta"])
    with pytest.raises(ValueError, match=r"tileops::linear_attention_gated_delta_net_bhtd_fwd: .*S % chunk_size == 0"):
        ops.linear_attention_gated_delta_net_bhtd_fwd(*args, chunk_size=4)
    with pytest.raises(ValueError, match=r"tileops::linear_attention_gated_delta_net_bhtd_fwd: .*chunk_size > 0"):
        ops.linear_attention_gated_delta_net_bhtd_fwd(*args, chunk_size=0)
    t = {n: x[n].transpose(1, 2).contiguous() for n in x}
    targs = (t["q"], t["k"], t["v"], t["g"], t["beta"])
    with pytest.raises(ValueError, match=r"tileops::linear_attention_gated_delta_net_bthd_fwd: .*DK == DV"):
        ops.linear_attention_gated_delta_net_bthd_fwd(*(a.half() for a in targs), chunk_size=2)  # DK 5, DV 4
    with pytest.raises(TypeError, match=r"tileops::linear_attention_gated_delta_net_bthd_fwd: 'q' must have dtype"):
        ops.linear_attention_gated_delta_net_bthd_fwd(*targs, chunk_size=2)  # float32: TileOPs' contract is half only
    with pytest.raises(ValueError, match=r"tileops::linear_attention_delta_net_fwd: .*S % chunk_size == 0"):
        ops.linear_attention_delta_net_fwd(x["q"], x["k"], x["v"], x["beta"], chunk_size=4)


def test_backward_refusals_name_the_op_the_argument_and_the_rule():
    x = sequence(s=8)
    dout = torch.randn(2, 3, 8, 4)
    h = torch.zeros(2, 3, 3, 5, 4)
    args = (dout, x["q"], x["k"], x["v"], x["g"], x["beta"])
    with pytest.raises(RuntimeError, match=r"tileops::linear_attention_gated_delta_net_bwd: 'h' must have shape "
                                           r"\[B, H, S // chunk_size \+ 1, DK, DV\]"):
        ops.linear_attention_gated_delta_net_bwd(*args, h, chunk_size=2)  # 3 states for 4 chunks
    with pytest.raises(ValueError, match=r"tileops::linear_attention_gated_delta_net_bwd: .*chunk_size > 0"):
        ops.linear_attention_gated_delta_net_bwd(*args, h, chunk_size=0)
    with pytest.raises(TypeError, match=r"tileops::linear_attention_gated_delta_net_bwd: 'h' must have the dtype of 'dout'"):
        ops.linear_attention_gated_delta_net_bwd(*args, h.double(), chunk_size=4)
    with pytest.raises(RuntimeError, match=r"tileops::linear_attention_gated_delta_net_bwd: 'h' must have shape"):
        ops.linear_attention_gated_delta_net_bwd(*args, h[..., :3], chunk_size=4)  # DV 3 for 4
    dn = (dout, x["q"], x["k"], x["v"], x["beta"])
    saved = (torch.zeros(2, 3, 8, 4), torch.zeros(2, 3, 8, 4), torch.zeros(2, 3, 8, 5), torch.zeros(2, 3, 8, 4))
    b16 = lambda ts: [t.bfloat16() for t in ts]  # noqa: E731
    with pytest.raises(TypeError, match=r"tileops::linear_attention_delta_net_bwd: 'h' must have dtype float32"):
        ops.linear_attention_delta_net_bwd(*b16(dn), h.bfloat16(), *b16(saved), chunk_size=4)
    with pytest.raises(RuntimeError, match=r"tileops::linear_attention_delta_net_bwd: 'aw' must have shape"):
        ops.linear_attention_delta_net_bwd(*dn, h, saved[0][..., :2], *saved[1:], chunk_size=4)  # chunk_size columns
    gq = torch.randn(1, 8, 2, 4)
    gh, dht = torch.zeros(1, 3, 2, 4, 4), torch.zeros(1, 2, 4, 4)
    with pytest.raises(TypeError, match=r"tileops::linear_attention_gla_bwd: 'dht' must have dtype float32"):
        ops.linear_attention_gla_bwd(gq, gq, gq, gq, gh, gq, dht.half(), chunk_size=4)
    with pytest.raises(RuntimeError, match=r"tileops::linear_attention_gla_bwd: 'h' must have shape"):
        ops.linear_attention_gla_bwd(gq, gq, gq, gq, gh, gq, dht, chunk_size=2)  # 3 states for 4 chunks
    with pytest.raises(ValueError, match=r"tileops::linear_attention_gla_bwd: .*S % chunk_size == 0"):
        ops.linear_attention_gla_bwd(gq, gq, gq, gq, gh[:, :2], gq, dht, chunk_size=5)
