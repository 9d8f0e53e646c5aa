"""QKNormRopeFwdOp, the first composite op: eager result equals the composition (per-head RMSNorm,
then Neox or GPT-J RoPE by is_neox, written into q and k); tracing decomposes it into the sub-ops'
operators and never keeps its own; checks come from its manifest entry."""
import glob
import os

import pytest
import torch
import torch._dynamo
from torch._dynamo.backends.common import aot_autograd

from position.rope_formulas import COMBOS_TEXT, assert_rope_close, make_cache, rope_ref
from tileops.position import QKNormRopeFwdOp

OP = torch.ops.tileops.position_qk_norm_rope_fwd_writes_k_writes_q
RMS = torch.ops.tileops.norm_rms_norm_fwd
ROPE = torch.ops.tileops.position_rope_neox_cached_fwd_writes_k_writes_q
ROPE_GPTJ = torch.ops.tileops.position_rope_non_neox_cached_fwd_writes_k_writes_q


def inputs(t=6, hq=4, hk=2, d=64, rot=64, dtype=torch.float32, max_pos=32, cache_dtype=torch.float32):
    g = torch.Generator().manual_seed(1)
    return (torch.randint(0, max_pos, (t,), generator=g), torch.randn(t, hq, d, generator=g).to(dtype) * 3,
            torch.randn(t, hk, d, generator=g).to(dtype) * 3, torch.rand(d, generator=g).to(dtype) + 0.5,
            torch.rand(d, generator=g).to(dtype) + 0.5, make_cache(max_pos, rot, dtype=cache_dtype))


def composition_ref(positions, q, k, qw, kw, cache, eps=None, neox=True):
    d = q.shape[-1]
    qn = torch.nn.functional.rms_norm(q.double(), [d], qw.double(), eps)
    kn = torch.nn.functional.rms_norm(k.double(), [d], kw.double(), eps)
    return rope_ref(positions, qn, cache, neox), rope_ref(positions, kn, cache, neox)


@pytest.mark.parametrize("dtype,cache_dtype", [(torch.float32, torch.float32), (torch.bfloat16, torch.float32),
                                               (torch.bfloat16, torch.bfloat16)], ids=str)
