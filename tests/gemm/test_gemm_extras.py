"""BmmFp8KNFwdOp, BmmFp8NKFwdOp, GroupedGemmFwdOp and GemmW4A16FwdOp (manifests/gemm.yaml) on CPU against
float64 formulas written here, on small and odd shapes; their refusals, naming the op, the argument and
the rule."""
import pytest
import torch

import tileops
from tileops.gemm import BmmFp8FwdOp, BmmFp8KNFwdOp, BmmFp8NKFwdOp, GemmW4A16FwdOp, GroupedGemmFwdOp

tileops.load()
ops = torch.ops.tileops
E4M3 = torch.float8_e4m3fn
HALF_ULP = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}


def within_one_rounding(got, want, terms, dtype):
    """float32 sums of the products, then one rounding to `dtype`: the output's half-ulp of the value
    and float32's rounding of a sum of |terms|."""
    return ((got.double() - want).abs() <= HALF_ULP[dtype] * want.abs() + 1e-6 * terms + 1e-6).all()


# --- BmmFp8KNFwdOp / BmmFp8NKFwdOp ------------------------------------------------------------------

def fp8(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * 4).to(E4M3)


BMNK = [(1, 1, 8, 33), (3, 5, 7, 48), (2, 17, 4, 1), (2, 4, 8, 130), (2, 3, 8, 0)]


@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bmnk", BMNK)
def test_bmm_fp8_layouts_match_float64(layout, out_dtype, bmnk):
    bs, m, n, k = bmnk
    a = fp8(bs, m, k, seed=0)
    b = fp8(bs, k, n, seed=1) if layout == "kn" else fp8(bs, n, k, seed=1)
    sa, sb = torch.tensor(0.75), torch.tensor(1.5)
    fn = ops.gemm_bmm_fp8_kn_fwd if layout == "kn" else ops.gemm_bmm_fp8_nk_fwd
    d = fn(a, b, sa, sb, out_dtype=out_dtype)
    assert d.shape == (bs, m, n) and d.dtype == out_dtype
    b_kn = b.double() if layout == "kn" else b.double().transpose(1, 2)
    want = (a.double() @ b_kn) * 0.75 * 1.5
    terms = (a.double().abs() @ b_kn.abs()) * 0.75 * 1.5
    assert within_one_rounding(d, want, terms, out_dtype)


def test_bmm_fp8_kn_nk_and_the_flagged_entry_agree_bitwise():
    a, b_kn = fp8(3, 5, 40, seed=2), fp8(3, 40, 9, seed=3)
    b_nk = b_kn.transpose(1, 2).contiguous()
    sa, sb = torch.tensor(0.5), torch.tensor(3.0)
    kn = BmmFp8KNFwdOp(out_dtype=torch.float16)(a, b_kn, sa, sb)
    nk = BmmFp8NKFwdOp(out_dtype=torch.float16)(a, b_nk, sa, sb)
    flagged = BmmFp8FwdOp(out_dtype=torch.float16, trans_b=True)(a, b_nk, sa, sb)
    assert torch.equal(kn, nk) and torch.equal(nk, flagged)
    # a [B, N, K] view of a [B, K, N] buffer (not contiguous) reads the same
    assert torch.equal(BmmFp8NKFwdOp(out_dtype=torch.float16)(a, b_kn.transpose(1, 2), sa, sb), kn)


def test_bmm_fp8_meta_gives_the_shape_and_the_dtype_of_the_param():
    a = torch.empty(2, 3, 64, dtype=E4M3, device="meta")
    b = torch.empty(2, 5, 64, dtype=E4M3, device="meta")
    s = torch.empty((), device="meta")
    d = ops.gemm_bmm_fp8_nk_fwd(a, b, s, s, out_dtype=torch.float16)
    assert d.shape == (2, 3, 5) and d.dtype == torch.float16 and d.is_meta


ONE = torch.tensor(1.0)


