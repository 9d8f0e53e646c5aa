"""RopeNeoxCachedFwdOp / RopeNonNeoxCachedFwdOp on CPU (reference target): values against independent float64
formulas, partial rotary, int32 positions, key=None, write-back of non-contiguous q/k, out-of-range
positions, errors naming the manifest rule, meta/fake, opcheck, torch.compile and the Op-class view."""
import pytest
import torch
import torch._dynamo
from torch._subclasses.fake_tensor import FakeTensorMode

from position.rope_formulas import CACHE_COMBOS, COMBOS_TEXT, REFUSED_COMBOS, assert_rope_close, make_cache, rope_ref
from tileops.position import RopeNeoxCachedFwdOp, RopeNonNeoxCachedFwdOp

OPS = {True: torch.ops.tileops.position_rope_neox_cached_fwd_writes_k_writes_q,
       False: torch.ops.tileops.position_rope_non_neox_cached_fwd_writes_k_writes_q}
STYLES = [True, False]
STYLE_IDS = ["neox", "gptj"]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def inputs(t, hq, hk, d, rot, dtype=torch.float32, max_pos=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    positions = torch.randint(0, max_pos, (t,), generator=g)
    q = torch.randn(t, hq, d, generator=g).to(dtype)
    k = torch.randn(t, hk, d, generator=g).to(dtype)
    return positions, q, k, make_cache(max_pos, rot)


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("t,hq,hk,d,rot", [(7, 4, 2, 64, 64), (16, 8, 8, 128, 128), (5, 3, 1, 80, 32),
                                           (3, 2, 2, 65, 64), (1, 1, 1, 2, 2), (9, 1, 3, 256, 64)])
def test_matches_formula(neox, dtype, t, hq, hk, d, rot):
    positions, q, k, cache = inputs(t, hq, hk, d, rot, dtype)
    q_ref, k_ref = rope_ref(positions, q, cache, neox), rope_ref(positions, k, cache, neox)
    q0, k0 = q.clone(), k.clone()
    assert OPS[neox](positions, q, k, cache) is None  # in place: returns nothing
    assert_rope_close(q, q_ref)
    assert_rope_close(k, k_ref)
    # Dims past rot_dim are untouched, bit for bit.
    assert torch.equal(q[..., rot:], q0[..., rot:]) and torch.equal(k[..., rot:], k0[..., rot:])


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
@pytest.mark.parametrize("dtype,cache_dtype", CACHE_COMBOS, ids=str)
@pytest.mark.parametrize("t,hq,hk,d,rot", [(7, 4, 2, 64, 64), (5, 3, 1, 80, 32)])
def test_cache_dtypes_match_formula_with_the_rounded_cache(neox, dtype, cache_dtype, t, hq, hk, d, rot):
    positions, q, k, _ = inputs(t, hq, hk, d, rot, dtype)
    cache = make_cache(64, rot, dtype=cache_dtype)  # rope_ref widens exactly these rounded values
    q_ref, k_ref = rope_ref(positions, q, cache, neox), rope_ref(positions, k, cache, neox)
    OPS[neox](positions, q, k, cache)
    assert_rope_close(q, q_ref)
    assert_rope_close(k, k_ref)


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
@pytest.mark.parametrize("dtype,cache_dtype", REFUSED_COMBOS, ids=str)
def test_refused_cache_dtype_lists_the_allowed_combinations(neox, dtype, cache_dtype):
    positions, q, k, _ = inputs(4, 2, 2, 32, 32, dtype)
    cache = make_cache(64, 32, dtype=cache_dtype)
    q0 = q.clone()
    name = "position_rope_neox_cached_fwd_writes_k_writes_q" if neox else "position_rope_non_neox_cached_fwd_writes_k_writes_q"
    message = (rf"tileops::{name}: the dtypes of \(q, cos_sin_cache\) must be one of the combinations "
               rf"{COMBOS_TEXT} \(dtype_combos\), got \({str(dtype)[6:]}, {str(cache_dtype)[6:]}\)")
    with pytest.raises(TypeError, match=message):
        OPS[neox](positions, q, k, cache)
    assert torch.equal(q, q0)
    with FakeTensorMode() as mode, pytest.raises(TypeError, match=message):  # the Meta kernel refuses it too
        OPS[neox](*(mode.from_tensor(x) for x in (positions, q, k, cache)))


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
def test_int32_positions_give_the_int64_result(neox):
    positions, q, k, cache = inputs(9, 3, 2, 64, 32, torch.bfloat16)
    q32, k32 = q.clone(), k.clone()
    OPS[neox](positions, q, k, cache)
    OPS[neox](positions.int(), q32, k32, cache)
    assert torch.equal(q, q32) and torch.equal(k, k32)
    assert not torch.equal(q, inputs(9, 3, 2, 64, 32, torch.bfloat16)[1])  # it did rotate


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_key_none_rotates_q_only(neox, dtype):
    positions, q, _, cache = inputs(7, 4, 2, 64, 32, dtype)
    q_ref = rope_ref(positions, q, cache, neox)
    assert OPS[neox](positions, q, None, cache) is None
    assert_rope_close(q, q_ref)
    q2 = inputs(7, 4, 2, 64, 32, dtype)[1]
    (RopeNeoxCachedFwdOp() if neox else RopeNonNeoxCachedFwdOp())(positions, q2, None, cache)  # the Op class too
    assert torch.equal(q, q2)
    with FakeTensorMode() as mode:
        OPS[neox](*(mode.from_tensor(t) for t in (positions, q)), None, mode.from_tensor(cache))


def test_styles_differ_and_position_zero_is_identity():
    positions, q, k, cache = inputs(4, 2, 2, 64, 64)
    a, b = (q.clone(), k.clone()), (q.clone(), k.clone())
    OPS[True](positions, *a, cache)
    OPS[False](positions, *b, cache)
    assert not torch.allclose(a[0], b[0])
    q0, k0 = q.clone(), k.clone()
    OPS[True](torch.zeros(4, dtype=torch.long), q, k, cache)  # cos 1, sin 0
    assert torch.equal(q, q0) and torch.equal(k, k0)


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
def test_non_contiguous_q_and_k_are_written_back(neox):
    positions, q_c, k_c, cache = inputs(6, 4, 2, 64, 32)
    q_ref, k_ref = rope_ref(positions, q_c, cache, neox), rope_ref(positions, k_c, cache, neox)
    q_store = q_c.transpose(0, 1).contiguous()  # [h, t, d] storage
    q = q_store.transpose(0, 1)                  # the [t, h, d] view of it: not contiguous
    k_pad = torch.full((6, 2, 80), 7.0)
    k = k_pad[..., :64]                          # padded rows: not contiguous
    k.copy_(k_c)
    assert not q.is_contiguous() and not k.is_contiguous()
    ptr = q.data_ptr()
    OPS[neox](positions, q, k, cache)
    assert q.data_ptr() == ptr  # the caller's storage, not a copy
    assert_rope_close(q, q_ref)
    assert_rope_close(q_store.transpose(0, 1), q_ref)
    assert_rope_close(k, k_ref)
    assert torch.equal(k_pad[..., 64:], torch.full((6, 2, 16), 7.0))  # padding never written


def test_only_k_heads_still_runs():
    # q has no heads (nothing to compute there) but k must still be rotated.
    positions, q, k, cache = inputs(3, 0, 2, 32, 32)
    k_ref = rope_ref(positions, k, cache, True)
    OPS[True](positions, q, k, cache)
    assert_rope_close(k, k_ref)


def test_no_tokens_is_a_no_op(counters):
    positions, q, k, cache = inputs(0, 4, 2, 32, 32)
    OPS[True](positions, q, k, cache)
    assert q.shape == (0, 4, 32) and counters()["kernel_builds"] == 0


@pytest.mark.parametrize("bad", [64, 1000, -1])
def test_out_of_range_positions_are_an_index_error_and_nothing_is_written(bad):
    positions, q, k, cache = inputs(4, 2, 2, 32, 32, max_pos=64)
    positions[2] = bad
    q0, k0 = q.clone(), k.clone()
    with pytest.raises(IndexError, match=r"tileops::position_rope_neox_cached_fwd_writes_k_writes_q: 'positions' must "
                                         rf"satisfy 0 <= positions < max_pos \(max_pos=64, .*\), got {bad}"):
        OPS[True](positions, q, k, cache)
    assert torch.equal(q, q0) and torch.equal(k, k0)


PREFIX = r"tileops::position_rope_non_neox_cached_fwd_writes_k_writes_q: "


@pytest.mark.parametrize("edit,exc,message", [
    (lambda a: a.update(cache=make_cache(64, 64)[:, :63].contiguous()), ValueError,
     r"shape rule 'rot_dim % 2 == 0' is violated \(left side 1, right side 0\)"),
    (lambda a: a.update(cache=make_cache(64, 40)), ValueError,
     r"shape rule 'rot_dim <= head_dim' is violated \(left side 40, right side 32\)"),
    (lambda a: a.update(cache=torch.zeros(64, 0)), ValueError, r"shape rule 'rot_dim >= 2' is violated"),
    (lambda a: a.update(k=a["k"].half()), TypeError,
     r"'k' must have the dtype of 'q' \(same_as\(q\) = float32\), got float16"),
    (lambda a: a.update(q=a["q"].double(), k=a["k"].double()), TypeError,
     r"'q' must have dtype float16 \| bfloat16 \| float32, got float64"),
    (lambda a: a.update(positions=a["positions"].short()), TypeError,
     r"'positions' must have dtype int64 \| int32, got int16"),
    (lambda a: a.update(cache=a["cache"].double()), TypeError,
     r"'cos_sin_cache' must have dtype float16 \| bfloat16 \| float32, got float64"),
    (lambda a: a.update(cache=a["cache"].half()), TypeError,
     r"the dtypes of \(q, cos_sin_cache\) must be one of the combinations .* \(dtype_combos\), got \(float32, float16\)"),
    (lambda a: a.update(q=a["q"].flatten(1)), RuntimeError, r"'q' must have shape \[t, hq, head_dim\]"),
    (lambda a: a.update(k=a["k"][:3]), RuntimeError, r"'k' must have shape \[t, hk, head_dim\] .*\(t=4\), got \[3, 2, 32\]"),
    (lambda a: a.update(k=torch.randn(4, 2, 16)), RuntimeError, r"'k' must have shape \[t, hk, head_dim\] .*head_dim=32"),
    (lambda a: a.update(cache=a["cache"].to("meta")), RuntimeError, r"'cos_sin_cache' must be on the device of 'positions'"),
])
def test_bad_input_names_op_argument_and_rule(edit, exc, message):
    positions, q, k, cache = inputs(4, 2, 2, 32, 32)
    a = dict(positions=positions, q=q, k=k, cache=cache)
    edit(a)
    with pytest.raises(exc, match=PREFIX + message):
        OPS[False](a["positions"], a["q"], a["k"], a["cache"])


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
def test_meta_and_fake_build_nothing(neox, counters):
    OPS[neox](torch.empty(5, dtype=torch.long, device="meta"), torch.empty(5, 4, 64, device="meta"),
              torch.empty(5, 2, 64, device="meta"), torch.empty(32, 64, device="meta"))
    bf16 = dict(device="meta", dtype=torch.bfloat16)  # a cache in q's dtype
    OPS[neox](torch.empty(5, dtype=torch.long, device="meta"), torch.empty(5, 4, 64, **bf16),
              torch.empty(5, 2, 64, **bf16), torch.empty(32, 64, **bf16))
    with FakeTensorMode() as mode:
        positions, q, k, cache = (mode.from_tensor(t) for t in inputs(5, 4, 2, 64, 32))
        OPS[neox](positions, q, k, cache)
        OPS[neox](positions, q.half(), k.half(), cache.half())
        with pytest.raises(ValueError, match=r"rot_dim <= head_dim"):
            OPS[neox](positions, q, k, mode.from_tensor(make_cache(8, 128)))
    assert counters()["kernel_builds"] == 0


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_opcheck(neox, dtype):
    torch.library.opcheck(OPS[neox].default, inputs(6, 4, 2, 64, 32, dtype))
    if dtype != torch.float32:
        positions, q, k, _ = inputs(6, 4, 2, 64, 32, dtype)
        torch.library.opcheck(OPS[neox].default, (positions, q, k, make_cache(64, 32, dtype=dtype)))


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
def test_opcheck_int32_positions_and_no_key(neox):
    positions, q, k, cache = inputs(6, 4, 2, 64, 32)
    torch.library.opcheck(OPS[neox].default, (positions.int(), q, k, cache))
    torch.library.opcheck(OPS[neox].default, (positions, q, None, cache))


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
def test_compiled_without_key_and_with_int32_positions(neox):
    torch._dynamo.reset()
    positions, q, _, cache = inputs(8, 4, 2, 64, 64)
    q2 = q.clone()
    op = RopeNeoxCachedFwdOp() if neox else RopeNonNeoxCachedFwdOp()

    def fn(positions, q, cache):
        op(positions, q, None, cache)
        return q + 1

    out = torch.compile(fn, fullgraph=True, backend="aot_eager")(positions.int(), q, cache)
    op(positions, q2, None, cache)
    assert torch.equal(q, q2) and torch.equal(out, q2 + 1)


@pytest.mark.parametrize("neox", STYLES, ids=STYLE_IDS)
def test_compiled_equals_eager_and_mutates_inputs(neox):
    torch._dynamo.reset()
    positions, q, k, cache = inputs(8, 4, 2, 64, 64)
    q2, k2 = q.clone(), k.clone()
    op = RopeNeoxCachedFwdOp() if neox else RopeNonNeoxCachedFwdOp()

    def fn(positions, q, k, cache):
        op(positions, q, k, cache)
        return q * 2

    out = torch.compile(fn, fullgraph=True, backend="aot_eager")(positions, q, k, cache)
    op(positions, q2, k2, cache)
    assert torch.equal(q, q2) and torch.equal(k, k2) and torch.equal(out, q2 * 2)


def test_op_classes():
    assert RopeNeoxCachedFwdOp.compile_op_names == ("tileops::position_rope_neox_cached_fwd_writes_k_writes_q",)
    assert RopeNonNeoxCachedFwdOp.compile_op_names == ("tileops::position_rope_non_neox_cached_fwd_writes_k_writes_q",)
    positions, q, k, cache = inputs(3, 2, 1, 16, 16)
    q_ref = rope_ref(positions, q, cache, False)
    assert RopeNonNeoxCachedFwdOp(target="reference")(positions, q, k, cache) is None
    assert_rope_close(q, q_ref)
