"""TileOPs' RoPE entries over x: RopeNeoxFwdOp, RopeNonNeoxFwdOp, RopeLlama31FwdOp, RopeYarnFwdOp,
RopeLongRopeFwdOp (TileOPs' signatures: x of a layout, the table from params; LongRoPE's factors as an
optional input) on CPU: the frequencies and amplitude read back
from the op against float64 formulas (tests/position/rope_table_formulas.py) and Hugging Face's rope
init functions, the rotation of both layouts, and every refusal."""
import math

import pytest
import torch

import tileops
from position import rope_table_formulas as F
from tileops.position import RopeLlama31FwdOp, RopeLongRopeFwdOp, RopeNeoxFwdOp, RopeNonNeoxFwdOp, RopeYarnFwdOp

tileops.load()
ops = torch.ops.tileops

PLAIN = dict(base=10000.0)
LLAMA31 = dict(base=500000.0, scale_factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position=8192)
YARN = dict(base=10000.0, scale=16.0, original_max_position=4096, beta_fast=32.0, beta_slow=1.0, attn_factor=1.2772588722239782)
LONGROPE = dict(base=10000.0, max_position_embeddings=131072, original_max_position_embeddings=4096)


def factors(half):  # a long_factor-like list: 1 for the fast dims, growing for the slow ones
    return torch.linspace(1.0, 40.0, half, dtype=torch.float32) ** (torch.arange(half) / half)


def call(name, x, layout, params, rescale=None):
    """The op through its operator (schema order: tensors, then params)."""
    if name == "neox":
        return ops.position_rope_neox_fwd(x, layout, *params.values())
    if name == "non_neox":
        return ops.position_rope_non_neox_fwd(x, layout, *params.values())
    if name == "llama31":
        return ops.position_rope_llama31_fwd(x, layout, *params.values())
    if name == "yarn":
        return ops.position_rope_yarn_fwd(x, layout, *params.values())
    return ops.position_rope_long_rope_fwd(x, rescale, layout, *params.values())


def formula(name, head_dim, params, rescale=None):
    if name in ("neox", "non_neox"):
        return F.plain(head_dim, **params)
    if name == "llama31":
        return F.llama31(head_dim, **params)
    if name == "yarn":
        return F.yarn_tileops(head_dim, **params)
    return F.longrope(head_dim, rescale_factors=rescale, **params)


CASES = [("neox", PLAIN), ("non_neox", PLAIN), ("llama31", LLAMA31), ("yarn", YARN), ("longrope", LONGROPE)]


@pytest.mark.parametrize("name,params", CASES)
@pytest.mark.parametrize("head_dim", [128, 96, 2])
def test_the_table_read_back_is_the_formula(name, params, head_dim):
    # x = [1, ..., 1 | 0, ..., 0] rotates into the table itself: [amp cos(p f) | amp sin(p f)]
    # (adjacent pairs: x = [1, 0, 1, 0, ...] into [amp cos(p f_0), amp sin(p f_0), ...]).
    half = head_dim // 2
    rescale = factors(half) if name == "longrope" else None
    ones = torch.cat([torch.ones(2, half), torch.zeros(2, half)], -1)
    if name == "non_neox":
        ones = torch.stack([torch.ones(2, half), torch.zeros(2, half)], -1).flatten(-2)
    y = call(name, ones, "1d", params, rescale).double()
    if name == "non_neox":  # back to [cos | sin] halves
        y = torch.cat([y[:, 0::2], y[:, 1::2]], -1)
    f, amp = formula(name, head_dim, params, rescale)
    assert torch.equal(y[0], torch.cat([torch.full((half,), amp), torch.zeros(half)]).float().double())
    got_amp = torch.hypot(y[1, :half], y[1, half:])
    got_f = torch.atan2(y[1, half:], y[1, :half])
    torch.testing.assert_close(got_amp, torch.full_like(got_amp, amp), rtol=5e-7, atol=0)
    torch.testing.assert_close(got_f, f, rtol=2e-6, atol=0)