@pytest.mark.parametrize("name,args,match", [
    ("kn", (fp8(2, 3, 32, seed=0), fp8(2, 5, 32, seed=1), ONE, ONE), r"'b' must have shape \[B, K, N\]"),
    ("nk", (fp8(2, 3, 32, seed=0), fp8(2, 32, 5, seed=1), ONE, ONE), r"'b' must have shape \[B, N, K\]"),
    ("kn", (fp8(2, 3, 32, seed=0), fp8(3, 32, 5, seed=1), ONE, ONE), r"'b' must have shape \[B, K, N\]"),
    ("nk", (fp8(2, 3, 32, seed=0), fp8(2, 5, 32, seed=1), torch.ones(1), ONE), r"'scale_a' must have shape \[\]"),
    ("kn", (fp8(2, 3, 32, seed=0), fp8(2, 32, 5, seed=1), ONE, torch.ones(1, 1)), r"'scale_b' must have shape \[\]"),
    ("kn", (fp8(2, 3, 32, seed=0).to(torch.float8_e5m2), fp8(2, 32, 5, seed=1).to(torch.float8_e5m2), ONE, ONE),
     r"'a' must have dtype float8_e4m3fn, got float8_e5m2"),
    ("nk", (fp8(2, 3, 32, seed=0), fp8(2, 5, 32, seed=1), ONE.double(), ONE), r"'scale_a' must have dtype float32"),
])
def test_bmm_fp8_refusals_name_the_op_and_the_argument(name, args, match):
    with pytest.raises((RuntimeError, ValueError, TypeError), match=rf"tileops::gemm_bmm_fp8_{name}_fwd: .*{match}"):
        getattr(ops, f"gemm_bmm_fp8_{name}_fwd")(*args)


def test_bmm_fp8_refuses_an_out_dtype_outside_its_choices():
    a, b = fp8(1, 2, 16, seed=0), fp8(1, 16, 3, seed=1)
    with pytest.raises((RuntimeError, ValueError), match=r"tileops::gemm_bmm_fp8_kn_fwd: .*out_dtype"):
        ops.gemm_bmm_fp8_kn_fwd(a, b, ONE, ONE, out_dtype=torch.float32)


# --- GroupedGemmFwdOp --------------------------------------------------------------------------------

def i32(*values):
    return torch.tensor(values, dtype=torch.int32)


def float64_runs(a, b, sizes, offsets, transpose_b):
    n = b.shape[1] if transpose_b else b.shape[2]
    out = torch.zeros(a.shape[0], n, dtype=torch.float64)
    terms = torch.zeros_like(out)
    for g in range(b.shape[0]):
        lo, rows = int(offsets[g]), int(sizes[g])
        w = b[g].double().T if transpose_b else b[g].double()
        out[lo:lo + rows] = a[lo:lo + rows].double() @ w
        terms[lo:lo + rows] = a[lo:lo + rows].double().abs() @ w.abs()
    return out, terms


RUNS = [
    # TileOPs' form: back to back in group order, every row covered; a group of size 0 and one of a row
    (i32(3, 0, 1, 4), i32(0, 3, 3, 4), 8),
    # out of group order, rows 5 and 10 uncovered (zeros), a size-0 group with an offset past the rows
    (i32(3, 0, 5, 1), i32(6, 99, 0, 9), 11),
    # one row, one group
    (i32(1), i32(0), 1),
]


@pytest.mark.parametrize("transpose_b", [True, False])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("runs", RUNS)
@pytest.mark.parametrize("nk", [(8, 33), (5, 130)])
def test_grouped_gemm_matches_float64_per_run(transpose_b, dtype, runs, nk):
    sizes, offsets, rows = runs
    n, k = nk
    groups = sizes.numel()
    a = torch.randn(rows, k).to(dtype)
    b = (torch.randn(groups, n, k) if transpose_b else torch.randn(groups, k, n)).to(dtype)
    out = ops.gemm_grouped_gemm_fwd(a, b, sizes, offsets, None, transpose_b=transpose_b)
    assert out.shape == (rows, n) and out.dtype == dtype
    want, terms = float64_runs(a, b, sizes, offsets, transpose_b)
    assert within_one_rounding(out, want, terms, dtype)
    covered = torch.zeros(rows, dtype=torch.bool)
    for s, o in zip(sizes.tolist(), offsets.tolist()):
        covered[o:o + s] = s > 0
    assert out[~covered].eq(0).all()