@pytest.mark.parametrize("rot,eps", [(64, None), (32, 1e-6)])
def test_eager_equals_the_composition(dtype, cache_dtype, rot, eps):
    positions, q, k, qw, kw, cache = inputs(dtype=dtype, rot=rot, cache_dtype=cache_dtype)
    q_ref, k_ref = composition_ref(positions, q, k, qw, kw, cache, eps)
    # Bit-for-bit what calling the two sub-ops by hand gives.
    qn, kn = RMS(q, qw, [64], eps), RMS(k, kw, [64], eps)
    ROPE(positions, qn, kn, cache)
    assert OP(positions, q, k, qw, kw, cache, eps) is None
    assert torch.equal(q, qn) and torch.equal(k, kn)
    tol = {torch.float32: 1e-5, torch.bfloat16: 2e-2}[dtype]  # two roundings (norm, then rope) in bf16
    torch.testing.assert_close(q.double(), q_ref, rtol=tol, atol=tol)
    torch.testing.assert_close(k.double(), k_ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("rot", [64, 32])
def test_gptj_style_equals_its_composition(dtype, rot):
    positions, q, k, qw, kw, cache = inputs(dtype=dtype, rot=rot)
    q_ref, k_ref = composition_ref(positions, q, k, qw, kw, cache, 1e-6, neox=False)
    qn, kn = RMS(q, qw, [64], 1e-6), RMS(k, kw, [64], 1e-6)
    ROPE_GPTJ(positions, qn, kn, cache)
    QKNormRopeFwdOp(eps=1e-6, is_neox=False)(positions, q, k, qw, kw, cache)
    assert torch.equal(q, qn) and torch.equal(k, kn)  # bit for bit the GPT-J sub-op
    tol = {torch.float32: 1e-5, torch.bfloat16: 2e-2}[dtype]
    torch.testing.assert_close(q.double(), q_ref, rtol=tol, atol=tol)
    torch.testing.assert_close(k.double(), k_ref, rtol=tol, atol=tol)
    neox = inputs(dtype=dtype, rot=rot)
    OP(*neox, 1e-6, True)
    assert not torch.allclose(neox[1], q)  # the two styles differ


def test_int32_positions_pass_through():
    args = inputs()
    int32 = tuple(a.clone() for a in args)
    OP(*args)
    OP(int32[0].int(), *int32[1:])
    assert torch.equal(args[1], int32[1]) and torch.equal(args[2], int32[2])


def test_non_contiguous_q_is_written_back():
    positions, q_c, k, qw, kw, cache = inputs()
    q_ref, _ = composition_ref(positions, q_c, k, qw, kw, cache)
    store = q_c.transpose(0, 1).contiguous()
    q = store.transpose(0, 1)
    assert not q.is_contiguous()
    QKNormRopeFwdOp()(positions, q, k, qw, kw, cache)
    assert_rope_close(store.transpose(0, 1), q_ref.float())


def _targets(gm):
    """call_function targets, looking through auto_functionalized (a mutating op after functionalization)."""
    out = []
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if "auto_functionalized" in str(n.target):
            out.append(n.args[0])
        else:
            out.append(n.target)
    return out


@pytest.mark.parametrize("neox", [True, False], ids=["neox", "gptj"])
def test_tracing_decomposes_into_the_sub_ops(neox):
    torch._dynamo.reset()
    graphs = []

    def fw_compiler(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    op = QKNormRopeFwdOp(eps=1e-6, is_neox=neox)
    fn = torch.compile(lambda *a: op(*a), fullgraph=True, backend=aot_autograd(fw_compiler=fw_compiler))
    args = inputs()
    eager = tuple(a.clone() for a in args)
    fn(*args)
    op(*eager)
    assert torch.equal(args[1], eager[1]) and torch.equal(args[2], eager[2])  # compiled == eager, in place
    targets = _targets(graphs[0])
    assert targets.count(RMS.default) == 2, targets
    assert targets.count((ROPE if neox else ROPE_GPTJ).default) == 1, targets
    assert (ROPE_GPTJ if neox else ROPE).default not in targets
    assert OP.default not in targets


def test_checks_name_the_composite():
    positions, q, k, qw, kw, _ = inputs()
    with pytest.raises(ValueError, match=r"tileops::position_qk_norm_rope_fwd_writes_k_writes_q: shape rule "
                                         r"'rot_dim <= head_dim' is violated"):
        OP(positions, q, k, qw, kw, make_cache(8, 128))
    with pytest.raises(RuntimeError, match=r"tileops::position_qk_norm_rope_fwd_writes_k_writes_q: 'k_weight' "
                                           r"must have shape \[head_dim\]"):
        OP(positions, q, k, qw, kw[:10], make_cache(8, 64))
    with pytest.raises(TypeError, match=r"'q_weight' must have the dtype of 'q'"):
        OP(positions, q, k, qw.half(), kw, make_cache(8, 64))
    # Its own dtype_combos, the same as RopeNeoxCachedFwdOp's: refused before any sub-op runs.
    with pytest.raises(TypeError, match=r"tileops::position_qk_norm_rope_fwd_writes_k_writes_q: the dtypes of "
                                        rf"\(q, cos_sin_cache\) must be one of the combinations {COMBOS_TEXT} "
                                        r"\(dtype_combos\), got \(float32, bfloat16\)"):
        OP(positions, q, k, qw, kw, make_cache(8, 64, dtype=torch.bfloat16))


def test_no_boundary_of_its_own():
    assert QKNormRopeFwdOp.compile_op_names == ()
    assert "target" not in str(OP.default._schema)


def test_composite_and_rope_entries_agree_on_the_cache():
    # The composite passes cos_sin_cache to RopeNeoxCachedFwdOp unchanged: its manifest must accept exactly
    # the dtypes (and pairs with q) that RoPE accepts, or a call would pass one check and fail the other.
    from codegen.__main__ import load_ops
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ops = {o.cls: o for o in load_ops(sorted(glob.glob(os.path.join(root, "manifests", "*.yaml"))), root)}
    composite = ops["QKNormRopeFwdOp"]
    for rope in (ops["RopeNeoxCachedFwdOp"], ops["RopeNonNeoxCachedFwdOp"]):
        for name in ("positions", "q", "cos_sin_cache"):
            assert composite.input(name).dtype == rope.input(name).dtype, name
        assert composite.dtype_combos == rope.dtype_combos and len(rope.dtype_combos) == 5
