import torch

# Batch 4, queries 4 and KV groups 2 split over 2 and 4 ranks.


def _topk_selector(device):
    import tileops.attention_indexing as ai
    b, s, n, g = 4, 4, 12, 2
    starts = torch.tensor([0, 2, 5, 0], dtype=torch.int32, device=device).repeat(b, 1)
    ends = torch.tensor([12, 9, 6, 0], dtype=torch.int32, device=device).repeat(b, 1)
    return ai.TopkSelectorFwdOp(topk=3), (torch.randn(b, s, n, g, device=device), starts, ends)


def _lightning_indexer(device):
    import tileops.attention_indexing as ai
    b, s, h, g, n, d = 4, 4, 8, 2, 10, 16
    # bfloat16: the op's own quantisation, and inputs gloo can shard (float8 ones it cannot move)
    q = torch.randn(b, s, h, d, device=device, dtype=torch.bfloat16)
    k = torch.randn(b, n, g, d, device=device, dtype=torch.bfloat16)
    ks = torch.tensor([0, 2, 5, -1], dtype=torch.int32, device=device)
    ke = torch.tensor([10, 9, 6, 3], dtype=torch.int32, device=device)
    return ai.FP8LightningIndexerFwdOp(), (q, k, torch.randn(s, h, device=device), ks, ke)


CONTRACT = {"TopkSelectorFwdOp": _topk_selector, "FP8LightningIndexerFwdOp": _lightning_indexer}