def test_grouped_gemm_does_not_read_the_padded_offsets_and_the_class_may_leave_them_out():
    sizes, offsets = i32(2, 3), i32(0, 2)
    a, b = torch.randn(5, 16).half(), torch.randn(2, 8, 16).half()
    op = GroupedGemmFwdOp()
    without = op(a, b, sizes, offsets)
    with_garbage = op(a, b, sizes, offsets, i32(-7, 1 << 20))
    assert torch.equal(without, with_garbage)


def test_grouped_gemm_of_no_groups_is_zeros():
    out = ops.gemm_grouped_gemm_fwd(torch.randn(3, 4).half(), torch.empty(0, 6, 4).half(), i32(), i32(), None)
    assert out.shape == (3, 6) and out.eq(0).all()


A6, B2 = torch.randn(6, 8).half(), torch.randn(2, 4, 8).half()


@pytest.mark.parametrize("args,kwargs,err,match", [
    ((A6, B2, i32(2, 4), i32(0, 4), None), {}, ValueError, r"group 1's rows \[4, 8\) .*inside a's 6 rows"),
    ((A6, B2, i32(3, 2), i32(0, 2), None), {}, ValueError, r"groups 0 and 1 share row 2 .*must not overlap"),
    ((A6, B2, i32(-1, 2), i32(0, 2), None), {}, ValueError, r"'batch_sizes' must be non-negative, got -1 for group 0"),
    ((A6, B2, i32(2, 2), i32(0, 2), None), {"transpose_a": True}, ValueError, r"'not transpose_a'.*transpose_a"),
    ((A6, B2, i32(2, 2), i32(0, 2), None), {"transpose_b": False}, ValueError,
     r"select\(transpose_b, b2, b1\) == K.*transpose_b"),
    ((A6, B2, i32(2, 2, 2), i32(0, 2, 4), None), {}, RuntimeError, r"'batch_sizes' must have shape \[G\]"),
    ((A6, B2, i32(2, 2), i32(0, 2), i32(0)), {}, RuntimeError, r"'batch_padded_offsets' must have shape \[G\]"),
    ((A6, B2, torch.tensor([2, 2]), i32(0, 2), None), {}, TypeError, r"'batch_sizes' must have dtype int32"),
    ((A6, B2.bfloat16(), i32(2, 2), i32(0, 2), None), {}, TypeError,
     r"'b' must have the dtype of 'a' \(same_as\(a\) = float16\), got bfloat16"),
    ((A6.float(), B2.float(), i32(2, 2), i32(0, 2), None), {}, TypeError, r"'a' must have dtype"),
])
def test_grouped_gemm_refusals_name_the_op_and_the_argument(args, kwargs, err, match):
    with pytest.raises(err, match=rf"tileops::gemm_grouped_gemm_fwd: .*{match}"):
        ops.gemm_grouped_gemm_fwd(*args, **kwargs)


# --- GemmW4A16FwdOp ----------------------------------------------------------------------------------

def pack(q):
    """uint8 [N, K / 2] of 4-bit values q [N, K]: even k in the low nibble, odd k in the high one."""
    q = q.to(torch.uint8)
    return (q[:, 0::2] | (q[:, 1::2] << 4)).contiguous()


def w4_inputs(m, n, k, group, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    groups = k // group
    q = torch.randint(0, 16, (n, k), generator=g)
    zero = torch.randint(0, 16, (n, groups), generator=g).to(torch.uint8)
    scale = torch.rand(n, groups, generator=g) * 0.1 + 0.01
    x = torch.randn(m, k, generator=g).to(dtype)
    return x, q, pack(q), scale, zero


def float64_w4(x, q, scale, zero, group, dtype):
    """w = (q - zero) * scale, the scale rounded to the activation's dtype first and the product rounded
    to it once; then x @ w.T in float64."""
    per_k = lambda t: t.repeat_interleave(group, 1)  # noqa: E731
    w = ((q.float() - per_k(zero).float()) * per_k(scale.to(dtype).float())).to(dtype).double()
    return x.double() @ w.T, x.double().abs() @ w.abs().T


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mnkg", [(1, 8, 256, 128), (3, 8, 96, 32), (5, 7, 200, 40), (2, 16, 128, 128),
                                  (4, 3, 6, 2), (5, 7, 0, 128)])
