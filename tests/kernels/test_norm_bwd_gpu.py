"""RMSNormBwdOp / LayerNormBwdOp on the GPU (nvrtc target): every branch against torch.autograd.grad
of F.rms_norm / F.layer_norm in float64, weight absent, M = 0, non-contiguous and misaligned inputs,
outputs on poisoned memory, bitwise determinism of dweight/dbias, CUDA graph replay and torch.compile.
Skipped without a GPU (conftest)."""
import pytest
import torch
import torch._dynamo

import tileops
from support.reference import TOL, assert_close_rel
from tileops.norm import LayerNormBwdOp, RMSNormBwdOp
from support.graphs import GraphRecorder

pytestmark = pytest.mark.gpu
F = torch.nn.functional
EPS32 = torch.finfo(torch.float32).eps
RMS = torch.ops.tileops.norm_rms_norm_bwd
RMS_DX = torch.ops.tileops.norm_rms_norm_bwd_without_dweight
LN = torch.ops.tileops.norm_layer_norm_bwd
LN_NO_DB = torch.ops.tileops.norm_layer_norm_bwd_without_dbias
LN_NO_DW = torch.ops.tileops.norm_layer_norm_bwd_without_dweight
LN_DX = torch.ops.tileops.norm_layer_norm_bwd_without_dbias_without_dweight
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
# (M, N): every pair of these row counts and row lengths, without the pairs whose float64 reference would not fit comfortably
# (M * N <= 2^25), plus many rows of the streaming row lengths.
SHAPES = [(m, n) for n in (64, 1000, 4096, 8192, 65536, 262144) for m in (0, 1, 7, 2048) if m * n <= 2 ** 25]
SHAPES += [(300, 65536), (64, 262144)]


def rms_ref(dy, x, w, shape, eps=None):
    """(dx, dweight) of F.rms_norm in float64, rounded to x's dtype; w=None is a weight of ones."""
    xd = x.detach().double().requires_grad_()
    wd = torch.ones(shape, dtype=torch.float64, device=x.device) if w is None else w.detach().double()
    wd.requires_grad_()
    if x.numel() == 0:
        return torch.zeros_like(x), torch.zeros(shape, dtype=x.dtype, device=x.device)
    y = F.rms_norm(xd, shape, wd, EPS32 if eps is None else eps)
    dx, dw = torch.autograd.grad(y, (xd, wd), dy.double())
    return dx.to(x.dtype), dw.to(x.dtype)


def ln_ref(dy, x, w, shape, eps=1e-5):
    """(dx, dweight, dbias) of F.layer_norm in float64, rounded to x's dtype."""
    xd = x.detach().double().requires_grad_()
    wd = torch.ones(shape, dtype=torch.float64, device=x.device) if w is None else w.detach().double()
    wd.requires_grad_()
    bd = torch.zeros(shape, dtype=torch.float64, device=x.device, requires_grad=True)
    if x.numel() == 0:
        z = torch.zeros(shape, dtype=x.dtype, device=x.device)
        return torch.zeros_like(x), z, z.clone()
    y = F.layer_norm(xd, shape, wd, bd, eps)
    dx, dw, db = torch.autograd.grad(y, (xd, wd, bd), dy.double())
    return dx.to(x.dtype), dw.to(x.dtype), db.to(x.dtype)


def check_dx(got, ref):
    assert got.is_contiguous()
    assert_close_rel(got, ref)


def check_sum(got, ref):
    """dweight/dbias: sums over many rows, compared by relative norm; elementwise only against the
    largest magnitude (a column that sums to ~0 has no meaningful relative error)."""
    assert got.shape == ref.shape and got.dtype == ref.dtype and got.is_contiguous()
    assert torch.isfinite(got).all(), "non-finite gradient"
    if ref.abs().max() == 0:
        assert torch.equal(got, ref)
        return
    g, r = got.double(), ref.double()
    err = (g - r).norm() / r.norm()
    assert err < TOL[got.dtype], f"relative error {err:.3g} over {TOL[got.dtype]}"
    assert (g - r).abs().max() <= 4 * TOL[got.dtype] * r.abs().max()


