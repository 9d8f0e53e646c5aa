"""Gated DeltaNet prefill (both layouts) and GLA over whole sequences (manifests/linear_attention.yaml)
on CPU: the float64 token recurrence of linear_oracle.py chained over the sequence, the layouts
against each other, prefill against chained decode calls, chunk_size checked and nothing more."""
import pytest
import torch

import tileops
from linear_oracle import float64_step
from tileops.linear_attention import GatedDeltaNetPrefillBHTDFwdOp, GLAFwdOp

tileops.load()
ops = torch.ops.tileops
TOL = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


def sequence(b=2, h=3, s=7, dk=5, dv=4, dtype=torch.float32, seed=0):
    """[B, H, S, D] inputs (the BHTD layout) at the scale a trained model keeps: |k| ~ 1, beta < 1."""
    gen = torch.Generator().manual_seed(seed)
    k = torch.nn.functional.normalize(torch.randn(b, h, s, dk, generator=gen), dim=-1)
    return dict(q=torch.randn(b, h, s, dk, generator=gen).to(dtype), k=k.to(dtype),
                v=torch.randn(b, h, s, dv, generator=gen).to(dtype),
                g=(-torch.rand(b, h, s, generator=gen) * 0.5).to(dtype),
                beta=torch.rand(b, h, s, generator=gen).to(dtype))


def float64_gated_sequence(x):
    b, h, s, dk = x["q"].shape
    state = torch.zeros(b, h, dk, x["v"].shape[-1], dtype=torch.float64)
    outs = []
    for t in range(s):
        o, state = float64_step("gated", x["q"][:, :, t], x["k"][:, :, t], x["v"][:, :, t], state,
                                beta=x["beta"][:, :, t], g=x["g"][:, :, t])
        outs.append(o)
    return torch.stack(outs, dim=2), state


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_gated_delta_net_prefill_is_the_token_recurrence(dtype):
    x = sequence(dtype=dtype)
    o, final = GatedDeltaNetPrefillBHTDFwdOp()(x["q"], x["k"], x["v"], x["g"], x["beta"])
    want_o, want_final = float64_gated_sequence(x)
    assert o.dtype == final.dtype == dtype and o.shape == (2, 3, 7, 4) and final.shape == (2, 3, 5, 4)
    torch.testing.assert_close(o.double(), want_o, rtol=TOL[dtype], atol=TOL[dtype])
    torch.testing.assert_close(final.double(), want_final, rtol=TOL[dtype], atol=TOL[dtype])


def test_bthd_is_bhtd_transposed_bit_for_bit():
    x = sequence(dtype=torch.bfloat16, seed=1)
    o, final = ops.linear_attention_gated_delta_net_prefill_bhtd_fwd(x["q"], x["k"], x["v"], x["g"], x["beta"])
    t = {n: x[n].transpose(1, 2).contiguous() for n in x}
    o2, final2 = ops.linear_attention_gated_delta_net_prefill_bthd_fwd(t["q"], t["k"], t["v"], t["g"], t["beta"])
    assert torch.equal(o2, o.transpose(1, 2)) and torch.equal(final2, final)


def test_prefill_equals_chained_float32_decode_calls():
    x = sequence(s=5, seed=2)
    o, final = ops.linear_attention_gated_delta_net_prefill_bhtd_fwd(x["q"], x["k"], x["v"], x["g"], x["beta"])
    state = torch.zeros(2, 3, 5, 4)
    for t in range(5):
        step, state = ops.linear_attention_gated_delta_net_decode_fwd(
            x["q"][:, :, t], x["k"][:, :, t], x["v"][:, :, t], x["g"][:, :, t], x["beta"][:, :, t], state)
        assert torch.equal(o[:, :, t], step)
    assert torch.equal(final, state)


def test_chunk_size_is_checked_and_changes_nothing():
    x = sequence(s=8, seed=3)
    args = (x["q"], x["k"], x["v"], x["g"], x["beta"])
    none = ops.linear_attention_gated_delta_net_prefill_bhtd_fwd(*args)
    four = ops.linear_attention_gated_delta_net_prefill_bhtd_fwd(*args, chunk_size=4)
    assert torch.equal(none[0], four[0]) and torch.equal(none[1], four[1])
    with pytest.raises(ValueError, match=r"tileops::linear_attention_gated_delta_net_prefill_bhtd_fwd: .*S % chunk_size == 0"):
        ops.linear_attention_gated_delta_net_prefill_bhtd_fwd(*args, chunk_size=3)
    with pytest.raises(ValueError, match=r"tileops::linear_attention_gated_delta_net_prefill_bhtd_fwd: .*chunk_size > 0"):
        ops.linear_attention_gated_delta_net_prefill_bhtd_fwd(*args, chunk_size=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("with_initial", [False, True])
def test_gla_is_the_token_recurrence_from_its_initial_state(dtype, with_initial):
    gen = torch.Generator().manual_seed(4)
    b, s, h, dk, dv = 2, 8, 3, 5, 4
    q, k = (torch.randn(b, s, h, dk, generator=gen).to(dtype) for _ in range(2))
    v = torch.randn(b, s, h, dv, generator=gen).to(dtype)
    g = (-torch.rand(b, s, h, dk, generator=gen)).to(dtype)
    initial = torch.randn(b, h, dk, dv, generator=gen) if with_initial else None
    before = None if initial is None else initial.clone()
    o, final = GLAFwdOp(chunk_size=4)(q, k, v, g, initial)
    assert o.dtype == dtype and final.dtype == torch.float32
    state = torch.zeros(b, h, dk, dv, dtype=torch.float64) if initial is None else initial.double()
    for t in range(s):
        want, state = float64_step("gla", q[:, t], k[:, t], v[:, t], state, gk=g[:, t], scale=-1.0)
        torch.testing.assert_close(o[:, t].double(), want, rtol=TOL[dtype], atol=TOL[dtype])
    torch.testing.assert_close(final.double(), state, rtol=1e-4 if dtype == torch.float32 else TOL[dtype],
                               atol=1e-4 if dtype == torch.float32 else TOL[dtype])
    if initial is not None:
        assert torch.equal(initial, before)  # the initial state is read, not written


def test_gla_refusals_name_the_op():
    x = torch.randn(1, 6, 2, 4)
    with pytest.raises(ValueError, match=r"tileops::linear_attention_gla_fwd: .*S % chunk_size == 0"):
        ops.linear_attention_gla_fwd(x, x, x, x, None, chunk_size=4)
    with pytest.raises(TypeError, match=r"tileops::linear_attention_gla_fwd: 'initial_state' must have dtype float32"):
        ops.linear_attention_gla_fwd(x.half(), x.half(), x.half(), x.half(), torch.zeros(1, 2, 4, 4).half(), chunk_size=3)
