import torch

# Batch 4 and heads 8 (KV heads 4) split over 2 and 4 ranks; no other dim shares their sizes.


def _paged(device, kv_heads, d, page_size=4, pages=2, b=4):
    pool_pages = b * pages + 1
    table = torch.randperm(pool_pages)[: b * pages].view(b, pages).to(torch.int32)
    k = torch.randn(pool_pages * page_size, kv_heads, d, device=device, dtype=torch.float16)
    v = torch.randn(pool_pages * page_size, kv_heads, d, device=device, dtype=torch.float16)
    real = torch.tensor([8, 1, 0, 5], dtype=torch.int32)
    return k, v, real.to(device), table.to(device)


def _mha_decode(device):
    import tileops.attention as attention
    return attention.MultiHeadAttentionDecodeWithKVCacheFwdOp(), (
        torch.randn(4, 2, 8, 16, device=device, dtype=torch.float16),
        torch.randn(4, 6, 8, 16, device=device, dtype=torch.float16),
        torch.randn(4, 6, 8, 16, device=device, dtype=torch.float16))


def _mha_decode_paged(device):
    import tileops.attention as attention
    k, v, real, table = _paged(device, 8, 16)
    return attention.MultiHeadAttentionDecodePagedWithKVCacheFwdOp(page_size=4, is_causal=True), (
        torch.randn(4, 2, 8, 16, device=device, dtype=torch.float16), k, v, real, table)


def _gqa_decode(device):
    import tileops.attention as attention
    return attention.GroupedQueryAttentionDecodeWithKVCacheFwdOp(softcap=3.0), (
        torch.randn(4, 8, 16, device=device, dtype=torch.float16),
        torch.randn(4, 6, 4, 16, device=device, dtype=torch.float16),
        torch.randn(4, 6, 4, 16, device=device, dtype=torch.float16))


def _gqa_decode_paged(device):
    import tileops.attention as attention
    k, v, real, table = _paged(device, 4, 16)
    return attention.GroupedQueryAttentionDecodePagedWithKVCacheFwdOp(page_size=4, sm_scale=0.2), (
        torch.randn(4, 8, 16, device=device, dtype=torch.float16), k, v, real, table)


def _mla_decode(device):
    import tileops.attention as attention
    return attention.MultiHeadLatentAttentionDecodeWithKVCacheFwdOp(pe_dim=6), (
        torch.randn(4, 8, 16, device=device, dtype=torch.bfloat16),
        torch.randn(4, 8, 6, device=device, dtype=torch.bfloat16),
        torch.randn(4, 10, 1, 16, device=device, dtype=torch.bfloat16),
        torch.randn(4, 10, 1, 6, device=device, dtype=torch.bfloat16))


CONTRACT = {
    "MultiHeadAttentionDecodeWithKVCacheFwdOp": _mha_decode,
    "MultiHeadAttentionDecodePagedWithKVCacheFwdOp": _mha_decode_paged,
    "GroupedQueryAttentionDecodeWithKVCacheFwdOp": _gqa_decode,
    "GroupedQueryAttentionDecodePagedWithKVCacheFwdOp": _gqa_decode_paged,
    "MultiHeadLatentAttentionDecodeWithKVCacheFwdOp": _mla_decode,
}