def check_layer_norm_all_gradients(dy, x, w, n):
    """LayerNormBwdOp (dx, dweight, dbias) on poisoned outputs against the float64 reference, which
    it returns."""
    ref_dx, ref_dw, ref_db = ln_ref(dy, x, w, [n])
    poison()
    dx, dw, db = LN(dy, x, w, [n])
    check_dx(dx, ref_dx)
    check_sum(dw, ref_dw)
    check_sum(db, ref_db)
    return ref_dx, ref_dw, ref_db


def inputs(m, n, dtype, weight=True, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = (torch.randn(m, n, device="cuda", generator=g) * 2 + 0.5).to(dtype)
    dy = torch.randn(m, n, device="cuda", generator=g).to(dtype)
    w = (torch.randn(n, device="cuda", generator=g) + 1).to(dtype) if weight else None
    return dy, x, w


def poison(nbytes=256 << 20):
    """Leaves NaN in freed allocator blocks (large and small pools), so that the outputs and the
    workspace allocated next start as NaN."""
    big = torch.full((nbytes // 4,), float("nan"), device="cuda")
    small = [torch.full((k,), float("nan"), device="cuda") for k in (64, 512, 2048, 8192, 65536, 200000) * 4]
    del big, small
    torch.cuda.synchronize()


# ---- RMSNormBwdOp --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m,n", SHAPES, ids=[f"{m}x{n}" for m, n in SHAPES])
@pytest.mark.parametrize("weight", [True, False], ids=["w", "nw"])
def test_rms_matches_float64_every_branch(m, n, dtype, weight):
    dy, x, w = inputs(m, n, dtype, weight)
    ref_dx, ref_dw = rms_ref(dy, x, w, [n])
    poison()
    dx, dw = RMS(dy, x, w, [n])
    check_dx(dx, ref_dx)
    check_sum(dw, ref_dw)
    poison()
    check_dx(RMS_DX(dy, x, w, [n]), ref_dx)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rms_zero_rows_give_zero_dweight(dtype):
    dy, x, w = inputs(0, 4096, dtype)
    poison()
    dx, dw = RMS(dy, x, w, [4096])
    assert dx.shape == (0, 4096)
    assert torch.equal(dw, torch.zeros(4096, device="cuda", dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rms_non_contiguous_and_misaligned_inputs(dtype):
    n = 256
    base = torch.randn(512, 300, device="cuda", dtype=dtype)
    dbase = torch.randn(512, 300, device="cuda", dtype=dtype)
    x, dy = base[:, 1:n + 1], dbase[:, 3:n + 3]  # strided rows starting off 16-byte alignment
    w = torch.randn(2 * n, device="cuda", dtype=dtype)[::2]  # strided weight
    assert not x.is_contiguous() and not w.is_contiguous()
    dx, dw = RMS(dy, x, w, [n])
    ref_dx, ref_dw = rms_ref(dy, x, w, [n])
    check_dx(dx, ref_dx)
    check_sum(dw, ref_dw)
    # Contiguous tensors whose storage starts off a 16-byte boundary: the narrow-access kernels.
    for off in (1, 2, 4):
        flat_x = torch.randn(off + 64 * n, device="cuda", dtype=dtype)[off:].view(64, n)
        flat_dy = torch.randn(off + 64 * n, device="cuda", dtype=dtype)[off:].view(64, n)
        dx, dw = RMS(flat_dy, flat_x, w, [n])
        ref_dx, ref_dw = rms_ref(flat_dy, flat_x, w, [n])
        check_dx(dx, ref_dx)
        check_sum(dw, ref_dw)
    xt = torch.randn(n, 128, device="cuda", dtype=dtype).t()  # (128, n), strides (1, 128)
    dyt = torch.randn(128, n, device="cuda", dtype=dtype)
    dx, dw = RMS(dyt, xt, None, [n])
    ref_dx, ref_dw = rms_ref(dyt, xt, None, [n])
    check_dx(dx, ref_dx)
    check_sum(dw, ref_dw)


def test_rms_eps_multi_dim_shape_and_leading_dims():
    dy = torch.randn(3, 5, 7, 33, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(3, 5, 7, 33, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(7, 33, device="cuda", dtype=torch.bfloat16)
    dx, dw = RMS(dy, x, w, [7, 33], 1e-2)
    ref_dx, ref_dw = rms_ref(dy, x, w, [7, 33], 1e-2)
    assert dw.shape == (7, 33)
    check_dx(dx, ref_dx)
    check_sum(dw, ref_dw)
    # eps=None is finfo(float32).eps, as F.rms_norm: tiny rows show the difference.
    tiny = torch.full((4, 64), 1e-4, device="cuda", dtype=torch.float32)
    g = torch.randn(4, 64, device="cuda")
    dx, dw = RMS(g, tiny, None, [64])
    ref_dx, ref_dw = rms_ref(g, tiny, None, [64])
    check_dx(dx, ref_dx)
    check_sum(dw, ref_dw)


F32W_SHAPES = [(m, n) for n in (64, 1000, 4096, 8192, 65536) for m in (1, 7, 2048) if m * n <= 2 ** 25]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("m,n", F32W_SHAPES, ids=[f"{m}x{n}" for m, n in F32W_SHAPES])
def test_float32_weight_gives_float32_weight_grads(m, n, dtype):
    dy, x, _ = inputs(m, n, dtype, False)
    w = torch.randn(n, device="cuda") + 1  # float32: values x's dtype cannot hold
    xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
    bd = torch.zeros(n, dtype=torch.float64, device="cuda", requires_grad=True)
    r_dx, r_dw = torch.autograd.grad(F.rms_norm(xd, [n], wd, EPS32), (xd, wd), dy.double())
    poison()
    dx, dw = RMS(dy, x, w, [n])
    check_dx(dx, r_dx.to(dtype))
    check_sum(dw, r_dw.float())
    poison()
    check_dx(RMS_DX(dy, x, w, [n]), r_dx.to(dtype))
    xc = (x.float() + 3).to(dtype)
    xd = xc.double().requires_grad_()
    l_dx, l_dw, l_db = torch.autograd.grad(F.layer_norm(xd, [n], wd, bd, 1e-5), (xd, wd, bd), dy.double())
    poison()
    dx, dw, db = LN(dy, xc, w, [n])
    check_dx(dx, l_dx.to(dtype))
    check_sum(dw, l_dw.float())
    check_sum(db, l_db.float())
    poison()
    dx, db = LN_NO_DW(dy, xc, w, [n])
    check_dx(dx, l_dx.to(dtype))
    check_sum(db, l_db.float())


# ---- LayerNormBwdOp ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m,n", SHAPES, ids=[f"{m}x{n}" for m, n in SHAPES])
@pytest.mark.parametrize("weight", [True, False], ids=["w", "nw"])
def test_layer_norm_matches_float64_every_branch(m, n, dtype, weight):
    dy, x, w = inputs(m, n, dtype, weight)
    x = (x.float() + 3).to(dtype)  # a non-zero mean exercises the centring
    ref_dx, ref_dw, ref_db = check_layer_norm_all_gradients(dy, x, w, n)
    poison()
    dx, dw = LN_NO_DB(dy, x, w, [n])
    check_dx(dx, ref_dx)
    check_sum(dw, ref_dw)
    poison()
    dx, db = LN_NO_DW(dy, x, w, [n])
    check_dx(dx, ref_dx)
    check_sum(db, ref_db)
    poison()
    check_dx(LN_DX(dy, x, w, [n]), ref_dx)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_layer_norm_zero_rows_give_zero_dweight_and_dbias(dtype):
    dy, x, w = inputs(0, 1000, dtype)
    zeros = torch.zeros(1000, device="cuda", dtype=dtype)
    poison()
    dx, dw, db = LN(dy, x, w, [1000])
    assert dx.shape == (0, 1000) and torch.equal(dw, zeros) and torch.equal(db, zeros)
    poison()
    _, db = LN_NO_DW(dy, x, w, [1000])
    assert torch.equal(db, zeros)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_layer_norm_non_contiguous_misaligned_and_eps(dtype):
    n = 512
    x = torch.randn(300, 2 * n, device="cuda", dtype=dtype)[:, ::2]
    dy = torch.randn(300, n + 1, device="cuda", dtype=dtype)[:, 1:]
    w = torch.randn(n + 1, device="cuda", dtype=dtype)[1:]
    assert not x.is_contiguous() and w.data_ptr() % 16 != 0
    dx, dw, db = LN(dy, x, w, [n], 1e-3)
    ref_dx, ref_dw, ref_db = ln_ref(dy, x, w, [n], 1e-3)
    check_dx(dx, ref_dx)
    check_sum(dw, ref_dw)
    check_sum(db, ref_db)
    dy = torch.randn(2, 3, 4095, device="cuda", dtype=dtype)  # odd rows: one element per access
    x = torch.randn(2, 3, 4095, device="cuda", dtype=dtype)
    dx, dw, db = LN(dy, x, None, [4095])
    ref_dx, ref_dw, ref_db = ln_ref(dy, x, None, [4095])
    check_dx(dx, ref_dx)
    check_sum(dw, ref_dw)
    check_sum(db, ref_db)

# N = 4096: every thread the same count (the merge's fixed-halves path); 1000 and 4095: unequal
# counts; 65536: statistics merged across the warps of a wide group; 262144: workspace partials.
@pytest.mark.parametrize("n", [4096, 1000, 4095, 65536, 262144])
def test_layer_norm_mean_far_from_zero_is_as_precise_as_torch_float32(n):
    """Rows of mean ~30 and std ~0.1 in float32. The float32 mean itself is off by up to half an ulp
    of 30 (~1e-6), which shifts every normalised element by ~1e-5 of the std: no float32 kernel beats
    that, torch's own included (its dweight error on these rows is ~1.5e-5 on CPU). So each gradient
    is held to max(float32 tolerance, 3x torch's float32 error on the same inputs and device). A
    one-pass E[x^2] - mean^2 variance is off by ~2e-2 here and fails by three orders of magnitude."""
    dy, x, w = inputs(64, n, torch.float32)
    x = x * 0.05 + 30
    refs = ln_ref(dy, x, w, [n])
    torch_grads = torch_layer_norm_float32_grads(dy, x, w, n)
    poison()
    ours = LN(dy, x, w, [n])
    for name, got, ref, theirs in zip(("dx", "dweight", "dbias"), ours, refs, torch_grads):
        assert got.shape == ref.shape and got.dtype == ref.dtype and torch.isfinite(got).all()
        err, torch_err = rel_err(got, ref), rel_err(theirs, ref)
        bound = max(TOL[torch.float32], 3 * torch_err)
        assert err < bound, f"{name}: relative error {err:.3g}, torch float32 {torch_err:.3g}, bound {bound:.3g}"
        worst, torch_worst = (got - ref).abs().max().item(), (theirs - ref).abs().max().item()
        assert worst <= max(4 * TOL[torch.float32] * ref.abs().max().item(), 3 * torch_worst), name


def torch_layer_norm_float32_grads(dy, x, w, n):
    xf = x.detach().clone().requires_grad_()
    wf = w.detach().clone().requires_grad_()
    bf = torch.zeros_like(wf, requires_grad=True)
    y = F.layer_norm(xf, [n], wf, bf, 1e-5)
    return torch.autograd.grad(y, (xf, wf, bf), dy)


def rel_err(got, ref):
    return ((got.double() - ref.double()).norm() / ref.double().norm()).item()


# ---- Both: determinism, CUDA graphs, torch.compile, build keys ----------------------------------

@pytest.mark.parametrize("m,n", [(16384, 4096), (2048, 1000), (7, 8192), (64, 65536)])
def test_weight_gradients_are_bitwise_equal_run_to_run(m, n):
    dy, x, w = inputs(m, n, torch.bfloat16)
    first = RMS(dy, x, w, [n]), LN(dy, x, w, [n])
    torch.randn(4096, 4096, device="cuda").sum()  # other work in between
    for _ in range(2):
        again = RMS(dy, x, w, [n]), LN(dy, x, w, [n])
        for a, b in zip(first[0] + first[1], again[0] + again[1]):
            assert torch.equal(a, b)
    # The summation order depends on the device and the row count only: a side stream agrees too.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        other = RMS(dy, x, w, [n]), LN(dy, x, w, [n])
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    for a, b in zip(first[0] + first[1], other[0] + other[1]):
        assert torch.equal(a, b)


def test_cuda_graph_after_warm_up_replays_correctly():
    m, n = 512, 4096
    dy, x, w = inputs(m, n, torch.bfloat16)
    RMS(dy, x, w, [n])
    LN(dy, x, w, [n])  # warm-up: builds the kernels outside capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        rdx, rdw = RMS(dy, x, w, [n])
        ldx, ldw, ldb = LN(dy, x, w, [n])
    for seed in range(3):
        ndy, nx, _ = inputs(m, n, torch.bfloat16, seed=seed + 1)
        dy.copy_(ndy)
        x.copy_(nx)
        g.replay()
        torch.cuda.synchronize()
        ref_dx, ref_dw = rms_ref(dy, x, w, [n])
        check_dx(rdx, ref_dx)
        check_sum(rdw, ref_dw)
        ref_dx, ref_dw, ref_db = ln_ref(dy, x, w, [n])
        check_dx(ldx, ref_dx)
        check_sum(ldw, ref_dw)
        check_sum(ldb, ref_db)
        # Replays are bitwise the eager result.
        assert torch.equal(rdw, RMS(dy, x, w, [n])[1]) and torch.equal(ldw, LN(dy, x, w, [n])[1])


def test_capture_that_needs_a_build_is_a_clear_error(counters):
    dy, x, w = inputs(4, 1234, torch.float16)  # never built before
    tileops.clear_kernel_caches()
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match=r"current stream is being captured.*Warm up first"):
        with torch.cuda.graph(g):
            RMS(dy, x, w, [1234])
    assert counters()["kernel_builds"] == 0
    torch.cuda.synchronize()
    ref_dx, ref_dw = rms_ref(dy, x, w, [1234])
    dx, dw = RMS(dy, x, w, [1234])
    check_dx(dx, ref_dx)
    check_sum(dw, ref_dw)


def test_build_once_then_hit_and_keyed_by_identity(counters):
    tileops.clear_kernel_caches()
    dy, x, w = inputs(4, 3072, torch.float16)
    RMS(dy, x, w, [3072])
    assert counters()["kernel_builds"] == 1
    dy, x, w = inputs(9, 3072, torch.float16)
    RMS(dy, x, w, [3072])  # other M: same kernel
    assert counters()["kernel_builds"] == 1 and counters()["kernel_hits"] == 1
    RMS_DX(dy, x, w, [3072])  # other branch: other identity
    RMS(dy, x, None, [3072])  # no weight: other identity
    assert counters()["kernel_builds"] == 3


@pytest.mark.parametrize("cls,op,n_out", [(RMSNormBwdOp, RMS, 2), (LayerNormBwdOp, LN, 3)], ids=["rms", "ln"])
def test_cold_compile_one_node_no_recompile_dynamic_batch(cls, op, n_out, counters):
    torch._dynamo.reset()
    tileops.clear_kernel_caches()
    rec = GraphRecorder(inductor=True)

    mod = cls((4096,))
    fn = torch.compile(lambda dy, x, w: mod(dy, x, w), fullgraph=True, dynamic=True, backend=rec)
    for m in (2048, 17, 300):
        dy, x, w = inputs(m, 4096, torch.bfloat16, seed=m)
        got = fn(dy, x, w)
        ref = rms_ref(dy, x, w, [4096]) if op is RMS else ln_ref(dy, x, w, [4096])
        assert len(got) == n_out
        check_dx(got[0], ref[0])
        for a, b in zip(got[1:], ref[1:]):
            check_sum(a, b)
        assert all(torch.equal(a, b) for a, b in zip(got, op(dy, x, w, [4096])))  # compiled == eager
    assert len(rec.graphs) == 1
    assert rec.calls() == [op.default]  # and the getitems of its outputs
    assert counters()["kernel_builds"] == 1




def _dependent_reduce_child(out_path):
    """Runs in a child process (the launch mode is read once a process): backward calls eagerly and
    in CUDA graph replays, their results saved to out_path."""
    tileops.load()
    res = {}
    for m, n in [(2048, 4096), (16384, 4096), (7, 1000), (300, 65536), (0, 4096)]:
        dy, x, w = inputs(m, n, torch.bfloat16, seed=m + n)
        res[f"rms{m}x{n}"] = [t.cpu() for t in RMS(dy, x, w, [n])]
        res[f"ln{m}x{n}"] = [t.cpu() for t in LN(dy, x, w, [n])]
    # 20 calls in one graph, back to back, RMSNorm and LayerNorm alternating, then a call of no rows
    # (its reduction is a plain launch): a reduction that read partial rows before its main kernel
    # finished would make the replayed calls differ.
    dy, x, w = inputs(2048, 4096, torch.bfloat16, seed=1)
    dy0, x0, _ = inputs(0, 4096, torch.bfloat16)
    res["eager"] = [[t.cpu() for t in RMS(dy, x, w, [4096])], [t.cpu() for t in LN(dy, x, w, [4096])]]
    RMS(dy0, x0, w, [4096])
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outs = [LN(dy, x, w, [4096]) if i % 2 else RMS(dy, x, w, [4096]) for i in range(20)]
        empty = RMS(dy0, x0, w, [4096])
    empty[1].fill_(float("nan"))
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    res["graph"] = [[t.cpu() for t in o] for o in outs]
    res["graph_no_rows"] = [t.cpu() for t in empty]
    torch.save(res, out_path)
    print("dependent reduce child ok")


def _driver_version():
    """cuDriverGetVersion (e.g. 13000 for CUDA 13.0), 0 where libcuda cannot be loaded."""
    import ctypes
    try:
        v = ctypes.c_int()
        return v.value if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v)) == 0 else 0
    except OSError:
        return 0


def test_dependent_launch_of_the_reduction_equals_the_plain_launch_bitwise():
    """sm_90+ with a CUDA 12.3+ driver: norm_bwd_reduce is a programmatic dependent launch (it may
    start before the main kernel ends and waits for it, grid_dependency.cuh); TILEOPS_TUNE=norm_bwd_plain_reduce=1
    launches it plainly. Both give bitwise the same gradients, eagerly and in graph replays, and
    those match float64: a reduction that read the partial rows early would differ. What this cannot
    show is that the launches overlapped (the bits are the same either way); the build's debug log
    says which launch the host chose."""
    import os
    import subprocess
    import sys
    import tempfile

    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    dependent = torch.cuda.get_device_capability()[0] >= 9 and _driver_version() >= 12030
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for pdl in ("1", "0"):
            out = os.path.join(tmp, f"pdl{pdl}.pt")
            # The kernels' cache (TILEOPS_CACHE_DIR, if set) is shared: their sources do not depend on
            # the launch mode.
            env = dict(os.environ, TILEOPS_TUNE="" if pdl == "1" else "norm_bwd_plain_reduce=1", TILEOPS_LOG_LEVEL="debug",
                       PYTHONPATH=os.pathsep.join([os.path.join(root, "python"), os.path.join(root, "tests")]))
            code = (f"import sys; sys.path.insert(0, {here!r}); import test_norm_bwd_gpu as t; "
                    f"t._dependent_reduce_child({out!r})")
            run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
            log = run.stdout + run.stderr
            assert run.returncode == 0 and "dependent reduce child ok" in run.stdout, log[-4000:]
            modes = [line for line in log.splitlines() if "norm_bwd_reduce__" in line and " launch" in line]
            want = "is a programmatic dependent launch" if pdl == "1" and dependent else "is a plain launch"
            assert modes and all(want in line for line in modes), (want, modes, log[-2000:])
            runs[pdl] = torch.load(out)

    def flat(res):
        return [(k, i, t) for k, v in res.items() for i, t in enumerate(
            [u for item in v for u in (item if isinstance(item, list) else [item])])]
    a, b = flat(runs["1"]), flat(runs["0"])
    assert [(k, i) for k, i, _ in a] == [(k, i) for k, i, _ in b]
    for (key, i, ta), (_, _, tb) in zip(a, b):
        assert torch.equal(ta, tb), (key, i)
    for res in runs.values():
        for i, call in enumerate(res["graph"]):
            for got, want in zip(call, res["eager"][i % 2]):
                assert torch.equal(got, want), i
        assert torch.equal(res["graph_no_rows"][1], torch.zeros(4096, dtype=torch.bfloat16))
    dy, x, w = inputs(2048, 4096, torch.bfloat16, seed=1)
    dx, dw = rms_ref(dy, x, w, [4096])
    check_dx(runs["1"]["eager"][0][0].cuda(), dx)
    check_sum(runs["1"]["eager"][0][1].cuda(), dw)
