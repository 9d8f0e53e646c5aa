"""The linear-attention decode steps (manifests/linear_attention.yaml) on CPU against float64 loops
over the state's rows written here, several steps chained, and refusals that name the op."""
import pytest
import torch

import tileops
from linear_oracle import float64_step
from tileops.linear_attention import DeltaNetDecodeFwdOp, GatedDeltaNetDecodeFwdOp, GLADecodeFwdOp

tileops.load()
ops = torch.ops.tileops
TOL = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


def inputs(dtype, b=2, h=3, dk=5, dv=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
    return dict(q=(r(b, h, dk) * 0.5).to(dtype), k=(r(b, h, dk) * 0.5).to(dtype), v=r(b, h, dv).to(dtype),
                state=r(b, h, dk, dv).to(dtype), beta=torch.rand(b, h, generator=gen).to(dtype),
                g=(-torch.rand(b, h, generator=gen)).to(dtype), gk=(-torch.rand(b, h, dk, generator=gen)).to(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_delta_net_decode_is_the_delta_rule(dtype):
    x = inputs(dtype)
    before = x["state"].clone()
    o, s = DeltaNetDecodeFwdOp()(x["q"], x["k"], x["v"], x["beta"], x["state"])
    want_o, want_s = float64_step("delta", x["q"], x["k"], x["v"], x["state"], beta=x["beta"])
    assert o.dtype == s.dtype == dtype and torch.equal(x["state"], before)  # the state is read, not written
    torch.testing.assert_close(o.double(), want_o, rtol=TOL[dtype], atol=TOL[dtype])
    torch.testing.assert_close(s.double(), want_s, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_gated_delta_net_decode_decays_then_corrects(dtype):
    x = inputs(dtype, seed=1)
    o, s = ops.linear_attention_gated_delta_net_decode_fwd(x["q"], x["k"], x["v"], x["g"], x["beta"], x["state"])
    want_o, want_s = float64_step("gated", x["q"], x["k"], x["v"], x["state"], beta=x["beta"], g=x["g"])
    torch.testing.assert_close(o.double(), want_o, rtol=TOL[dtype], atol=TOL[dtype])
    torch.testing.assert_close(s.double(), want_s, rtol=TOL[dtype], atol=TOL[dtype])
    # g = 0 (no decay) is DeltaNet
    zero = torch.zeros_like(x["g"])
    got = ops.linear_attention_gated_delta_net_decode_fwd(x["q"], x["k"], x["v"], zero, x["beta"], x["state"])
    want = ops.linear_attention_delta_net_decode_fwd(x["q"], x["k"], x["v"], x["beta"], x["state"])
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("scale", [-1.0, 0.25])
def test_gla_decode_scales_by_the_head_dim_unless_given(dtype, scale):
    x = inputs(dtype, seed=2)
    o, s = GLADecodeFwdOp(scale=scale)(x["q"], x["k"], x["v"], x["gk"], x["state"])
    want_o, want_s = float64_step("gla", x["q"], x["k"], x["v"], x["state"], gk=x["gk"], scale=scale)
    torch.testing.assert_close(o.double(), want_o, rtol=TOL[dtype], atol=TOL[dtype])
    torch.testing.assert_close(s.double(), want_s, rtol=TOL[dtype], atol=TOL[dtype])


def test_eight_chained_steps_follow_the_float64_recurrence():
    x = inputs(torch.float32, b=1, h=2, dk=4, dv=3, seed=3)
    state, want = x["state"], x["state"].double()
    gen = torch.Generator().manual_seed(4)
    for _ in range(8):
        q, k, v = torch.randn(1, 2, 4, generator=gen), torch.randn(1, 2, 4, generator=gen) * 0.5, torch.randn(1, 2, 3, generator=gen)
        beta, g = torch.rand(1, 2, generator=gen), -torch.rand(1, 2, generator=gen)
        o, state = ops.linear_attention_gated_delta_net_decode_fwd(q, k, v, g, beta, state)
        want_o, want = float64_step("gated", q, k, v, want, beta=beta, g=g)
        torch.testing.assert_close(o.double(), want_o, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(state.double(), want, rtol=1e-4, atol=1e-4)


def test_refusals_name_the_op_and_the_rule():
    x = inputs(torch.float16)
    with pytest.raises(RuntimeError, match=r"tileops::linear_attention_delta_net_decode_fwd: 'state' must have shape"):
        ops.linear_attention_delta_net_decode_fwd(x["q"], x["k"], x["v"], x["beta"], x["state"][..., :3, :])
    with pytest.raises(TypeError, match=r"tileops::linear_attention_gla_decode_fwd: 'gk' must have the dtype of 'q'"):
        ops.linear_attention_gla_decode_fwd(x["q"], x["k"], x["v"], x["gk"].float(), x["state"])
    with pytest.raises(RuntimeError, match=r"tileops::linear_attention_gated_delta_net_decode_fwd: 'beta' must have shape"):
        ops.linear_attention_gated_delta_net_decode_fwd(x["q"], x["k"], x["v"], x["g"], x["beta"][:, :1], x["state"])
