"""GroupNormFwdOp and InstanceNormFwdOp on the GPU (nvrtc target): every plan (short rows several a
CTA, rows in registers, rows streamed twice, long rows split over CTAs, running stats) against a
float64 reference rounded to x's dtype (tests/support/reference.py: relative error under TOL, each
element within 4 * TOL) and against torch's CUDA kernels (float32 accumulation on both sides:
rtol = atol = 4 * TOL); odd, misaligned, non-contiguous and empty x; CUDA graphs. Skipped without a
GPU (conftest). The plans each shape takes on an H200 are pinned by tests/kernels/test_group_norm_nvrtc.cpp;
test_every_plan_runs checks them on the GPU at hand from the build log."""
import os
import subprocess
import sys

import pytest
import torch

import tileops
from support.reference import TOL, assert_close_rel

# Loaded here, not only by conftest: test_every_plan_runs imports this module in a child process,
# where nothing else loads the library before GN and IN are looked up below.
tileops.load()
pytestmark = pytest.mark.gpu
GN = torch.ops.tileops.norm_group_norm_fwd
IN = torch.ops.tileops.norm_instance_norm_fwd
F = torch.nn.functional
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def channel_view(t, x):
    return t.double().view([1, x.shape[1]] + [1] * (x.dim() - 2))


def gn_ref(x, groups, w=None, b=None, eps=1e-5):
    """F.group_norm in float64 from the same inputs, rounded to x's dtype."""
    xd = x.double().reshape(x.shape[0], groups, -1)
    mean = xd.mean(-1, keepdim=True)
    var = xd.var(-1, unbiased=False, keepdim=True)
    y = ((xd - mean) / torch.sqrt(var + eps)).reshape(x.shape)
    if w is not None:
        y = y * channel_view(w, x)
    if b is not None:
        y = y + channel_view(b, x)
    return y.to(x.dtype)


def running_ref(x, rm, rv, w=None, b=None, eps=1e-5):
    """F.instance_norm(use_input_stats=False) in float64, rounded to x's dtype."""
    y = (x.double() - channel_view(rm, x)) / torch.sqrt(channel_view(rv, x) + eps)
    if w is not None:
        y = y * channel_view(w, x)
    if b is not None:
        y = y + channel_view(b, x)
    return y.to(x.dtype)


def close_to_torch(y, ref):
    tol = 4 * TOL[y.dtype]
    torch.testing.assert_close(y.float(), ref.float(), rtol=tol, atol=tol)


def affine(c, dtype, weight, bias):
    w = torch.randn(c, device="cuda", dtype=dtype) if weight else None
    b = torch.randn(c, device="cuda", dtype=dtype) if bias else None
    return w, b


# (shape, groups): on an H200 (132 SMs), with 16-bit x unless noted
PLANS = {
    "tiny-rows-2d": ((5, 32), 32),                 # rows of 1 element, 256 rows a CTA
    "short-rows-odd": ((3, 6, 5), 3),              # rows of 10, scalar accesses, CTA mostly empty
    "short-rows-warp": ((16, 64, 8, 8), 64),       # rows of 64, 2 threads a row, 16-byte accesses
    "image-g32": ((8, 128, 32, 32), 32),           # rows of 4096 in registers, 128 threads a row
    "tail-spatial-g16": ((4, 128, 30, 30), 16),    # rows of 7200, 8-byte accesses (900 = 4 * 225)
    "registers-512": ((2, 32, 64, 64), 4),         # rows of 32768: 512 threads, 8 vectors each
    "registers-1024": ((2, 32, 64, 128), 4),       # rows of 65536: 1024 threads, 8 vectors each
    "streamed": ((12, 128, 130, 130), 32),         # 384 rows of 67600: read twice
    "split": ((2, 64, 256, 256), 8),               # 16 rows of 524288: split over CTAs
    "split-odd": ((3, 4, 255, 257), 2),            # 6 rows of 131070, scalar accesses, uneven chunks
    "split-5d": ((1, 12, 16, 64, 64), 3),          # 3 rows of 262144
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("plan", sorted(PLANS))
@pytest.mark.parametrize("weight,bias", [(True, True), (False, False), (True, False), (False, True)],
                         ids=["wb", "nw_nb", "w_nb", "nw_b"])
def test_group_norm_matches_float64_and_torch(plan, dtype, weight, bias):
    shape, groups = PLANS[plan]
    torch.manual_seed(0)
    x = torch.randn(shape, device="cuda", dtype=dtype) * 2 + 0.5
    w, b = affine(shape[1], dtype, weight, bias)
    y = GN(x, w, b, groups)
    assert y.shape == x.shape and y.dtype == dtype and y.is_contiguous()
    assert_close_rel(y, gn_ref(x, groups, w, b))
    close_to_torch(y, F.group_norm(x, groups, w, b))


@pytest.mark.parametrize("plan", ["image-g32", "registers-1024", "streamed", "split"])
def test_large_mean_is_stable(plan):
    """float32 rows far from zero (mean 300, std 1): the statistics are exact two passes or Chan merges;
    E[x^2] - E[x]^2 in float32 would be off by about 1e-2 here. The bound is the float32 rounding of
    a mean of 300 (1.5e-5), a few times over."""
    shape, groups = PLANS[plan]
    x = torch.randn(shape, device="cuda") + 300.0
    y = GN(x, None, None, groups)
    assert (y.double() - gn_ref(x, groups).double()).abs().max().item() < 2e-4


def test_few_rows_of_millions_split_over_ctas():
    """TileOPs' large-spatial shape: 128 groups of 4M elements."""
    x = torch.randn(4, 128, 1024, 1024, device="cuda", dtype=torch.float16)
    w, b = affine(128, torch.float16, True, True)
    y = GN(x, w, b, 32)
    assert_close_rel(y, gn_ref(x, 32, w, b))
    close_to_torch(y, F.group_norm(x, 32, w, b))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_misaligned_non_contiguous_and_empty_x(dtype):
    w, b = affine(8, dtype, True, True)
    # Contiguous, starting one element past a 16-byte boundary: the scalar kernel.
    flat = torch.randn(1 + 4 * 8 * 48, device="cuda", dtype=dtype)[1:].view(4, 8, 48)
    assert flat.is_contiguous() and flat.data_ptr() % 16 != 0
    assert_close_rel(GN(flat, w, b, 4), gn_ref(flat, 4, w, b))
    # channels_last and a strided slice: the boundary makes them contiguous first.
    cl = torch.randn(2, 8, 6, 10, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    assert_close_rel(GN(cl, w, b, 2), gn_ref(cl, 2, w, b))
    sl = torch.randn(3, 16, 40, device="cuda", dtype=dtype)[:, ::2, 3:35]
    assert_close_rel(GN(sl, w, b, 8), gn_ref(sl, 8, w, b))
    for shape in ((0, 8, 4), (2, 8, 0), (0, 8)):
        y = GN(torch.randn(shape, device="cuda", dtype=dtype), w, b, 2)
        assert y.shape == shape and y.device.type == "cuda"
        y = IN(torch.randn(shape, device="cuda", dtype=dtype), torch.zeros(8, device="cuda"),
               torch.ones(8, device="cuda"), w, b, False)
        assert y.shape == shape


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(2, 6, 10), (8, 128, 32, 32), (4, 64, 30, 30), (2, 3, 7, 9, 11), (1, 4, 512, 512)])
def test_instance_norm_input_stats(shape, dtype):
    x = torch.randn(shape, device="cuda", dtype=dtype) * 3 - 1
    w, b = affine(shape[1], dtype, True, True)
    y = IN(x, None, None, w, b)
    assert_close_rel(y, gn_ref(x, shape[1], w, b))
    close_to_torch(y, F.instance_norm(x, weight=w, bias=b))
    assert_close_rel(IN(x, None, None, None, None, True, 0.1, 1e-3), gn_ref(x, shape[1], eps=1e-3))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(3, 5), (2, 6, 10), (8, 128, 32, 32), (4, 256, 28, 28), (1, 3, 1024, 1024),
                                   (2, 5, 99, 101)])
