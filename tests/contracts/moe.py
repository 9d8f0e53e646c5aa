import torch

# Hidden 8 (split over 2 and 4 ranks where the rule allows); routes of 6 tokens to 5 experts, top 2.


def _ids(device):
    return torch.tensor([[0, 3], [3, 4], [1, 0], [4, 3], [0, 1], [2, 3]], dtype=torch.int32, device=device)


def _runs(device):
    # true_sizes / true_offsets of _ids: experts 0..4 own 3, 2, 1, 4, 2 rows
    return (torch.tensor([3, 2, 1, 4, 2], dtype=torch.int32, device=device),
            torch.tensor([0, 3, 5, 6, 10], dtype=torch.int32, device=device))


def _align(device):
    import tileops.moe as moe
    return moe.MoePermuteAlignFwdOp(num_experts=5, block_size=4), (_ids(device),)


def _nopad(device):
    import tileops.moe as moe
    return moe.MoePermuteNopadFwdOp(num_experts=5, num_experts_local=5), (
        torch.randn(6, 8, device=device, dtype=torch.bfloat16), _ids(device))


def _unpermute(device):
    import tileops.moe as moe
    return moe.MoeUnpermuteFwdOp(routed_scaling_factor=2.5), (
        torch.randn(12, 8, device=device, dtype=torch.float16),
        torch.randperm(12, device=device).to(torch.int32), torch.rand(6, 2, device=device))


def _grouped(device):
    import tileops.moe as moe
    sizes, offsets = _runs(device)
    return moe.MoeGroupedGemmNopadFwdOp(), (
        torch.randn(12, 8, device=device, dtype=torch.bfloat16),
        torch.randn(5, 6, 8, device=device, dtype=torch.bfloat16), sizes, offsets)


def _gate_up(device):
    import tileops.moe as moe
    sizes, offsets = _runs(device)
    return moe.MoeGateUpFwdOp(activation="gelu_and_mul"), (
        torch.randn(12, 8, device=device, dtype=torch.float16),
        torch.randn(5, 12, 8, device=device, dtype=torch.float16), sizes, offsets)


def _fused_experts(device):
    import tileops.moe as moe
    empty = torch.empty(0, device=device, dtype=torch.bfloat16)
    return moe.FusedMoEExpertsNopadPersistent3WGFwdOp(num_experts=5, routed_scaling_factor=1.5), (
        torch.zeros(6, 8, device=device, dtype=torch.bfloat16), torch.randn(6, 8, device=device, dtype=torch.bfloat16),
        torch.randn(5, 12, 8, device=device, dtype=torch.bfloat16) / 3,
        torch.randn(5, 8, 6, device=device, dtype=torch.bfloat16) / 3,
        torch.rand(6, 2, device=device), _ids(device), empty, empty)


def _fused_moe(device):
    import tileops.moe as moe
    return moe.FusedMoeFwdOp(top_k=2, scoring_func="sigmoid", renormalize=True), (
        torch.randn(6, 8, device=device, dtype=torch.float16), torch.randn(6, 5, device=device),
        torch.randn(5, 12, 8, device=device, dtype=torch.float16) / 3,
        torch.randn(5, 8, 6, device=device, dtype=torch.float16) / 3, torch.randn(5, device=device))


CONTRACT = {
    "FusedMoEExpertsNopadPersistent3WGFwdOp": _fused_experts,
    "FusedMoeFwdOp": _fused_moe,
    "MoePermuteAlignFwdOp": _align,
    "MoePermuteNopadFwdOp": _nopad,
    "MoeUnpermuteFwdOp": _unpermute,
    "MoeGroupedGemmNopadFwdOp": _grouped,
    "MoeGateUpFwdOp": _gate_up,
}
