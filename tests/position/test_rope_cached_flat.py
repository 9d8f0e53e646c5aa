"""RopeNeoxCachedFlatFwdOp / RopeNonNeoxCachedFlatFwdOp on CPU (reference target): vLLM's rotary_embedding call
(q/k as [t, heads * head_size], key=None, int32 or int64 positions, per-token offsets) against the
independent float64 formulas, and the generated checks, meta/fake, opcheck and torch.compile."""
import pytest
import torch
import torch._dynamo
from torch._subclasses.fake_tensor import FakeTensorMode

from position.rope_formulas import assert_rope_close, make_cache, rope_ref
from tileops.position import RopeNeoxCachedFlatFwdOp, RopeNonNeoxCachedFlatFwdOp

OPS = {True: torch.ops.tileops.position_rope_neox_cached_flat_fwd_writes_k_writes_q,
       False: torch.ops.tileops.position_rope_non_neox_cached_flat_fwd_writes_k_writes_q}
OPS_3D = {True: torch.ops.tileops.position_rope_neox_cached_fwd_writes_k_writes_q,
          False: torch.ops.tileops.position_rope_non_neox_cached_fwd_writes_k_writes_q}
STYLES = [True, False]
STYLE_IDS = ["neox", "gptj"]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def inputs(t, hq, hk, d, rot, dtype=torch.float32, max_pos=64, seed=0, index=torch.int64):
    g = torch.Generator().manual_seed(seed)
    positions = torch.randint(0, max_pos // 2, (t,), generator=g).to(index)
    offsets = torch.randint(0, max_pos // 2, (t,), generator=g).to(index)
    q = torch.randn(t, hq * d, generator=g).to(dtype)
    k = torch.randn(t, hk * d, generator=g).to(dtype)
    return positions, q, k, make_cache(max_pos, rot), offsets


def flat_ref(positions, x, cache, neox, head_size):
    """rope_ref on the [t, heads, head_size] view, back to [t, heads * head_size]."""
    return rope_ref(positions.long(), x.view(x.shape[0], -1, head_size), cache, neox).flatten(1)


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("index", [torch.int64, torch.int32], ids=str)
@pytest.mark.parametrize("t,hq,hk,d,rot", [(7, 4, 2, 64, 64), (5, 3, 1, 80, 32), (1, 1, 1, 2, 2), (9, 2, 3, 128, 96)])
def test_matches_formula_with_offsets(neox, dtype, index, t, hq, hk, d, rot):
    positions, q, k, cache, offsets = inputs(t, hq, hk, d, rot, dtype, index=index)
    rows = positions.long() + offsets.long()  # vLLM's batched form: the cache row is offset + position
    q_ref, k_ref = flat_ref(rows, q, cache, neox, d), flat_ref(rows, k, cache, neox, d)
    q0 = q.clone()
    assert OPS[neox](positions, q, k, cache, offsets, d) is None
    assert_rope_close(q, q_ref)
    assert_rope_close(k, k_ref)
    tail = q.view(t, hq, d)[..., rot:]
    assert torch.equal(tail, q0.view(t, hq, d)[..., rot:])  # dims past rot_dim untouched


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
def test_equals_the_3d_op_on_the_same_memory(neox):
    positions, q, k, cache, _ = inputs(6, 4, 2, 64, 32, torch.bfloat16)
    q3, k3 = q.view(6, 4, 64).clone(), k.view(6, 2, 64).clone()
    OPS[neox](positions, q, k, cache, None, 64)
    OPS_3D[neox](positions, q3, k3, cache)
    assert torch.equal(q, q3.flatten(1)) and torch.equal(k, k3.flatten(1))


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
def test_offsets_shift_the_cache_row(neox):
    positions, q, k, cache, _ = inputs(5, 2, 1, 32, 32)
    shifted = (q.clone(), k.clone())
    OPS[neox](positions, *shifted, cache, torch.full((5,), 7), 32)
    plain = (q.clone(), k.clone())
    OPS[neox](positions + 7, *plain, cache, None, 32)
    assert torch.equal(shifted[0], plain[0]) and torch.equal(shifted[1], plain[1])
    assert not torch.equal(shifted[0], q)


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
def test_key_none_rotates_q_only(neox):
    positions, q, _, cache, offsets = inputs(4, 3, 1, 64, 64, torch.float16, index=torch.int32)
    q_ref = flat_ref(positions.long() + offsets.long(), q, cache, neox, 64)
    assert OPS[neox](positions, q, None, cache, offsets, 64) is None
    assert_rope_close(q, q_ref)


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
def test_non_contiguous_q_is_written_back(neox):
    positions, q_c, k, cache, offsets = inputs(6, 2, 2, 32, 32)
    q_ref = flat_ref(positions + offsets, q_c, cache, neox, 32)
    padded = torch.full((6, 80), 5.0)
    q = padded[:, :64]  # rows 80 apart: not contiguous
    q.copy_(q_c)
    OPS[neox](positions, q, k, cache, offsets, 32)
    assert_rope_close(q, q_ref)
    assert torch.equal(padded[:, 64:], torch.full((6, 16), 5.0))


PREFIX = r"tileops::position_rope_neox_cached_flat_fwd_writes_k_writes_q: "


@pytest.mark.parametrize("edit,exc,message", [
    (lambda a: a.update(head_size=48), ValueError,
     r"shape rule 'q_width % head_size == 0' is violated \(left side 32, right side 0\)"),
    (lambda a: a.update(k=torch.randn(4, 40)), ValueError, r"shape rule 'k_width % head_size == 0' is violated"),
    (lambda a: a.update(head_size=0), ValueError, r"shape rule 'head_size >= 1' is violated"),
    (lambda a: a.update(cache=make_cache(64, 64)), ValueError,
     r"shape rule 'rot_dim <= head_size' is violated \(left side 64, right side 32\)"),
    (lambda a: a.update(offsets=a["offsets"].int()), TypeError,
     r"'offsets' must have the dtype of 'positions' \(same_as\(positions\) = int64\), got int32"),
    (lambda a: a.update(offsets=a["offsets"][:3]), RuntimeError, r"'offsets' must have shape \[t\] .*got \[3\]"),
    (lambda a: a.update(positions=a["positions"].short(), offsets=None), TypeError,
     r"'positions' must have dtype int64 \| int32, got int16"),
    (lambda a: a.update(q=a["q"].view(4, 4, 32)), RuntimeError, r"'q' must have shape \[t, q_width\]"),
])
def test_bad_input_names_op_argument_and_rule(edit, exc, message):
    positions, q, k, cache, offsets = inputs(4, 4, 2, 32, 32)
    a = dict(positions=positions, q=q, k=k, cache=cache, offsets=offsets, head_size=32)
    edit(a)
    with pytest.raises(exc, match=PREFIX + message):
        OPS[True](a["positions"], a["q"], a["k"], a["cache"], a["offsets"], a["head_size"])


def test_out_of_range_rows_name_positions_plus_offsets():
    positions, q, k, cache, offsets = inputs(4, 2, 2, 32, 32, max_pos=64)
    offsets[1] = 64 - int(positions[1])  # row 64 of a 64-row cache
    q0 = q.clone()
    with pytest.raises(IndexError, match=r"tileops::position_rope_non_neox_cached_flat_fwd_writes_k_writes_q: "
                                         r"'positions \+ offsets' must satisfy 0 <= positions \+ offsets < max_pos "
                                         r"\(max_pos=64, .*\), got 64"):
        OPS[False](positions, q, k, cache, offsets, 32)
    assert torch.equal(q, q0)


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
def test_meta_and_fake_build_nothing(neox, counters):
    meta = dict(device="meta", dtype=torch.bfloat16)
    OPS[neox](torch.empty(5, dtype=torch.int32, device="meta"), torch.empty(5, 4 * 64, **meta),
              torch.empty(5, 2 * 64, **meta), torch.empty(32, 64, **meta),
              torch.empty(5, dtype=torch.int32, device="meta"), 64)
    with FakeTensorMode() as mode:
        positions, q, k, cache, offsets = (mode.from_tensor(t) for t in inputs(5, 4, 2, 64, 32))
        OPS[neox](positions, q, k, cache, offsets, 64)
        OPS[neox](positions, q, None, cache, None, 64)
        with pytest.raises(ValueError, match=r"q_width % head_size == 0"):
            OPS[neox](positions, q, k, cache, offsets, 100)
    assert counters()["kernel_builds"] == 0


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
def test_opcheck(neox):
    positions, q, k, cache, offsets = inputs(6, 4, 2, 64, 32, torch.bfloat16, index=torch.int32)
    torch.library.opcheck(OPS[neox].default, (positions, q, k, cache, offsets, 64))
    torch.library.opcheck(OPS[neox].default, (positions.long(), q, None, cache, None, 64))


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
def test_compiled_equals_eager(neox):
    torch._dynamo.reset()
    positions, q, k, cache, offsets = inputs(8, 4, 2, 64, 64, index=torch.int32)
    q2, k2 = q.clone(), k.clone()
    op = RopeNeoxCachedFlatFwdOp(head_size=64) if neox else RopeNonNeoxCachedFlatFwdOp(head_size=64)

    def fn(positions, q, k, cache, offsets):
        op(positions, q, k, cache, offsets)
        return q * 2

    out = torch.compile(fn, fullgraph=True, dynamic=True, backend="aot_eager")(positions, q, k, cache, offsets)
    op(positions, q2, k2, cache, offsets)
    assert torch.equal(q, q2) and torch.equal(k, k2) and torch.equal(out, q2 * 2)


def test_op_classes():
    assert RopeNeoxCachedFlatFwdOp.compile_op_names == ("tileops::position_rope_neox_cached_flat_fwd_writes_k_writes_q",)
    op = RopeNonNeoxCachedFlatFwdOp(32, target="reference")
    assert op.head_size == 32
    positions, q, k, cache, _ = inputs(3, 2, 1, 32, 16)
    q_ref = flat_ref(positions, q, cache, False, 32)
    assert op(positions, q, k, cache) is None  # key and offsets may be left out: None
    assert_rope_close(q, q_ref)
