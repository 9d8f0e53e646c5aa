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
