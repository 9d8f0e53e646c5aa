"""RMSNorm on the GPU (nvrtc target): correctness against a float64 reference, build/hit counters,
disk cache, concurrency, CUDA graphs, torch.compile. Skipped without a GPU (conftest)."""
import os
import subprocess
import sys
import threading

import pytest
import torch
import torch._dynamo

import tileops
from support.reference import assert_close_rel, rms_norm_ref
from tileops.norm import RMSNormFwdOp
from support.graphs import GraphRecorder

pytestmark = pytest.mark.gpu
OP = torch.ops.tileops.norm_rms_norm_fwd
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DTYPES = [torch.float16, torch.bfloat16, torch.float32]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [64, 1000, 4096, 8192, 16384, 65536])
@pytest.mark.parametrize("m", [0, 1, 7, 2048])
@pytest.mark.parametrize("weight", [True, False], ids=["w", "nw"])
def test_matches_float64_reference(m, n, dtype, weight):
    x = torch.randn(m, n, device="cuda", dtype=dtype) * 3 + 0.5
    w = torch.randn(n, device="cuda", dtype=dtype) if weight else None
    y = OP(x, w, [n])
    assert y.is_contiguous() and y.shape == x.shape and y.dtype == dtype
    assert_close_rel(y, rms_norm_ref(x, [n], w))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_non_contiguous_and_misaligned_inputs(dtype):
    base = torch.randn(4096, 300, device="cuda", dtype=dtype)
    x = base[:, 1:257]  # non-contiguous rows that start 1 element off 16-byte alignment
    assert not x.is_contiguous()
    w = torch.randn(256, device="cuda", dtype=dtype)
    assert_close_rel(OP(x, w, [256]), rms_norm_ref(x, [256], w))
    xt = torch.randn(256, 512, device="cuda", dtype=dtype).t()  # (512, 256), strides (1, 512)
    assert_close_rel(OP(xt, w, [256]), rms_norm_ref(xt, [256], w))
    # A contiguous tensor whose storage starts off a 16-byte boundary takes the narrow-access kernel.
    flat = torch.randn(1 + 8 * 256, device="cuda", dtype=dtype)[1:].view(8, 256)
    assert flat.is_contiguous() and flat.data_ptr() % 16 != 0
    assert_close_rel(OP(flat, w, [256]), rms_norm_ref(flat, [256], w))


