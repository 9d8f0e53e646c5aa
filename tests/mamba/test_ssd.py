"""SSDStatePassingFwdOp and SSDDecodeFwdOp (manifests/mamba.yaml) on CPU against float64 recurrences
written here, step by step, and their refusals."""
import pytest
import torch

import tileops

tileops.load()
ops = torch.ops.tileops


def float64_state_passing(states, decay, initial):
    b, nc, h, n = states.shape
    s = torch.zeros(b, h, n, dtype=torch.float64) if initial is None else initial.double()
    entering = []
    for c in range(nc):
        entering.append(s)
        s = decay[:, :, c].double().exp()[:, :, None] * s + states[:, c].double()
    return torch.stack(entering, dim=1), s


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("with_initial", [False, True])
def test_state_passing_matches_a_float64_scan(dtype, with_initial):
    states = torch.randn(2, 7, 3, 33, dtype=dtype)
    decay = -torch.rand(2, 3, 7).cumsum(-1)
    initial = torch.randn(2, 3, 33) if with_initial else None
    chunk_states, final = ops.mamba_ssd_state_passing_fwd(states, decay, initial)
    want_chunks, want_final = float64_state_passing(states, decay, initial)
    assert chunk_states.dtype == final.dtype == torch.float32
    torch.testing.assert_close(chunk_states.double(), want_chunks, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(final.double(), want_final, rtol=1e-5, atol=1e-5)
    # the state entering chunk 0 is the initial state (zeros without one), bit for bit
    assert torch.equal(chunk_states[:, 0], initial if with_initial else torch.zeros(2, 3, 33))


def test_state_passing_with_one_chunk_and_no_chunks():
    states, decay = torch.randn(1, 1, 2, 4), torch.zeros(1, 2, 1)
    chunk_states, final = ops.mamba_ssd_state_passing_fwd(states, decay, None)
    assert torch.equal(chunk_states, torch.zeros(1, 1, 2, 4)) and torch.equal(final, states[:, 0])
    init = torch.randn(1, 2, 4)
    chunk_states, final = ops.mamba_ssd_state_passing_fwd(torch.randn(1, 0, 2, 4), torch.zeros(1, 2, 0), init)
    assert chunk_states.shape == (1, 0, 2, 4) and torch.equal(final, init)


def float64_decode(a, dt, x, b_in, c_in, state):
    h, g = a.shape[0], b_in.shape[1]
    group = torch.arange(h) // (h // g)
    b, c = b_in.double()[:, group, None, :], c_in.double()[:, group, None, :]
    dt64 = dt.double()[..., None]
    new = (dt64 * a.double()).exp() * state.double() + dt64 * x.double()[..., None] * b
    return (new * c).sum(-1), new


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("groups", [1, 2, 4])
def test_decode_updates_the_state_in_place_and_reads_it_out(dtype, groups):
    b, h, p, n = 3, 4, 8, 16
    a, dt = -torch.rand(h, p, n), torch.rand(b, h, p) * 0.5
    x = torch.randn(b, h, p, dtype=dtype)
    b_in, c_in = torch.randn(b, groups, n, dtype=dtype), torch.randn(b, groups, n, dtype=dtype)
    state = torch.randn(b, h, p, n)
    want_y, want_state = float64_decode(a, dt, x, b_in, c_in, state)
    y = ops.mamba_ssd_decode_fwd_writes_state(a, dt, x, b_in, c_in, state)
    torch.testing.assert_close(state.double(), want_state, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(y.double(), want_y, rtol=1e-5, atol=1e-4)


def test_decode_writes_a_strided_state_back():
    b, h, p, n = 2, 2, 4, 8
    args = (-torch.rand(h, p, n), torch.rand(b, h, p), torch.randn(b, h, p, dtype=torch.float16),
            torch.randn(b, 1, n, dtype=torch.float16), torch.randn(b, 1, n, dtype=torch.float16))
    big = torch.randn(b, h, p, 2 * n)
    state = big[..., ::2]  # a non-contiguous view: computed contiguous, then written back into big
    want_y, want_state = float64_decode(*args, state.clone())
    y = ops.mamba_ssd_decode_fwd_writes_state(*args, state)
    torch.testing.assert_close(big[..., ::2].double(), want_state, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(y.double(), want_y, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("groups,match", [(3, r"H % G == 0"), (0, r"G > 0")])
def test_decode_refuses_heads_that_do_not_split_into_groups(groups, match):
    b, h, p, n = 1, 4, 2, 4
    with pytest.raises(ValueError, match=rf"tileops::mamba_ssd_decode_fwd_writes_state: .*{match}"):
        ops.mamba_ssd_decode_fwd_writes_state(torch.zeros(h, p, n), torch.zeros(b, h, p), torch.zeros(b, h, p).half(),
                                              torch.zeros(b, groups, n).half(), torch.zeros(b, groups, n).half(),
                                              torch.zeros(b, h, p, n))


def test_state_passing_refuses_mismatched_chunks():
    with pytest.raises(RuntimeError, match=r"tileops::mamba_ssd_state_passing_fwd: 'da_chunk_cumsum' must have shape "
                                           r"\[B, H, NC\]"):
        ops.mamba_ssd_state_passing_fwd(torch.randn(1, 4, 2, 8), torch.zeros(1, 2, 3), None)


# ---- DaCumsumFwdOp, SSDChunkStateFwdOp, SSDChunkScanFwdOp ----------------------------------------

def float64_da_cumsum(dt, a, bias, softplus, lo, hi, chunk):
    d = dt.double() + (0 if bias is None else bias.double())
    if softplus:
        d = torch.where(d > 20, d, torch.log1p(torch.exp(d)))
    d = d.clamp(min=lo) if hi is None else d.clamp(lo, hi)
    b, s, h = d.shape
    per_chunk = d.reshape(b, s // chunk, chunk, h).permute(0, 3, 1, 2)  # [B, H, NC, Q]
    sums = torch.zeros_like(per_chunk)
    running = torch.zeros_like(per_chunk[..., 0])
    for q in range(chunk):
        running = running + per_chunk[..., q] * a.double()[None, :, None]
        sums[..., q] = running
    return per_chunk, sums


@pytest.mark.parametrize("bias,softplus,lo,hi,dtype", [
    (False, False, 0.0, None, None), (True, True, 0.0, None, torch.float16), (True, True, 0.05, 0.5, torch.bfloat16)])
def test_da_cumsum_matches_a_float64_prefix_sum(bias, softplus, lo, hi, dtype):
    dt, a = torch.randn(2, 24, 3) * 5, -torch.rand(3)
    b = torch.randn(3) if bias else None
    dt_out, da = ops.mamba_da_cumsum_fwd(dt, a, b, 8, dtype=dtype, dt_softplus=softplus, dt_min=lo, dt_max=hi)
    want_dt, want_da = float64_da_cumsum(dt, a, b, softplus, lo, hi, 8)
    assert dt_out.dtype == (dtype or torch.float32) and dt_out.shape == da.shape == (2, 3, 3, 8)
    torch.testing.assert_close(dt_out.double(), want_dt.to(dt_out.dtype).double(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(da.double(), want_da, rtol=1e-5, atol=1e-5)


def test_da_cumsum_refuses_a_sequence_that_is_not_whole_chunks():
    with pytest.raises(ValueError, match=r"tileops::mamba_da_cumsum_fwd: .*S % chunk_len == 0"):
        ops.mamba_da_cumsum_fwd(torch.zeros(1, 10, 2), torch.zeros(2), None, 4)


def heads_of(t, heads):  # [..., G, N] -> [..., H, N], heads // G consecutive heads per group
    return t.repeat_interleave(heads // t.shape[-2], dim=-2)


def float64_chunk_state(x, bmat, dt, da, seq_idx):
    b, s, h, p = x.shape
    _, _, nc, q = dt.shape
    bh = heads_of(bmat.double(), h)
    states = torch.zeros(b, nc, h, p, bmat.shape[-1], dtype=torch.float64)
    for c in range(nc):
        for i in range(q):
            pos = c * q + i
            w = torch.exp(torch.clamp(da[:, :, c, -1].double() - da[:, :, c, i].double(), max=0)) * dt[:, :, c, i].double()
            if seq_idx is not None:
                last = seq_idx[:, c * q + q - 1]
                w = w * ((last >= 0) & (seq_idx[:, pos] == last)).double()[:, None]
            states[:, c] += w[:, :, None, None] * x[:, pos].double()[..., None] * bh[:, pos][:, :, None, :]
    return states


@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("with_seq_idx", [False, True])
def test_chunk_state_matches_a_float64_sum_over_each_chunk(groups, with_seq_idx):
    b, nc, q, h, p, n = 2, 3, 4, 4, 3, 5
    x = torch.randn(b, nc * q, h, p, dtype=torch.bfloat16)
    bmat = torch.randn(b, nc * q, groups, n, dtype=torch.bfloat16)
    dt = (torch.rand(b, h, nc, q) * 0.5).to(torch.bfloat16)
    da = -torch.rand(b, h, nc, q).cumsum(-1)
    seq_idx = None
    if with_seq_idx:  # sequence 0, then 1 from mid chunk 1, and a -1 pad chunk at the end of batch 1
        seq_idx = torch.zeros(b, nc * q, dtype=torch.int32)
        seq_idx[:, 6:] = 1
        seq_idx[1, 8:] = -1
    got = ops.mamba_ssd_chunk_state_fwd(x, bmat, dt, da, seq_idx)
    torch.testing.assert_close(got.double(), float64_chunk_state(x, bmat, dt, da, seq_idx), rtol=1e-5, atol=1e-5)
    if with_seq_idx:
        assert torch.equal(got[1, 2], torch.zeros_like(got[1, 2]))  # a chunk of padding holds no state


def float64_chunk_scan(x, cb, da, c, prev, dt):
    b, s, h, p = x.shape
    nc, q = cb.shape[1], cb.shape[3]
    ch, y = heads_of(c.double(), h), torch.zeros(b, s, h, p, dtype=torch.float64)
    cbh = cb.double().repeat_interleave(h // cb.shape[2], dim=2)  # [B, NC, H, Q, Q]
    for ci in range(nc):
        for l in range(q):
            pos = ci * q + l
            acc = torch.exp(da[:, :, ci, l].double())[..., None] * (ch[:, pos][:, :, None, :] * prev[:, ci].double()).sum(-1)
            for s_ in range(l + 1):
                w = cbh[:, ci, :, l, s_] * torch.exp(da[:, :, ci, l].double() - da[:, :, ci, s_].double()) * \
                    dt[:, :, ci, s_].double()
                acc = acc + w[..., None] * x[:, ci * q + s_].double()
            y[:, pos] = acc
    return y


@pytest.mark.parametrize("groups", [1, 2])
def test_chunk_scan_matches_a_float64_causal_sum(groups):
    b, nc, q, h, p, n = 2, 2, 4, 4, 3, 5
    x = torch.randn(b, nc * q, h, p, dtype=torch.float16)
    cb = torch.randn(b, nc, groups, q, q, dtype=torch.float16)
    da = -torch.rand(b, h, nc, q).cumsum(-1)
    c = torch.randn(b, nc * q, groups, n, dtype=torch.float16)
    prev = torch.randn(b, nc, h, p, n)
    dt = (torch.rand(b, h, nc, q) * 0.5).to(torch.float16)
    got = ops.mamba_ssd_chunk_scan_fwd(x, cb, da, c, prev, dt)
    torch.testing.assert_close(got.double(), float64_chunk_scan(x, cb, da, c, prev, dt), rtol=1e-5, atol=1e-5)


def test_chunk_scan_refuses_chunks_that_do_not_cover_the_sequence():
    with pytest.raises(ValueError, match=r"tileops::mamba_ssd_chunk_scan_fwd: .*S == NC \* Q"):
        ops.mamba_ssd_chunk_scan_fwd(torch.zeros(1, 6, 2, 2).half(), torch.zeros(1, 2, 1, 4, 4).half(),
                                     torch.zeros(1, 2, 2, 4), torch.zeros(1, 6, 1, 3).half(),
                                     torch.zeros(1, 2, 2, 2, 3), torch.zeros(1, 2, 2, 4).half())