def test_w4a16_matches_float64(dtype, mnkg):
    m, n, k, group = mnkg
    x, q, packed, scale, zero = w4_inputs(m, n, k, group, dtype)
    out = ops.gemm_w4_a16_fwd(x, packed, scale, zero, group_size=group)
    assert out.shape == (m, n) and out.dtype == dtype
    want, terms = float64_w4(x, q, scale, zero, group, dtype)
    assert within_one_rounding(out, want, terms, dtype)


def test_w4a16_nibble_order_and_zero_point():
    # byte 0x21: k = 0 is the low nibble (1), k = 1 the high one (2); zero 0, scale 1
    packed, scale = torch.tensor([[0x21]], dtype=torch.uint8), torch.ones(1, 1)
    zero = torch.zeros(1, 1, dtype=torch.uint8)
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0]]).half()
    out = GemmW4A16FwdOp(group_size=2)(x, packed, scale, zero)
    assert out.flatten().tolist() == [1.0, 2.0]
    # unsigned values with zero point 8: 0x0F holds 15 (k = 0) and 0 (k = 1), i.e. +7 and -8 times the scale
    out = GemmW4A16FwdOp(group_size=2)(x, torch.tensor([[0x0F]], dtype=torch.uint8), torch.full((1, 1), 0.5),
                                       torch.full((1, 1), 8, dtype=torch.uint8))
    assert out.flatten().tolist() == [3.5, -4.0]


def test_w4a16_rounds_the_scale_to_the_activation_dtype_first():
    # scale 1 + 2^-11 + 2^-20 is float16's 1 + 2^-10; times q = 3 that is 3 + 1.5 * 2^-9, a tie that
    # float16 rounds to 3 + 2^-8 (the float32 scale would give 3 + 2^-9)
    scale = torch.tensor([[1 + 2.0 ** -11 + 2.0 ** -20]])
    out = GemmW4A16FwdOp(group_size=2)(torch.tensor([[1.0, 0.0]]).half(), torch.tensor([[0x03]], dtype=torch.uint8),
                                       scale, torch.zeros(1, 1, dtype=torch.uint8))
    assert out.item() == 3 + 2.0 ** -8


def test_w4a16_default_group_is_128():
    x, q, packed, scale, zero = w4_inputs(2, 4, 256, 128, torch.float16)
    assert torch.equal(GemmW4A16FwdOp()(x, packed, scale, zero), ops.gemm_w4_a16_fwd(x, packed, scale, zero))


X, Q, P, S, Z = w4_inputs(2, 4, 256, 128, torch.float16)


@pytest.mark.parametrize("args,kwargs,err,match", [
    ((torch.randn(2, 7).half(), P[:, :3], S[:, :1], Z[:, :1]), {"group_size": 7}, ValueError,
     r"shape rule 'K == 2 \* KH' is violated .* with K=7, KH=3"),
    ((X, P, S, Z), {"group_size": 96}, ValueError,
     r"shape rule 'K % group_size == 0' is violated .* with group_size=96, K=256"),
    ((X, P, S[:, :1], Z[:, :1]), {}, ValueError,
     r"shape rule 'G == K // group_size' is violated .* with group_size=128, G=1, K=256"),
    ((X, P, S, Z), {"group_size": 0}, ValueError, r"'group_size > 0'"),
    ((X, P[:3], S, Z), {}, RuntimeError, r"'weight_scale' must have shape \[N, G\]"),
    ((X, P, S, Z[:, :1]), {}, RuntimeError, r"'weight_zero' must have shape \[N, G\]"),
    ((X, P.to(torch.int8), S, Z), {}, TypeError, r"'packed_weight' must have dtype uint8"),
    ((X, P, S.half(), Z), {}, TypeError, r"'weight_scale' must have dtype float32"),
    ((X, P, S, Z.to(torch.int32)), {}, TypeError, r"'weight_zero' must have dtype uint8"),
    ((X.float(), P, S, Z), {}, TypeError, r"'activation' must have dtype"),
])
def test_w4a16_refusals_name_the_op_the_argument_and_the_rule(args, kwargs, err, match):
    with pytest.raises(err, match=rf"tileops::gemm_w4_a16_fwd: .*{match}"):
        ops.gemm_w4_a16_fwd(*args, **kwargs)
