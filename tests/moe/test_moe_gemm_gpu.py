"""MoeGroupedGemmNopadFwdOp and MoeGateUpFwdOp on a CUDA GPU against float64 formulas written here: the
cublaslt target (what serves CUDA: one cuBLASLt GEMM an expert's run of rows, the runs read on the host)
and the nvrtc target's one-launch grouped GEMM (pending: the runs read on the device, replayable in a
CUDA graph; decode sizes and captured calls, the rest declined to cuBLASLt). Runs out of expert order, rows no expert covers
(zeros), empty experts, odd n and k, both 16-bit dtypes and both activations."""
import math

import pytest
import torch

import tileops

pytestmark = pytest.mark.gpu
tileops.load()
ops = torch.ops.tileops
HALF_ULP = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}

# (sizes, offsets, rows): back to back; out of expert order with rows 5 and 10 uncovered and an empty
# expert whose offset lies past the rows; one row
RUNS = [([3, 0, 1, 4], [0, 3, 3, 4], 8), ([3, 0, 5, 1], [6, 99, 0, 9], 11), ([1], [0], 1)]
# runs of several 64-row tiles, empty experts keeping the average at the nvrtc plan's bound or below
BIG = ([70, 0, 130, 3] + [0] * 9, [3, 0, 73, 203] + [0] * 9, 206)


def inputs(runs, n, k, dtype, seed):
    sizes, offsets, rows = runs
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(rows, k, generator=g).to(dtype)
    b = (torch.randn(len(sizes), n, k, generator=g) / math.sqrt(max(k, 1))).to(dtype)
    i32 = lambda v: torch.tensor(v, dtype=torch.int32)  # noqa: E731
    return a, b, i32(sizes), i32(offsets)


def float64_runs(a, b, sizes, offsets):
    out = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float64)
    terms = torch.zeros_like(out)
    for e in range(b.shape[0]):
        lo, n = int(offsets[e]), int(sizes[e])
        out[lo:lo + n] = a[lo:lo + n].double() @ b[e].double().T
        terms[lo:lo + n] = a[lo:lo + n].double().abs() @ b[e].double().abs().T
    return out, terms


def cuda(*ts):
    return [t.cuda() for t in ts]


def assert_runs_within_one_rounding(c, a, b, sizes, offsets, dtype):
    # float32 sums, one rounding into dtype; rows no run covers are zeros
    want, terms = float64_runs(a, b, sizes, offsets)
    assert ((c.double() - want).abs() <= HALF_ULP[dtype] * want.abs() + 1e-6 * terms + 1e-6).all()
    covered = torch.zeros(a.shape[0], dtype=torch.bool)
    for s, o in zip(sizes.tolist(), offsets.tolist()):
        covered[o:o + s] = s > 0
    assert c[~covered].eq(0).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("runs", RUNS)
@pytest.mark.parametrize("n,k", [(8, 33), (5, 130), (256, 512)])
def test_grouped_gemm_matches_float64_per_run(dtype, runs, n, k):
    a, b, sizes, offsets = inputs(runs, n, k, dtype, seed=1)
    c = ops.moe_grouped_gemm_nopad_fwd(*cuda(a, b, sizes, offsets), target="cublaslt").cpu()
    assert_runs_within_one_rounding(c, a, b, sizes, offsets, dtype)


