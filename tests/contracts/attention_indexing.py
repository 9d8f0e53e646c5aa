import torch

# Batch 4, queries 4 and KV groups 2 split over 2 and 4 ranks.


def _topk_selector(device):
    import tileops.attention_indexing as ai
    b, s, n, g = 4, 4, 12, 2
    starts = torch.tensor([0, 2, 5, 0], dtype=torch.int32, device=device).repeat(b, 1)
    ends = torch.tensor([12, 9, 6, 0], dtype=torch.int32, device=device).repeat(b, 1)
    return ai.TopkSelectorFwdOp(topk=3), (torch.randn(b, s, n, g, device=device), starts, ends)


CONTRACT = {"TopkSelectorFwdOp": _topk_selector}