@pytest.mark.parametrize("name,params", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout,shape", [("1d", (300, 128)), ("2d", (2, 300, 3, 64)), ("2d", (1, 7, 1, 2))])
def test_rotation_matches_float64(name, params, dtype, layout, shape):
    half = shape[-1] // 2
    rescale = factors(half) if name == "longrope" else None
    x = torch.randn(*shape, dtype=dtype)
    before = x.clone()
    y = call(name, x, layout, params, rescale)
    assert torch.equal(x, before) and y.dtype == dtype and y.shape == x.shape  # a new tensor: x is read only
    f, amp = formula(name, shape[-1], params, rescale)
    want, slack = F.rotate64(x, f, amp, layout, pairs=name == "non_neox")
    F.assert_close_to(y, want, slack)


@pytest.mark.parametrize("name,params", CASES)
def test_2d_is_1d_for_every_batch_and_head(name, params):
    rescale = factors(32) if name == "longrope" else None
    x = torch.randn(3, 50, 4, 64)
    y = call(name, x, "2d", params, rescale)
    for b in range(3):
        for h in range(4):
            assert torch.equal(y[b, :, h], call(name, x[b, :, h].contiguous(), "1d", params, rescale))


def test_llama31_is_hf_llama3():
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    config = LlamaConfig(hidden_size=512, num_attention_heads=4, head_dim=128, max_position_embeddings=131072,
                         rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 8192})
    hf, hf_amp = ROPE_INIT_FUNCTIONS["llama3"](config, "cpu")
    f, amp = F.llama31(128, **LLAMA31)
    torch.testing.assert_close(hf.double(), f, rtol=1e-6, atol=0)
    assert hf_amp == amp == 1.0


@pytest.mark.parametrize("seq_len", [4096, 4100])
def test_longrope_is_hf_longrope_with_the_factors_hf_picks(seq_len):
    # HF (Phi-3) takes long_factor past original_max_position_embeddings, short_factor up to it; the
    # op takes the list the caller picks. Compared end to end with Phi-3's rotary embedding.
    from transformers import Phi3Config
    from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding, apply_rotary_pos_emb
    half = 48
    short, long = [1.0 + 0.01 * i for i in range(half)], [float(v) for v in factors(half)]
    config = Phi3Config(hidden_size=384, num_attention_heads=4, max_position_embeddings=131072,
                        original_max_position_embeddings=4096,
                        rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": short,
                                         "long_factor": long, "original_max_position_embeddings": 4096})
    rotary = Phi3RotaryEmbedding(config)
    q = torch.randn(1, 2, seq_len, 96)  # HF's [batch, heads, seq, head_dim]
    cos, sin = rotary(q, torch.arange(seq_len)[None])
    hf_q, _ = apply_rotary_pos_emb(q, q, cos, sin)
    picked = torch.tensor(long if seq_len > 4096 else short)
    y = ops.position_rope_long_rope_fwd(q.transpose(1, 2).contiguous(), picked, "2d", 10000.0, 131072, 4096)
    f, amp = F.longrope(96, rescale_factors=picked, **{k: v for k, v in LONGROPE.items() if k != "base"})
    assert amp == rotary.attention_scaling
    want, slack = F.rotate64(q.transpose(1, 2), f, amp, "2d")
    F.assert_close_to(y, want, slack)
    F.assert_close_to(hf_q.transpose(1, 2), want, slack)  # HF's own result within the same bound


def test_yarn_follows_tileops_not_hf():
    # TileOPs' YaRN is not HF's: the dims below TileOPs' low correction dim agree (both keep
    # base^(-2i/d)); past it TileOPs puts the scale on the base and ramps over half-dim correction dims.
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    config = LlamaConfig(hidden_size=512, num_attention_heads=4, head_dim=128, max_position_embeddings=65536,
                         rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 16.0,
                                          "original_max_position_embeddings": 4096})
    hf, hf_amp = ROPE_INIT_FUNCTIONS["yarn"](config, "cpu")
    mine_hf, amp_hf = F.yarn_hf(128, base=10000.0, scale=16.0, original_max_position=4096)
    torch.testing.assert_close(hf.double(), mine_hf, rtol=1e-6, atol=0)  # the HF formula here is HF's
    assert amp_hf == pytest.approx(hf_amp)
    tileops_f, _ = F.yarn_tileops(128, **YARN)
    torch.testing.assert_close(tileops_f[:11], mine_hf[:11], rtol=1e-12, atol=0)
    assert ((tileops_f[11:] / mine_hf[11:] - 1).abs() > 0.01).all()