def test_eps_multi_dim_normalized_shape_and_odd_rows():
    x = torch.randn(3, 5, 7, 33, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(7, 33, device="cuda", dtype=torch.bfloat16)
    assert_close_rel(OP(x, w, [7, 33], 1e-2), rms_norm_ref(x, [7, 33], w, 1e-2))
    # eps=None means finfo(float32).eps, as F.rms_norm: tiny rows show the difference.
    tiny = torch.full((2, 64), 1e-4, device="cuda", dtype=torch.float32)
    torch.testing.assert_close(OP(tiny, None, [64]), torch.nn.functional.rms_norm(tiny, [64]))


def test_reference_target_on_cuda_agrees():
    x = torch.randn(64, 4096, device="cuda", dtype=torch.float16)
    w = torch.randn(4096, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(OP(x, w, [4096]), OP(x, w, [4096], target="reference"), rtol=2e-3, atol=2e-3)


def test_build_once_then_hit_and_keyed_by_identity(counters):
    tileops.clear_kernel_caches()
    w = torch.randn(3072, device="cuda", dtype=torch.float16)
    OP(torch.randn(4, 3072, device="cuda", dtype=torch.float16), w, [3072])
    c = counters()
    assert c["kernel_builds"] == 1 and c["module_loads"] == 1
    assert c["nvrtc_compiles"] + c["disk_cache_hits"] == 1
    OP(torch.randn(9, 3072, device="cuda", dtype=torch.float16), w, [3072])   # other M: same kernel
    assert counters()["kernel_builds"] == 1 and counters()["kernel_hits"] == 1
    OP(torch.randn(9, 3072, device="cuda", dtype=torch.float16), None, [3072])  # no weight: new identity
    OP(torch.randn(9, 2048, device="cuda", dtype=torch.float16), None, [2048])  # other N: new identity
    assert counters()["kernel_builds"] == 3


def test_eps_is_a_launch_argument_one_compile_serves_every_eps(counters):
    """Two eps values (RMSNorm, its backward, LayerNorm): one build and one CUBIN each (compiled or
    read from disk); each eps still gives its own result."""
    tileops.clear_kernel_caches()
    x = torch.randn(64, 2560, device="cuda", dtype=torch.bfloat16) * 1e-2
    w = torch.randn(2560, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(2560, device="cuda", dtype=torch.bfloat16)
    ys = [OP(x, w, [2560], eps) for eps in (1e-6, 1e-2)]
    c = counters()
    assert c["kernel_builds"] == 1 and c["nvrtc_compiles"] + c["disk_cache_hits"] == 1 and c["kernel_hits"] == 1, c
    assert not torch.equal(ys[0], ys[1])
    for eps, y in zip((1e-6, 1e-2), ys):
        assert_close_rel(y, rms_norm_ref(x, [2560], w, eps))
    dy = torch.randn_like(x)
    for eps in (1e-6, 1e-2):
        torch.ops.tileops.norm_rms_norm_bwd(dy, x, w, [2560], eps)
    for eps in (1e-5, 1e-1):
        y = torch.ops.tileops.norm_layer_norm_fwd(x, w, b, [2560], eps)
        ref = torch.nn.functional.layer_norm(x.double(), [2560], w.double(), b.double(), eps).to(x.dtype)
        assert_close_rel(y, ref)
    c = counters()
    # RMSNorm 1, its backward 2 (main kernel and the dweight reduction), LayerNorm 1.
    assert c["kernel_builds"] == 3 and c["nvrtc_compiles"] + c["disk_cache_hits"] == 4, c


def test_disk_cache_serves_a_second_process(tmp_path):
    code = ("import torch, tileops; tileops.load();"
            "x = torch.randn(8, 1536, device='cuda', dtype=torch.bfloat16);"
            "torch.ops.tileops.norm_rms_norm_fwd(x, None, [1536]); torch.cuda.synchronize();"
            "c = tileops.counters(); print(c['nvrtc_compiles'], c['disk_cache_hits'])")
    env = dict(os.environ, TILEOPS_CACHE_DIR=str(tmp_path), PYTHONPATH=os.path.join(ROOT, "python"))
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert first.stdout.split() == ["1", "0"], first.stderr
    assert second.stdout.split() == ["0", "1"], second.stderr
    assert any(p.suffix == ".cubin" for p in tmp_path.iterdir())


def test_threads_missing_the_same_identity_build_once(counters):
    tileops.clear_kernel_caches()
    x = torch.randn(16, 2560, device="cuda", dtype=torch.float32)
    results, barrier = [None] * 4, threading.Barrier(4)

    def work(i):
        barrier.wait()
        results[i] = OP(x, None, [2560])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert counters()["kernel_builds"] == 1
    for r in results:
        torch.testing.assert_close(r, results[0])


def test_cuda_graph_after_warm_up_replays_correctly():
    x = torch.randn(32, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    OP(x, w, [4096])  # warm-up: builds the kernel
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = OP(x, w, [4096])
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        g.replay()
        torch.cuda.synchronize()
        assert_close_rel(y, rms_norm_ref(x, [4096], w))


def test_capture_that_needs_a_build_is_a_clear_error_and_the_process_survives(counters):
    x = torch.randn(4, 1234, device="cuda", dtype=torch.float16)  # never built before
    tileops.clear_kernel_caches()
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match=r"current stream is being captured.*Warm up first"):
        with torch.cuda.graph(g):
            OP(x, None, [1234])
    assert counters()["capture_refusals"] == 1 and counters()["kernel_builds"] == 0
    torch.cuda.synchronize()
    assert_close_rel(OP(x, None, [1234]), rms_norm_ref(x, [1234]))  # still usable


def test_cold_compile_on_gpu_one_node_no_recompile_dynamic_batch(counters):
    torch._dynamo.reset()
    tileops.clear_kernel_caches()
    rec = GraphRecorder(inductor=True)

    op = RMSNormFwdOp((4096,))
    fn = torch.compile(lambda x, w: op(x, w), fullgraph=True, dynamic=True, backend=rec)
    w = torch.randn(4096, device="cuda", dtype=torch.float16)
    # Row counts above the few-rows class (a call of few rows plans its own kernel).
    for m in (2048, 517, 1300):
        x = torch.randn(m, 4096, device="cuda", dtype=torch.float16)
        assert_close_rel(fn(x, w), rms_norm_ref(x, [4096], w))
    assert len(rec.graphs) == 1
    assert rec.calls() == [torch.ops.tileops.norm_rms_norm_fwd.default]
    assert counters()["kernel_builds"] == 1  # tracing built nothing; the three real calls share one kernel


# Rows longer than 64 KB go to the cluster implementation on sm_90 (a thread-block cluster per row,
# DSMEM partial sums) and to the streaming one elsewhere or beyond 1 MB; 100003 is odd (scalar
# accesses, ragged chunks: the register cluster), 100008 a multiple of 8 whose last chunk is short
# (the staged cluster with a ragged end), 1 << 20 float32 (4 MB) exceeds what a cluster holds.
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [100003, 100008, 131072, 262144])
@pytest.mark.parametrize("m", [1, 3, 64])
@pytest.mark.parametrize("weight", [True, False], ids=["w", "nw"])
def test_long_rows_match_float64_reference(m, n, dtype, weight):
    x = torch.randn(m, n, device="cuda", dtype=dtype) * 3 + 0.5
    w = torch.randn(n, device="cuda", dtype=dtype) if weight else None
    assert_close_rel(OP(x, w, [n]), rms_norm_ref(x, [n], w))


# 16-byte accesses take the staged cluster; a row start only 2-byte aligned takes the register one.
@pytest.mark.parametrize("offset", [0, 1])
def test_long_rows_at_any_alignment(offset):
    n = 131072
    base = torch.randn(3 * n + 8, device="cuda", dtype=torch.bfloat16)
    x = base[offset:offset + 3 * n].view(3, n)
    w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    assert_close_rel(OP(x, w, [n]), rms_norm_ref(x, [n], w))


def test_rows_past_a_cluster_stream():
    x = torch.randn(3, 1 << 20, device="cuda")
    w = torch.randn(1 << 20, device="cuda")
    assert_close_rel(OP(x, w, [1 << 20]), rms_norm_ref(x, [1 << 20], w))


def test_long_rows_deterministic_and_graph_replayable():
    x = torch.randn(64, 131072, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(131072, device="cuda", dtype=torch.bfloat16)
    first = OP(x, w, [131072])
    assert torch.equal(OP(x, w, [131072]), first)  # partial sums meet in a fixed order
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = OP(x, w, [131072])
    x.copy_(torch.randn_like(x))
    g.replay()
    torch.cuda.synchronize()
    assert_close_rel(out, rms_norm_ref(x, [131072], w))


# ---- FusedAddRMSNormFwdOp -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [64, 1000, 4096, 8192, 16384, 16392, 65536, 100003, 131072])  # 16384+: staged
@pytest.mark.parametrize("m", [0, 1, 7, 2048])
def test_fused_add_matches_eager_both_branches(m, n, dtype):
    x = torch.randn(m, n, device="cuda", dtype=dtype)
    r = torch.randn(m, n, device="cuda", dtype=dtype)
    w = torch.randn(n, device="cuda", dtype=dtype)
    s = x + r  # rounded to dtype, as the op specifies
    y, r_new = torch.ops.tileops.norm_fused_add_rms_norm_fwd(x, r, w, [n])
    assert torch.equal(r_new, s)
    assert_close_rel(y, rms_norm_ref(s, [n], w))
    r_in_place = r.clone()
    y2 = torch.ops.tileops.norm_fused_add_rms_norm_fwd_writes_residual(x, r_in_place, w, [n])
    assert torch.equal(r_in_place, s)
    assert torch.equal(y2, y)


def test_fused_add_non_contiguous_residual_written_back():
    x = torch.randn(64, 512, device="cuda", dtype=torch.bfloat16)
    storage = torch.randn(512, 64, device="cuda", dtype=torch.bfloat16)
    r = storage.t()
    expected = x + r
    torch.ops.tileops.norm_fused_add_rms_norm_fwd_writes_residual(x, r, None, [512])
    assert torch.equal(storage.t(), expected)


# ---- LayerNormFwdOp -----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [64, 1000, 4096, 4104, 16384, 65536])  # 4104: staged, ragged parts
@pytest.mark.parametrize("m", [0, 1, 7, 1024])
@pytest.mark.parametrize("affine", ["wb", "w", "b", "none"])
def test_layer_norm_matches_float64(m, n, dtype, affine):
    x = torch.randn(m, n, device="cuda", dtype=dtype) * 2 + 3  # a non-zero mean exercises the centring
    w = torch.randn(n, device="cuda", dtype=dtype) if "w" in affine else None
    b = torch.randn(n, device="cuda", dtype=dtype) if "b" in affine else None
    y = torch.ops.tileops.norm_layer_norm_fwd(x, w, b, [n])
    ref = torch.nn.functional.layer_norm(x.double(), [n], None if w is None else w.double(),
                                         None if b is None else b.double()).to(dtype)
    assert_close_rel(y, ref)


@pytest.mark.parametrize("dtype,n", [(torch.bfloat16, 8192), (torch.bfloat16, 16384), (torch.float16, 32768)],
                         ids=str)
def test_layer_norm_statistics_survive_hostile_rows(dtype, n):
    """Staged bfloat16 rows take one pass of sums shifted by the row's first element (float16 and
    longer rows two passes): rows that would defeat an unshifted E[x^2] - E[x]^2 (a large common
    offset; a first element far from the rest)."""
    w = torch.randn(n, device="cuda", dtype=dtype)
    offset = torch.randn(300, n, device="cuda", dtype=dtype) + 1000
    outlier = torch.randn(300, n, device="cuda", dtype=dtype)
    outlier[:, 0] = 3e4
    for x in (offset, outlier):
        ref = torch.nn.functional.layer_norm(x.double(), [n], w.double()).to(dtype)
        assert_close_rel(torch.ops.tileops.norm_layer_norm_fwd(x, w, None, [n]), ref)


# registers; staged two-pass (float16); staged one-pass (bfloat16), ragged and exact parts
@pytest.mark.parametrize("dtype,n", [(torch.bfloat16, 1000), (torch.float16, 4104), (torch.bfloat16, 4104),
                                     (torch.bfloat16, 8192)], ids=str)
def test_layer_norm_row_with_an_inf_is_nan_as_in_torch(dtype, n):
    x = torch.randn(3, n, device="cuda", dtype=dtype)
    x[0, 5] = float("inf")
    x[1, 7] = float("-inf")
    y = torch.ops.tileops.norm_layer_norm_fwd(x, None, None, [n])
    ref = torch.nn.functional.layer_norm(x.double(), [n])
    assert torch.isnan(ref[:2]).all()  # torch: the whole row is NaN
    assert torch.isnan(y[:2]).all()
    assert_close_rel(y[2:], ref[2:].to(dtype))
