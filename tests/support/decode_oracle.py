"""Float64 decode attention written out per request and head: the oracle of the attention tests."""
import math

import torch


def float64_decode(q, keys, values, scale, softcap=None, valid=None):
    """q [S_q, H, Dk], keys [N, H_kv, Dk], values [N, H_kv, Dv] of one request; valid [S_q, N] bool or None.
    Query head h reads KV head h // (H / H_kv); a query with nothing valid gets zeros."""
    s_q, heads, _ = q.shape
    n, kv_heads = keys.shape[0], keys.shape[1]
    out = torch.zeros(s_q, heads, values.shape[-1], dtype=torch.float64)
    for h in range(heads):
        g = h // (heads // kv_heads)
        for i in range(s_q):
            s = (keys[:, g].double() @ q[i, h].double()) * scale
            if softcap is not None:
                s = softcap * torch.tanh(s / softcap)
            keep = torch.ones(n, dtype=torch.bool) if valid is None else valid[i]
            if not keep.any():
                continue
            w = torch.exp(s[keep] - s[keep].max())
            out[i, h] = (w / w.sum()) @ values[keep][:, g].double()
    return out


def gather_pages(pool, table_row, length, page_size):
    """The first `length` logical tokens of one request from a pool of pages."""
    rows = [int(table_row[j // page_size]) * page_size + j % page_size for j in range(length)]
    return pool[rows]


def default_scale(dim):
    return 1 / math.sqrt(dim)


def bottom_right(nq, nk, causal, left=-1, right=-1):
    """[nq, nk] bool: query i at key position i + nk - nq attends key j."""
    pos = torch.arange(nq)[:, None] + nk - nq
    j = torch.arange(nk)[None, :]
    valid = torch.ones(nq, nk, dtype=torch.bool)
    if causal:
        valid &= j <= pos
    if left >= 0:
        valid &= j >= pos - left
    if right >= 0:
        valid &= j <= pos + right
    return valid