@pytest.mark.parametrize("weight,bias", [(True, True), (False, False)], ids=["wb", "nw_nb"])
def test_instance_norm_running_stats(shape, dtype, weight, bias):
    """Short rows (the row kernel, no reduction) and long few ones (the split output pass alone); the
    stats are read, never written."""
    c = shape[1]
    x = torch.randn(shape, device="cuda", dtype=dtype)
    rm = torch.randn(c, device="cuda")
    rv = torch.rand(c, device="cuda") * 2 + 0.1
    rm0, rv0 = rm.clone(), rv.clone()
    w, b = affine(c, dtype, weight, bias)
    y = IN(x, rm, rv, w, b, False, 0.1, 1e-4)
    assert_close_rel(y, running_ref(x, rm, rv, w, b, 1e-4))
    torch_y = F.instance_norm(x.float(), rm.clone(), rv.clone(), None if w is None else w.float(),
                              None if b is None else b.float(), use_input_stats=False, eps=1e-4).to(dtype)
    close_to_torch(y, torch_y)
    assert torch.equal(rm, rm0) and torch.equal(rv, rv0)


@pytest.mark.parametrize("plan", ["image-g32", "split"])
def test_cuda_graph_replays_after_a_warm_up(plan):
    shape, groups = PLANS[plan]
    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    w, b = affine(shape[1], torch.bfloat16, True, True)
    GN(x, w, b, groups)  # builds the kernels outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = GN(x, w, b, groups)
    x.copy_(torch.randn_like(x))
    g.replay()
    torch.cuda.synchronize()
    assert_close_rel(y, gn_ref(x, groups, w, b))


def _plans_child():
    """Runs one call per plan (child process of test_every_plan_runs)."""
    for shape, groups in PLANS.values():
        for dtype in (torch.float16, torch.float32):
            x = torch.randn(shape, device="cuda", dtype=dtype)
            GN(x, None, None, groups)
    for shape in ((2, 6, 10), (1, 3, 1024, 1024)):
        x = torch.randn(shape, device="cuda", dtype=torch.float16)
        IN(x, torch.zeros(shape[1], device="cuda"), torch.ones(shape[1], device="cuda"), None, None, False)
    torch.cuda.synchronize()
    print("plans child ok")


def test_every_plan_runs():
    """The shapes above reach every kernel the planner can pick on this GPU (the build's debug log
    names each spec it builds)."""
    env = dict(os.environ, TILEOPS_LOG_LEVEL="debug",
               PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), os.path.join(ROOT, "tests")]))
    code = f"import sys; sys.path.insert(0, {HERE!r}); import test_group_norm_gpu as t; t._plans_child()"
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    log = run.stdout + run.stderr
    assert run.returncode == 0 and "plans child ok" in run.stdout, log[-4000:]
    built = [line for line in log.splitlines() if "built group_norm_fwd(" in line]
    for want in ("stats=input", "stats=running", "impl=split", "impl=rows", "cache=0", "cache=8", "vec=1,",
                 "vec=8,", "rows=256", "rows=1,"):
        assert any(want in line for line in built), (want, built)
    split_running = [line for line in built if "impl=split" in line and "stats=running" in line]
    streamed = [line for line in built if "impl=rows" in line and "cache=0" in line and "stats=input" in line]
    assert split_running and streamed, built
