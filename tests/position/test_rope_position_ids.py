"""RopeNeoxPositionIdsFwdOp (TileOPs' signature: x, position_ids, max_position, base, rotary_dim) on
CPU against a float64 rotation written here over TileOPs' table (float32 angles, cos/sin rounded to
x's dtype), the copied tail past rotary_dim, and every refusal."""
import pytest
import torch

import tileops
from tileops.position import RopeNeoxPositionIdsFwdOp

tileops.load()
ops = torch.ops.tileops
TOL = {torch.float32: 2e-6, torch.bfloat16: 1e-2, torch.float16: 1e-3}


def float64_rope(x, pos, base, rot):
    half = rot // 2
    freqs = 1.0 / (base ** (torch.arange(half, dtype=torch.float32) / half))  # TileOPs' float32 table
    angles = pos.to(torch.float32)[:, None] * freqs[None, :]
    cos = angles.double().cos().to(x.dtype).double()[:, None, :]
    sin = angles.double().sin().to(x.dtype).double()[:, None, :]
    x64 = x.double()
    x1, x2 = x64[..., :half], x64[..., half:rot]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, x64[..., rot:]], dim=-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rot", [None, 32, 2])
@pytest.mark.parametrize("pos_dtype", [torch.int64, torch.int32])
def test_matches_a_float64_rotation_of_the_table(dtype, rot, pos_dtype):
    x = torch.randn(37, 3, 64, dtype=dtype)
    pos = torch.randint(0, 4096, (37,), dtype=pos_dtype)
    before = x.clone()
    y = ops.position_rope_neox_position_ids_fwd(x, pos, 4096, 500000.0, rot)
    assert torch.equal(x, before)  # a new tensor: x is read only
    want = float64_rope(x, pos, 500000.0, 64 if rot is None else rot)
    assert ((y.double() - want).abs() <= TOL[dtype] * (want.abs() + 1)).all()
    r = 64 if rot is None else rot
    assert torch.equal(y[..., r:], x[..., r:])  # past rotary_dim: copied bit for bit


def test_position_zero_is_the_identity_and_the_op_class_calls_it():
    x = torch.randn(4, 2, 16)
    y = RopeNeoxPositionIdsFwdOp(max_position=8)(x, torch.zeros(4, dtype=torch.long))
    assert torch.equal(y, x)


@pytest.mark.parametrize("bad", [-1, 16])
def test_positions_outside_the_table_are_refused(bad):
    x = torch.randn(4, 2, 16)
    pos = torch.tensor([0, 3, bad, 1])
    with pytest.raises(ValueError, match=rf"tileops::position_rope_neox_position_ids_fwd: 'position_ids' must lie "
                                         rf"in \[0, 16\) \(max_position\), got {bad}"):
        ops.position_rope_neox_position_ids_fwd(x, pos, 16)


@pytest.mark.parametrize("shape,kw,match", [
    ((4, 2, 16), dict(rotary_dim=3), r"rotary_dim % 2 == 0"),
    ((4, 2, 16), dict(rotary_dim=18), r"rotary_dim <= head_dim"),
    ((4, 2, 16), dict(rotary_dim=0), r"rotary_dim > 0"),
    ((4, 2, 15), dict(), r"head_dim % 2 == 0"),
    ((4, 2, 16), dict(max_position=0), r"max_position > 0"),
    ((4, 2, 16), dict(base=-1.0), r"0 < base"),
])
def test_rules_are_refused_naming_the_op_and_the_rule(shape, kw, match):
    kw = dict(dict(max_position=16), **kw)
    with pytest.raises(ValueError, match=rf"tileops::position_rope_neox_position_ids_fwd: .*{match}"):
        ops.position_rope_neox_position_ids_fwd(torch.randn(*shape), torch.zeros(shape[0], dtype=torch.long), **kw)


def test_position_ids_must_match_the_tokens():
    with pytest.raises(RuntimeError, match=r"'position_ids' must have shape \[num_tokens\]"):
        ops.position_rope_neox_position_ids_fwd(torch.randn(4, 2, 16), torch.zeros(5, dtype=torch.long), 16)
