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


def _mha_fwd(device):
    import tileops.attention as attention
    return attention.MultiHeadAttentionFwdOp(is_causal=True), tuple(
        torch.randn(4, 6, 8, 16, device=device, dtype=torch.bfloat16) for _ in range(3))


def _gqa_fwd(device):
    import tileops.attention as attention
    q = torch.randn(4, 6, 8, 16, device=device, dtype=torch.float16)
    k, v = (torch.randn(4, 6, 4, 16, device=device, dtype=torch.float16) for _ in range(2))
    return attention.GroupedQueryAttentionFwdOp(is_causal=True), (q, k, v)


def _gqa_window(device):
    import tileops.attention as attention
    q = torch.randn(4, 6, 8, 16, device=device, dtype=torch.bfloat16)
    k, v = (torch.randn(4, 6, 4, 16, device=device, dtype=torch.bfloat16) for _ in range(2))
    return attention.GroupedQueryAttentionSlidingWindowFwdOp(window_size_left=2), (q, k, v)


def _bwd(device, heads, kv_heads):
    q = torch.randn(4, 6, heads, 16, device=device, dtype=torch.float16)
    k, v = (torch.randn(4, 6, kv_heads, 16, device=device, dtype=torch.float16) for _ in range(2))
    o, dout = torch.randn_like(q), torch.randn_like(q)
    lse = torch.randn(4, heads, 6, device=device) + 3  # any finite values: the formula is what is checked
    return q, k, v, o, dout, lse


def _mha_bwd(device):
    import tileops.attention as attention
    return attention.MultiHeadAttentionBwdOp(is_causal=False), _bwd(device, 8, 8)


def _gqa_bwd(device):
    import tileops.attention as attention
    return attention.GroupedQueryAttentionBwdOp(), _bwd(device, 8, 4)


def _gqa_window_varlen(device):
    import tileops.attention as attention
    cu_q = torch.tensor([0, 3, 3, 7, 12], dtype=torch.int32, device=device)
    cu_k = torch.tensor([0, 5, 6, 10, 14], dtype=torch.int32, device=device)
    return attention.GroupedQueryAttentionSlidingWindowVarlenFwdOp(max_seqlen_q=5, window_size_left=2), (
        torch.randn(12, 8, 16, device=device, dtype=torch.float16),
        torch.randn(14, 4, 16, device=device, dtype=torch.float16),
        torch.randn(14, 4, 16, device=device, dtype=torch.float16), cu_q, cu_k)


def _gqa_prefill(device):
    import tileops.attention as attention
    cu_q = torch.tensor([0, 3, 3, 7, 12], dtype=torch.int32, device=device)
    cu_kv = torch.tensor([0, 5, 6, 10, 14], dtype=torch.int32, device=device)
    return attention.GroupedQueryAttentionPrefillFwdOp(max_seqlen_q=5, max_seqlen_kv=5, softcap=4.0,
                                                       window_size_left=3), (
        torch.randn(12, 8, 16, device=device, dtype=torch.bfloat16),
        torch.randn(14, 4, 16, device=device, dtype=torch.bfloat16),
        torch.randn(14, 4, 16, device=device, dtype=torch.bfloat16), cu_q, cu_kv)


def _gqa_prefill_paged(device):
    import tileops.attention as attention
    page_size, pages, b = 3, 3, 4
    pool_pages = b * pages + 1
    table = torch.randperm(pool_pages)[: b * pages].view(b, pages).to(torch.int32)
    k_pages = torch.randn(pool_pages * page_size, 4, 16, device=device, dtype=torch.float16)
    v_pages = torch.randn(pool_pages * page_size, 4, 16, device=device, dtype=torch.float16)
    cu_q = torch.tensor([0, 3, 3, 7, 12], dtype=torch.int32, device=device)
    cached = torch.tensor([2, 9, 0, 4], dtype=torch.int32, device=device)  # + new: 5, 9, 4, 9 of 9 slots
    return attention.GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp(
        max_pages_per_req=pages, page_size=page_size, max_seqlen_q=5, fuse_rope=True, max_position=16), (
        torch.randn(12, 8, 16, device=device, dtype=torch.float16),
        torch.randn(12, 4, 16, device=device, dtype=torch.float16),
        torch.randn(12, 4, 16, device=device, dtype=torch.float16), k_pages, v_pages, None, None, cu_q, cached,
        table.to(device))


def _dsa_decode(device):
    import tileops.attention as attention
    idx = torch.randint(-1, 10, (4, 6, 4, 5), dtype=torch.int32, device=device)
    return attention.DeepSeekSparseAttentionDecodeWithKVCacheFwdOp(dim_tail=4, topk=5, stride_kv=1,
                                                                   q_start_index_s=3), (
        torch.randn(4, 6, 8, 12, device=device, dtype=torch.bfloat16),
        torch.randn(4, 10, 4, 12, device=device, dtype=torch.bfloat16), idx)


CONTRACT = {
    "GroupedQueryAttentionPrefillFwdOp": _gqa_prefill,
    "GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp": _gqa_prefill_paged,
    "DeepSeekSparseAttentionDecodeWithKVCacheFwdOp": _dsa_decode,
    "GroupedQueryAttentionSlidingWindowVarlenFwdOp": _gqa_window_varlen,
    "MultiHeadAttentionFwdOp": _mha_fwd,
    "GroupedQueryAttentionFwdOp": _gqa_fwd,
    "GroupedQueryAttentionSlidingWindowFwdOp": _gqa_window,
    "MultiHeadAttentionBwdOp": _mha_bwd,
    "GroupedQueryAttentionBwdOp": _gqa_bwd,
    "MultiHeadAttentionDecodeWithKVCacheFwdOp": _mha_decode,
    "MultiHeadAttentionDecodePagedWithKVCacheFwdOp": _mha_decode_paged,
    "GroupedQueryAttentionDecodeWithKVCacheFwdOp": _gqa_decode,
    "GroupedQueryAttentionDecodePagedWithKVCacheFwdOp": _gqa_decode_paged,
    "MultiHeadLatentAttentionDecodeWithKVCacheFwdOp": _mla_decode,
}