def test_longrope_without_factors_and_without_extension_is_plain_rope():
    x = torch.randn(40, 64)
    y = ops.position_rope_long_rope_fwd(x, None, "1d", 10000.0, 4096, 4096)
    f = 10000.0 ** -(torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    want, slack = F.rotate64(x, f, 1.0, "1d")
    F.assert_close_to(y, want, slack)


def test_op_classes_take_tileops_params():
    x = torch.randn(16, 64)
    assert torch.equal(RopeNeoxFwdOp(base=500000.0)(x), ops.position_rope_neox_fwd(x, "1d", 500000.0))
    assert torch.equal(RopeNonNeoxFwdOp()(x), ops.position_rope_non_neox_fwd(x, "1d", 10000.0))
    assert torch.equal(RopeLlama31FwdOp(layout="1d", base=500000.0)(x), ops.position_rope_llama31_fwd(x, "1d", 500000.0))
    assert torch.equal(RopeYarnFwdOp(scale=4.0, attn_factor=1.1)(x),
                       ops.position_rope_yarn_fwd(x, "1d", 10000.0, 4.0, 4096, 32.0, 1.0, 1.1))
    r = factors(32)
    assert torch.equal(RopeLongRopeFwdOp(max_position_embeddings=16384)(x, r),
                       ops.position_rope_long_rope_fwd(x, r, "1d", 10000.0, 16384, 4096))


def test_empty_sequences():
    for layout, shape in (("1d", (0, 64)), ("2d", (2, 0, 4, 64))):
        assert call("llama31", torch.randn(*shape), layout, LLAMA31).shape == shape


OPNAME = {"neox": "position_rope_neox_fwd", "non_neox": "position_rope_non_neox_fwd", "llama31": "position_rope_llama31_fwd", "yarn": "position_rope_yarn_fwd",
          "longrope": "position_rope_long_rope_fwd"}


@pytest.mark.parametrize("name,params", CASES)
@pytest.mark.parametrize("layout,shape", [("1d", (2, 4, 16)), ("2d", (4, 16)), ("1d", (2, 2, 4, 16))])
def test_a_layout_of_another_rank_is_refused(name, params, layout, shape):
    rescale = factors(8) if name == "longrope" else None
    # the generated rule that ties x's rank to the layout, before any work
    rank = 2 if layout == "1d" else 4
    match = rf"tileops::{OPNAME[name]}: arguments \(x, layout\) break the rule 'layout != '{layout}' or ndim\(x\) == {rank}'"
    with pytest.raises(ValueError, match=match):
        call(name, torch.randn(*shape), layout, params, rescale)


@pytest.mark.parametrize("name,params", CASES)
def test_an_unknown_layout_is_refused(name, params):
    rescale = factors(8) if name == "longrope" else None
    with pytest.raises(ValueError, match=rf"tileops::{OPNAME[name]}: 'layout' must be one of 1d \| 2d, got '3d'"):
        call(name, torch.randn(4, 16), "3d", params, rescale)


@pytest.mark.parametrize("name,params", CASES)
@pytest.mark.parametrize("head_dim", [15, 0])
def test_an_odd_or_empty_head_dim_is_refused(name, params, head_dim):
    with pytest.raises((RuntimeError, ValueError), match=rf"tileops::{OPNAME[name]}: .*(2\*half|half >= 1)"):
        call(name, torch.randn(4, head_dim), "1d", params)


@pytest.mark.parametrize("name,change,rule", [
    ("neox", dict(base=0.0), "0 < base"),
    ("non_neox", dict(base=-1.0), "0 < base"),
    ("llama31", dict(base=0.0), "0 < base"),
    ("llama31", dict(scale_factor=0.0), "0 < scale_factor"),
    ("llama31", dict(low_freq_factor=0.0), "0 < low_freq_factor"),
    ("llama31", dict(low_freq_factor=4.0), "low_freq_factor < high_freq_factor"),
    ("llama31", dict(original_max_position=0), "original_max_position > 0"),
    ("yarn", dict(base=1.0), "base != 1"),
    ("yarn", dict(scale=-1.0), "0 < scale"),
    ("yarn", dict(beta_fast=0.0), "0 < beta_fast"),
    ("yarn", dict(beta_slow=-1.0), "0 < beta_slow"),
    ("longrope", dict(original_max_position_embeddings=1, max_position_embeddings=8),
     "max_position_embeddings <= original_max_position_embeddings or original_max_position_embeddings >= 2"),
    ("longrope", dict(max_position_embeddings=0), "max_position_embeddings > 0"),
])
def test_rules_are_refused_naming_the_op_and_the_rule(name, change, rule):
    params = dict(dict(CASES)[name], **change)
    rescale = factors(8) if name == "longrope" else None
    with pytest.raises(ValueError, match=rf"tileops::{OPNAME[name]}: .*{rule}"):
        call(name, torch.randn(4, 16), "1d", params, rescale)


def test_longrope_one_original_position_is_fine_without_extension():
    x = torch.randn(4, 16)
    assert torch.isfinite(ops.position_rope_long_rope_fwd(x, None, "1d", 10000.0, 1, 1)).all()


@pytest.mark.parametrize("rescale,error,match", [
    (torch.ones(9), RuntimeError, r"'rescale_factors' must have shape \[half\]"),
    (torch.ones(8, dtype=torch.float64), TypeError, r"'rescale_factors' must have dtype float32"),
    (torch.ones(8, dtype=torch.bfloat16), TypeError, r"'rescale_factors' must have dtype float32"),
])
def test_rescale_factors_are_half_head_dim_float32(rescale, error, match):
    with pytest.raises(error, match=rf"tileops::position_rope_long_rope_fwd: {match}"):
        ops.position_rope_long_rope_fwd(torch.randn(4, 16), rescale, "1d")


def test_amplitude_applies_only_past_the_original_context():
    x = torch.cat([torch.ones(1, 8), torch.zeros(1, 8)], -1)
    for max_pos, want in ((4096, 1.0), (2048, 1.0), (8192, math.sqrt(1 + math.log(2) / math.log(4096)))):
        y = ops.position_rope_long_rope_fwd(x, None, "1d", 10000.0, max_pos, 4096)
        assert torch.equal(y[0, :8], torch.full((8,), want, dtype=torch.float32))


def test_neox_is_hf_rotate_half_and_non_neox_is_roformer_pairs():
    # Neox: Hugging Face's apply_rotary_pos_emb with its default rope init; non-Neox: the same angles on
    # adjacent pairs, which is the Neox result with the head dims de-interleaved (x[0::2] | x[1::2]).
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
    config = LlamaConfig(hidden_size=256, num_attention_heads=4, head_dim=64, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    rotary = LlamaRotaryEmbedding(config)
    q = torch.randn(1, 4, 33, 64, dtype=torch.float64)  # HF's [batch, heads, seq, head_dim]
    cos, sin = rotary(q, torch.arange(33)[None])
    hf_q, _ = apply_rotary_pos_emb(q, q, cos, sin)
    x = q.transpose(1, 2).float().contiguous()  # the op's '2d' layout
    y = ops.position_rope_neox_fwd(x, "2d", 10000.0)
    torch.testing.assert_close(y.double(), hf_q.transpose(1, 2), rtol=0, atol=3e-5)
    xp = torch.cat([x[..., 0::2], x[..., 1::2]], -1).contiguous()
    yp = ops.position_rope_non_neox_fwd(x, "2d", 10000.0)
    assert torch.equal(torch.cat([yp[..., 0::2], yp[..., 1::2]], -1), ops.position_rope_neox_fwd(xp, "2d", 10000.0))