@pytest.mark.parametrize("activation", ["silu_and_mul", "gelu_and_mul"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("runs", RUNS)
@pytest.mark.parametrize("ffn,k", [(4, 33), (64, 256)])
def test_gate_up_matches_float64_with_one_rounding(activation, dtype, runs, ffn, k):
    a, b, sizes, offsets = inputs(runs, 2 * ffn, k, dtype, seed=2)
    c = ops.moe_gate_up_fwd(*cuda(a, b, sizes, offsets), activation=activation, target="cublaslt").cpu()
    assert_gate_up_within_one_rounding(c, a, b, sizes, offsets, activation, dtype)


def assert_gate_up_within_one_rounding(c, a, b, sizes, offsets, activation, dtype):
    ffn = c.shape[1]
    both, terms = float64_runs(a, b, sizes, offsets)
    gate, up = both[:, :ffn], both[:, ffn:]
    act = gate * torch.sigmoid(gate) if activation == "silu_and_mul" else gate * 0.5 * (1 + torch.erf(gate / math.sqrt(2)))
    want = act * up
    # float32 sums (1e-6 of their terms) carried through act(gate) * up (|act'| <= 1.13), float32
    # arithmetic after, one rounding into dtype
    carried = 1e-6 * (1.13 * terms[:, :ffn] * up.abs() + terms[:, ffn:] * act.abs())
    assert ((c.double() - want).abs() <= HALF_ULP[dtype] * want.abs() + carried + 1e-6 * want.abs() + 1e-7).all()


@pytest.mark.parametrize("target", ["cublaslt", pytest.param("nvrtc", marks=pytest.mark.unverified_gpu)])
def test_the_reference_and_the_cuda_targets_agree_on_a_deepseek_sized_decode_step(target):
    # 64 experts of 7168 -> 2 x 256, 512 routed rows unevenly spread
    g = torch.Generator().manual_seed(3)
    sizes = torch.multinomial(torch.ones(64), 512, replacement=True, generator=g).bincount(minlength=64).int()
    offsets = (sizes.cumsum(0) - sizes).int()
    a = torch.randn(512, 7168, generator=g).bfloat16().cuda()
    b = (torch.randn(64, 512, 7168, generator=g) / 85).bfloat16().cuda()
    args = (a, b, sizes.cuda(), offsets.cuda())
    got = ops.moe_gate_up_fwd(*args, target=target).float()
    ref = ops.moe_gate_up_fwd(*args, target="reference").float()
    assert ((got - ref).abs() <= 2 * 2.0 ** -8 * ref.abs() + 1e-4).all()


# --- the nvrtc target's one-launch kernel (pending), the runs read on the device ------------------

@pytest.mark.unverified_gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("runs", RUNS + [BIG])
@pytest.mark.parametrize("n,k", [(8, 32), (200, 136), (256, 512)])
def test_nvrtc_grouped_gemm_matches_float64_per_run(dtype, runs, n, k):
    a, b, sizes, offsets = inputs(runs, n, k, dtype, seed=4)
    c = ops.moe_grouped_gemm_nopad_fwd(*cuda(a, b, sizes, offsets), target="nvrtc").cpu()
    assert_runs_within_one_rounding(c, a, b, sizes, offsets, dtype)


@pytest.mark.unverified_gpu
def test_nvrtc_grouped_gemm_declines_odd_k_to_cublaslt():
    a, b, sizes, offsets = inputs(RUNS[1], 24, 36, torch.bfloat16, seed=5)  # K % 8 != 0
    args = cuda(a, b, sizes, offsets)
    assert torch.equal(ops.moe_grouped_gemm_nopad_fwd(*args, target="nvrtc"),
                       ops.moe_grouped_gemm_nopad_fwd(*args, target="cublaslt"))


@pytest.mark.unverified_gpu
def test_nvrtc_grouped_gemm_replays_in_a_cuda_graph_with_new_runs():
    # the runs are read on the device: a graph captured once serves a later routing
    a, b, sizes, offsets = inputs(([5, 0, 9], [0, 5, 5], 14), 64, 128, torch.bfloat16, seed=6)
    a, b, sizes, offsets = cuda(a, b, sizes, offsets)
    ops.moe_grouped_gemm_nopad_fwd(a, b, sizes, offsets, target="nvrtc")  # builds the kernel
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        c = ops.moe_grouped_gemm_nopad_fwd(a, b, sizes, offsets, target="nvrtc")
    sizes.copy_(torch.tensor([2, 7, 3], dtype=torch.int32))
    offsets.copy_(torch.tensor([12, 0, 8], dtype=torch.int32))  # rows 7 and 11 now uncovered
    g.replay()
    torch.cuda.synchronize()
    want, terms = float64_runs(a.cpu(), b.cpu(), sizes.cpu(), offsets.cpu())
    got = c.cpu().double()
    assert ((got - want).abs() <= 2.0 ** -8 * want.abs() + 1e-6 * terms + 1e-6).all()
    assert got[7].eq(0).all() and got[11].eq(0).all()


@pytest.mark.unverified_gpu
@pytest.mark.parametrize("activation", ["silu_and_mul", "gelu_and_mul"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("runs", RUNS + [BIG])
@pytest.mark.parametrize("ffn,k", [(4, 32), (100, 136), (256, 512)])
def test_nvrtc_gate_up_matches_float64_with_one_rounding(activation, dtype, runs, ffn, k):
    # 64 output columns a CTA from 128 rows of b: gate and up rows of the same columns
    a, b, sizes, offsets = inputs(runs, 2 * ffn, k, dtype, seed=7)
    c = ops.moe_gate_up_fwd(*cuda(a, b, sizes, offsets), activation=activation, target="nvrtc").cpu()
    assert_gate_up_within_one_rounding(c, a, b, sizes, offsets, activation, dtype)
    covered = torch.zeros(a.shape[0], dtype=torch.bool)
    for s, o in zip(sizes.tolist(), offsets.tolist()):
        covered[o:o + s] = s > 0
    assert c[~covered].eq(0).all()


# --- which sizes the nvrtc plan takes ----------------------------------------------------------------

@pytest.mark.unverified_gpu
def test_nvrtc_takes_decode_sizes_and_declines_prefill_sizes_to_cublaslt():
    small = cuda(*inputs(([20, 9, 0, 30], [0, 20, 29, 29], 59), 64, 128, torch.bfloat16, seed=8))  # 15 an expert
    big = cuda(*inputs(([70, 60, 10, 20], [0, 70, 130, 140], 160), 64, 128, torch.bfloat16, seed=9))  # 40
    for fn in (ops.moe_grouped_gemm_nopad_fwd, ops.moe_gate_up_fwd):
        tileops.clear_kernel_caches()
        tileops.reset_counters()
        assert torch.equal(fn(*big, target="nvrtc"), fn(*big, target="cublaslt"))
        assert tileops.counters()["module_loads"] == 0  # cuBLASLt's GEMMs: no NVRTC module
        fn(*small, target="nvrtc")
        assert tileops.counters()["module_loads"] == 1  # the one-launch kernel


@pytest.mark.unverified_gpu
def test_nvrtc_takes_prefill_sizes_under_capture():
    # cuBLASLt reads the runs on the host, which a capture forbids: the one launch takes any size there
    a, b, sizes, offsets = inputs(([70, 60, 10, 20], [0, 70, 130, 140], 160), 128, 128, torch.bfloat16, seed=10)
    ca, cb, cs, co = cuda(a, b, sizes, offsets)
    two_each = torch.tensor([2, 2, 2, 2], dtype=torch.int32, device="cuda")
    ops.moe_gate_up_fwd(ca[:8], cb, two_each, two_each.cumsum(0, dtype=torch.int32) - 2, target="nvrtc")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        c = ops.moe_gate_up_fwd(ca, cb, cs, co, target="nvrtc")
    g.replay()
    torch.cuda.synchronize()
    assert_gate_up_within_one_rounding(c.cpu(), a, b, sizes, offsets, "silu_and_mul", torch.bfloat16)
