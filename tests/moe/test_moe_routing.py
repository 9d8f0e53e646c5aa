"""The MoE family (manifests/moe.yaml) on CPU: routing tables against loops over the routes written
here, the expert GEMMs and the weighted sum against float64 formulas, and a whole routed-expert layer
from the stages against a per-token float64 MoE."""
import math

import pytest
import torch

import tileops

tileops.load()
ops = torch.ops.tileops


def random_ids(tokens, top_k, experts, seed=0):
    g = torch.Generator().manual_seed(seed)
    # distinct experts per token, as a router picks them
    rows = [torch.randperm(experts, generator=g)[:top_k] for _ in range(tokens)]
    return torch.stack(rows).to(torch.int32) if rows else torch.empty(0, top_k, dtype=torch.int32)


@pytest.mark.parametrize("tokens,top_k,experts,block", [(6, 2, 5, 4), (33, 8, 16, 8), (1, 8, 64, 16), (0, 2, 3, 4),
                                                        (40, 1, 3, 1)])
def test_permute_align_matches_a_loop_over_routes(tokens, top_k, experts, block):
    ids = random_ids(tokens, top_k, experts, seed=tokens)
    sorted_ids, expert_ids, post_pad = ops.moe_permute_align_fwd(ids, experts, block)
    numel = tokens * top_k
    assert sorted_ids.shape == (numel + (experts + 1) * (block - 1),)
    assert expert_ids.shape == ((sorted_ids.numel() + block - 1) // block,)
    want_sorted, want_blocks = [], []
    for e in range(experts):
        mine = [f for f in range(numel) if ids.flatten()[f] == e]
        pad = -len(mine) % block
        want_sorted += mine + [numel] * pad
        want_blocks += [e] * ((len(mine) + pad) // block)
    assert post_pad.tolist() == [len(want_sorted)]
    assert sorted_ids.tolist() == want_sorted + [numel] * (sorted_ids.numel() - len(want_sorted))
    assert expert_ids.tolist() == want_blocks + [-1] * (expert_ids.numel() - len(want_blocks))


def test_permute_align_refuses_an_expert_id_out_of_range():
    ids = torch.tensor([[0, 5]], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"moe_permute_align_fwd: 'topk_ids' must lie in \[0, num_experts = 5\), got 5"):
        ops.moe_permute_align_fwd(ids, 5)
    with pytest.raises(ValueError, match=r"moe_permute_align_fwd: .*got -1"):
        ops.moe_permute_align_fwd(torch.tensor([[-1]], dtype=torch.int32), 5)
    with pytest.raises(ValueError, match=r"moe_permute_align_fwd: .*block_size > 0"):
        ops.moe_permute_align_fwd(ids, 8, 0)


def expected_nopad(ids, local_of, local):
    """Loops over the routes: per local expert its flat indices in ascending order."""
    flat = ids.flatten().tolist()
    runs = [[f for f in range(len(flat)) if local_of[flat[f]] == e] for e in range(local)]
    offsets = [0]
    for r in runs:
        offsets.append(offsets[-1] + len(r))
    fwd = [-1] * len(flat)
    for e, r in enumerate(runs):
        for i, f in enumerate(r):
            fwd[f] = offsets[e] + i
    return runs, offsets, fwd


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_permute_nopad_groups_rows_by_expert(dtype):
    tokens, top_k, experts = 9, 3, 6
    ids = random_ids(tokens, top_k, experts, seed=1)
    h = torch.randn(tokens, 16).to(dtype)
    perm, offsets, sizes, first, fwd = ops.moe_permute_nopad_fwd(h, ids, None, experts, experts)
    runs, want_off, want_fwd = expected_nopad(ids, list(range(experts)), experts)
    assert sizes.tolist() == [len(r) for r in runs] and sizes.dtype == torch.int32
    assert offsets.tolist() == want_off[:-1] and first.tolist() == want_off and first.dtype == torch.int64
    assert fwd.tolist() == want_fwd
    for f in range(tokens * top_k):
        assert torch.equal(perm[want_fwd[f]], h[f // top_k])


def test_permute_nopad_with_an_expert_map_keeps_local_routes_only():
    tokens, top_k, experts = 7, 2, 6
    ids = random_ids(tokens, top_k, experts, seed=2)
    expert_map = torch.tensor([-1, 1, -1, 0, 2, -1], dtype=torch.int32)  # this rank owns experts 3, 1, 4
    h = torch.randn(tokens, 8, dtype=torch.bfloat16)
    perm, offsets, sizes, first, fwd = ops.moe_permute_nopad_fwd(h, ids, expert_map, experts, 3)
    runs, want_off, want_fwd = expected_nopad(ids, expert_map.tolist(), 3)
    assert sizes.tolist() == [len(r) for r in runs] and first.tolist() == want_off
    assert fwd.tolist() == want_fwd
    routed = want_off[-1]
    for f in range(tokens * top_k):
        if want_fwd[f] >= 0:
            assert torch.equal(perm[want_fwd[f]], h[f // top_k])
    assert all(torch.equal(perm[r], h[0]) for r in range(routed, tokens * top_k))  # TileOPs' rows past the routed


def test_permute_nopad_refuses_a_map_that_misses_a_local_id_and_a_missing_map():
    ids, h = random_ids(3, 2, 4), torch.randn(3, 8, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"moe_permute_nopad_fwd: 'expert_map' must hold each local expert id exactly once"):
        ops.moe_permute_nopad_fwd(h, ids, torch.tensor([0, 0, -1, -1], dtype=torch.int32), 4, 2)
    with pytest.raises(ValueError, match=r"moe_permute_nopad_fwd: 'expert_map' entries must be below num_experts_local"):
        ops.moe_permute_nopad_fwd(h, ids, torch.tensor([0, 1, 2, -1], dtype=torch.int32), 4, 2)
    with pytest.raises(ValueError, match=r"moe_permute_nopad_fwd: without 'expert_map', num_experts_local must equal"):
        ops.moe_permute_nopad_fwd(h, ids, None, 4, 2)
    with pytest.raises(ValueError, match=r"moe_permute_nopad_fwd: .*num_experts_local <= num_experts"):
        ops.moe_permute_nopad_fwd(h, ids, None, 4, 5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("scale", [1.0, 2.827])
def test_unpermute_is_the_weighted_sum_of_routed_rows(dtype, scale):
    tokens, top_k, hidden = 5, 3, 24
    mm2 = torch.randn(tokens * top_k + 2, hidden).to(dtype)
    fwd = torch.randperm(tokens * top_k).to(torch.int32)
    fwd[4] = -1  # another rank's expert
    w = torch.rand(tokens, top_k)
    out = ops.moe_unpermute_fwd(mm2, fwd, w, routed_scaling_factor=scale)
    want = torch.zeros(tokens, hidden, dtype=torch.float64)
    for t in range(tokens):
        for k in range(top_k):
            row = int(fwd[t * top_k + k])
            if row >= 0:
                want[t] += float(w[t, k]) * mm2[row].double()
    torch.testing.assert_close(out.double(), want * scale, rtol=4e-3 if dtype == torch.float16 else 1.6e-2, atol=1e-2)
    assert out.dtype == dtype


def test_unpermute_ignores_a_non_finite_row_an_unrouted_slot_would_read():
    mm2 = torch.ones(4, 8, dtype=torch.float16)
    mm2[0] = float("inf")
    fwd = torch.tensor([-1, 1, 2, 3], dtype=torch.int32)
    out = ops.moe_unpermute_fwd(mm2, fwd, torch.ones(2, 2))
    assert torch.isfinite(out[0]).all() and out[0].tolist() == [1.0] * 8


def test_unpermute_refuses_rows_out_of_range_and_a_mismatched_fwd_idx():
    mm2, w = torch.randn(4, 8, dtype=torch.float16), torch.rand(2, 2)
    with pytest.raises(ValueError, match=r"moe_unpermute_fwd: 'fwd_idx' must lie in \[-1, 4\)"):
        ops.moe_unpermute_fwd(mm2, torch.tensor([0, 1, 2, 4], dtype=torch.int32), w)
    with pytest.raises(ValueError, match=r"moe_unpermute_fwd: .*routes == T \* top_k"):
        ops.moe_unpermute_fwd(mm2, torch.tensor([0, 1, 2], dtype=torch.int32), w)


def float64_runs(a, b, sizes, offsets):
    out = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float64)
    for e in range(b.shape[0]):
        lo, n = int(offsets[e]), int(sizes[e])
        for r in range(lo, lo + n):
            out[r] = b[e].double() @ a[r].double()
    return out


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_grouped_gemm_multiplies_each_run_by_its_expert(dtype):
    sizes = torch.tensor([3, 0, 5, 1], dtype=torch.int32)
    offsets = torch.tensor([6, 0, 0, 9], dtype=torch.int32)  # runs out of expert order, row 5 and 10 uncovered
    a = torch.randn(11, 32).to(dtype)
    b = (torch.randn(4, 20, 32) / 4).to(dtype)
    c = ops.moe_grouped_gemm_nopad_fwd(a, b, sizes, offsets)
    tol = 1e-2 if dtype == torch.float16 else 3e-2
    torch.testing.assert_close(c.double(), float64_runs(a, b, sizes, offsets), rtol=tol, atol=tol)
    assert c[5].eq(0).all() and c[10].eq(0).all()


def test_grouped_gemm_refuses_runs_outside_a_or_overlapping():
    a, b = torch.randn(6, 8, dtype=torch.float16), torch.randn(2, 4, 8, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"moe_grouped_gemm_nopad_fwd: expert 1's rows \[4, 8\) .*inside a's 6 rows"):
        ops.moe_grouped_gemm_nopad_fwd(a, b, torch.tensor([2, 4], dtype=torch.int32), torch.tensor([0, 4], dtype=torch.int32))
    with pytest.raises(ValueError, match=r"moe_grouped_gemm_nopad_fwd: expert runs must not overlap; row 2"):
        ops.moe_grouped_gemm_nopad_fwd(a, b, torch.tensor([3, 2], dtype=torch.int32), torch.tensor([0, 2], dtype=torch.int32))
    with pytest.raises(ValueError, match=r"moe_grouped_gemm_nopad_fwd: 'true_sizes' must be non-negative"):
        ops.moe_grouped_gemm_nopad_fwd(a, b, torch.tensor([-1, 2], dtype=torch.int32), torch.tensor([0, 2], dtype=torch.int32))


def silu(x):
    return x / (1 + torch.exp(-x))


def gelu(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


@pytest.mark.parametrize("activation,act", [("silu_and_mul", silu), ("gelu_and_mul", gelu)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gate_up_is_act_of_the_first_half_times_the_second(activation, act, dtype):
    sizes = torch.tensor([4, 2, 0], dtype=torch.int32)
    offsets = torch.tensor([2, 0, 6], dtype=torch.int32)
    a = torch.randn(7, 16).to(dtype)
    b = (torch.randn(3, 2 * 10, 16) / 3).to(dtype)
    c = ops.moe_gate_up_fwd(a, b, sizes, offsets, activation)
    both = float64_runs(a, b, sizes, offsets)
    want = act(both[:, :10]) * both[:, 10:]
    tol = 1e-2 if dtype == torch.float16 else 3e-2
    assert c.shape == (7, 10)
    torch.testing.assert_close(c.double(), want, rtol=tol, atol=tol)


def test_gate_up_refuses_an_unknown_activation_and_an_odd_width():
    a, sizes, offsets = torch.randn(2, 8, dtype=torch.float16), torch.tensor([2], dtype=torch.int32), torch.tensor([0], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"moe_gate_up_fwd: .*activation"):
        ops.moe_gate_up_fwd(a, torch.randn(1, 8, 8, dtype=torch.float16), sizes, offsets, "relu")
    with pytest.raises(RuntimeError, match=r"moe_gate_up_fwd: 'b' must have shape \[E, 2\*ffn, k\]"):
        ops.moe_gate_up_fwd(a, torch.randn(1, 7, 8, dtype=torch.float16), sizes, offsets)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_the_stages_make_a_routed_expert_layer(dtype):
    # permute -> gate/up -> down -> unpermute equals, per token, the sum of its experts' SwiGLU MLPs.
    tokens, top_k, experts, hidden, ffn = 10, 2, 4, 16, 12
    g = torch.Generator().manual_seed(7)
    ids = random_ids(tokens, top_k, experts, seed=7)
    w = torch.rand(tokens, top_k, generator=g)
    h = torch.randn(tokens, hidden, generator=g).to(dtype)
    w_gate_up = (torch.randn(experts, 2 * ffn, hidden, generator=g) / 4).to(dtype)
    w_down = (torch.randn(experts, hidden, ffn, generator=g) / 4).to(dtype)
    perm, offsets, sizes, _, fwd = ops.moe_permute_nopad_fwd(h, ids, None, experts, experts)
    act = ops.moe_gate_up_fwd(perm, w_gate_up, sizes, offsets)
    down = ops.moe_grouped_gemm_nopad_fwd(act, w_down, sizes, offsets)
    out = ops.moe_unpermute_fwd(down, fwd, w)
    want = torch.zeros(tokens, hidden, dtype=torch.float64)
    for t in range(tokens):
        for k in range(top_k):
            e = int(ids[t, k])
            gu = w_gate_up[e].double() @ h[t].double()
            want[t] += float(w[t, k]) * (w_down[e].double() @ (silu(gu[:ffn]) * gu[ffn:]))
    tol = 2e-2 if dtype == torch.float16 else 6e-2
    torch.testing.assert_close(out.double(), want, rtol=tol, atol=tol)
