"""Decode attention benchmarks on a GPU: GroupedQueryAttentionDecodeWithKVCacheFwdOp (contiguous), its
paged form and MultiHeadLatentAttentionDecodeWithKVCacheFwdOp on the manifest's workloads, through a
chosen target (default nvrtc, the split-KV kernels), beside torch's scaled_dot_product_attention
(eager and compiled, GQA through enable_gqa; the paged rows gather nothing for torch: it reads the
same tokens contiguous; MLA as one KV head of the concatenated latent and rope dims, the latent as
value) and a device copy of the KV bytes the op must read; and the forward over whole sequences
(GroupedQueryAttentionFwdOp, MultiHeadAttentionFwdOp, the sliding-window op, the packed prefill with
requests of one length: TFLOPS over the attended pairs beside SDPA, a copy of q, k, v and o); the
chunked prefill over a paged cache (GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp, head dims 64 and
128 of the manifest's workloads: SDPA reads the same keys contiguous in q's dtype, with neither the
rotation nor the append, softcap rows without it). A benchmark, not a test.
    python3 scripts/bench/bench_attention.py [--json out.json] [--quick] [--target T] [--ops A,B]
    (--ops GroupedQueryAttentionFwdOp,MultiHeadAttentionFwdOp,GroupedQueryAttentionSlidingWindowFwdOp,
     GroupedQueryAttentionPrefillFwdOp for the forward over whole sequences,
     GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp for the paged chunked prefill)
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

import harness  # scripts/bench/harness.py
import tileops
from bench_gemm import print_rows  # the GEMM table's columns (TFLOPS, vs eager, vs best)

ops = torch.ops.tileops


def sdpa_decode(q, k, v):
    """q [B, H, D], k/v [B, N, H_kv, D] -> [B, H, D] through torch's SDPA."""
    o = F.scaled_dot_product_attention(q.unsqueeze(2), k.transpose(1, 2), v.transpose(1, 2), enable_gqa=True)
    return o.squeeze(2)


def gqa_rows(target: str, quick: bool) -> list[dict]:
    rows = []
    for w in harness.manifest_workloads("attention", "GroupedQueryAttentionDecodeWithKVCacheFwdOp")[: 2 if quick else None]:
        (b, h, d), (_, n, h_kv, _) = w["q"], w["k"]
        softcap = w.get("params", {}).get("softcap")
        for dname in w["dtypes"]:
            dtype = harness.DTYPES[dname]
            kv_bytes = 2 * b * n * h_kv * d * dtype.itemsize
            n_sets = harness.n_sets_for(kv_bytes)
            qs = [torch.randn(b, h, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
            ks = [torch.randn(b, n, h_kv, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
            vs = [torch.randn(b, n, h_kv, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
            flat = [torch.empty(kv_bytes // 2, device="cuda", dtype=torch.uint8) for _ in range(2 * n_sets)]
            compiled = harness.compiled(sdpa_decode)
            factories = {
                "ours": lambda i: (lambda: ops.attention_grouped_query_attention_decode_with_kv_cache_fwd(
                    qs[i], ks[i], vs[i], softcap=softcap, target=target)),
                "copy": lambda i: (lambda: flat[2 * i + 1].copy_(flat[2 * i])),
            }
            if softcap is None:  # SDPA has no softcap
                factories["eager"] = lambda i: (lambda: sdpa_decode(qs[i], ks[i], vs[i]))
                factories["compile"] = lambda i: (lambda: compiled(qs[i], ks[i], vs[i]))
            row = harness.measure(w["name"], f"{b}x{h}/{h_kv}x{n}x{d}", dtype, kv_bytes, n_sets, factories)
            row["op"] = "GroupedQueryAttentionDecodeWithKVCacheFwdOp"
            rows.append(row)
            del qs, ks, vs, flat
    return rows


def gqa_paged_rows(target: str, quick: bool) -> list[dict]:
    """Every request full (num_pages * page_size tokens), its pages shuffled through the pool."""
    rows = []
    for w in harness.manifest_workloads("attention", "GroupedQueryAttentionDecodePagedWithKVCacheFwdOp")[: 2 if quick else None]:
        (b, h, d), (n_kv, h_kv, _), (_, pages) = w["q"], w["k"], w["block_table"]
        page_size = w["params"]["page_size"]
        dtype = harness.DTYPES[w["dtypes"][0]]
        pool_pages = n_kv // page_size
        tokens = pages * page_size
        kv_bytes = 2 * b * tokens * h_kv * d * dtype.itemsize
        n_sets = harness.n_sets_for(kv_bytes)
        q = [torch.randn(b, h, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
        k = [torch.randn(n_kv, h_kv, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
        v = [torch.randn(n_kv, h_kv, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
        table = torch.stack([torch.randperm(pool_pages)[:pages] for _ in range(b)]).to("cuda", torch.int32)
        real = torch.full((b,), tokens, device="cuda", dtype=torch.int32)
        kc = [torch.randn(b, tokens, h_kv, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
        vc = [torch.randn(b, tokens, h_kv, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
        flat = [torch.empty(kv_bytes // 2, device="cuda", dtype=torch.uint8) for _ in range(2 * n_sets)]
        row = harness.measure(w["name"], f"{b}x{h}/{h_kv}x{tokens}x{d} p{page_size}", dtype, kv_bytes, n_sets, {
            "ours": lambda i: (lambda: ops.attention_grouped_query_attention_decode_paged_with_kv_cache_fwd(
                q[i], k[i], v[i], real, table, page_size=page_size, target=target)),
            "eager": lambda i: (lambda: sdpa_decode(q[i], kc[i], vc[i])),
            "copy": lambda i: (lambda: flat[2 * i + 1].copy_(flat[2 * i])),
        })
        row["op"] = "GroupedQueryAttentionDecodePagedWithKVCacheFwdOp"
        rows.append(row)
        del q, k, v, kc, vc, flat
    return rows


def sdpa_mla(q, q_pe, k, k_pe):
    """DeepSeek's absorbed MLA through SDPA: one KV head of [latent, rope] keys, the latent as value."""
    qc = torch.cat([q, q_pe], -1).unsqueeze(2)                    # [B, H, 1, D + PE]
    kc = torch.cat([k, k_pe], -1).transpose(1, 2)                 # [B, 1, N, D + PE]
    return F.scaled_dot_product_attention(qc, kc, k.transpose(1, 2), enable_gqa=True).squeeze(2)


def mla_rows(target: str, quick: bool) -> list[dict]:
    rows = []
    for w in harness.manifest_workloads("attention", "MultiHeadLatentAttentionDecodeWithKVCacheFwdOp")[: 2 if quick else None]:
        (b, h, d), (_, n, _, _) = w["q"], w["k"]
        pe = w["params"]["pe_dim"]
        for dname in w["dtypes"]:
            dtype = harness.DTYPES[dname]
            kv_bytes = b * n * (d + pe) * dtype.itemsize
            n_sets = harness.n_sets_for(kv_bytes)
            qs = [torch.randn(b, h, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
            qps = [torch.randn(b, h, pe, device="cuda", dtype=dtype) for _ in range(n_sets)]
            ks = [torch.randn(b, n, 1, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
            kps = [torch.randn(b, n, 1, pe, device="cuda", dtype=dtype) for _ in range(n_sets)]
            flat = [torch.empty(kv_bytes, device="cuda", dtype=torch.uint8) for _ in range(2 * n_sets)]
            compiled = harness.compiled(sdpa_mla)
            row = harness.measure(w["name"], f"{b}x{h}x{n}x{d}+{pe}", dtype, kv_bytes, n_sets, {
                "ours": lambda i: (lambda: ops.attention_multi_head_latent_attention_decode_with_kv_cache_fwd(
                    qs[i], qps[i], ks[i], kps[i], pe_dim=pe, target=target)),
                "eager": lambda i: (lambda: sdpa_mla(qs[i], qps[i], ks[i], kps[i])),
                "compile": lambda i: (lambda: compiled(qs[i], qps[i], ks[i], kps[i])),
                "copy": lambda i: (lambda: flat[2 * i + 1].copy_(flat[2 * i])),
            })
            row["op"] = "MultiHeadLatentAttentionDecodeWithKVCacheFwdOp"
            rows.append(row)
            del qs, qps, ks, kps, flat
    return rows


def sdpa_bshd(q, k, v, causal, mask=None):
    """[B, S, H, D] tensors through SDPA's [B, H, S, D] (what a user writes; flash or cuDNN underneath,
    a memory-efficient kernel with a mask)."""
    o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask,
                                       is_causal=causal, enable_gqa=True)
    return o.transpose(1, 2)


def window_mask(s: int, causal: bool, left: int, right: int) -> torch.Tensor:
    """[S, S] bool: token i attends key j (the manifest's rule; -1 leaves a side open)."""
    i, j = torch.arange(s, device="cuda")[:, None], torch.arange(s, device="cuda")[None, :]
    keep = torch.ones(s, s, dtype=torch.bool, device="cuda")
    if causal:
        keep &= j <= i
    if left >= 0:
        keep &= j >= i - left
    if right >= 0:
        keep &= j <= i + right
    return keep


def prefill_rows(op_class: str, target: str, quick: bool) -> list[dict]:
    """The forward over whole sequences, [B, S, H, D] (the sliding-window op: SDPA with the window as
    a mask; the packed op: requests of one length, so SDPA reads them as a batch)."""
    packed = op_class == "GroupedQueryAttentionPrefillFwdOp"
    fn = {"GroupedQueryAttentionFwdOp": ops.attention_grouped_query_attention_fwd,
          "MultiHeadAttentionFwdOp": ops.attention_multi_head_attention_fwd,
          "GroupedQueryAttentionSlidingWindowFwdOp": ops.attention_grouped_query_attention_sliding_window_fwd,
          "GroupedQueryAttentionPrefillFwdOp": ops.attention_grouped_query_attention_prefill_fwd}[op_class]
    rows = []
    for w in harness.manifest_workloads("attention", op_class)[: 2 if quick else None]:
        params = dict(w.get("params", {}))
        if packed:
            if w.get("q_scale") is not None or params.get("softcap") is not None:
                continue  # FP8 scales and softcap: SDPA has neither
            (total, h, d), h_kv, b = w["q"], w["k"][1], w["cu_seqlens_q"][0] - 1
            s = total // b
        else:
            b, s, h, d = w["q"]
            h_kv = w.get("k", w["q"])[2]
        causal = params.get("is_causal", True)
        left, right = params.get("window_size_left", -1), params.get("window_size_right", -1)
        mask = window_mask(s, causal, left, right)
        windowed = left >= 0 or right >= 0
        for dname in w["dtypes"]:
            dtype = harness.DTYPES[dname]
            nbytes = (2 * b * s * h * d + 2 * b * s * h_kv * d) * dtype.itemsize
            n_sets = harness.n_sets_for(nbytes)
            qs = [torch.randn(b, s, h, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
            ks = [torch.randn(b, s, h_kv, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
            vs = [torch.randn(b, s, h_kv, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
            flat = [torch.empty(nbytes // 2, device="cuda", dtype=torch.uint8) for _ in range(2 * n_sets)]
            cu = torch.arange(b + 1, device="cuda", dtype=torch.int32) * s

            def ours(i):
                if packed:
                    rows_of = lambda t: t.view(b * s, *t.shape[2:])  # noqa: E731
                    return lambda: fn(rows_of(qs[i]), rows_of(ks[i]), rows_of(vs[i]), cu, cu, None, None, None,
                                      **params, target=target)
                return lambda: fn(qs[i], ks[i], vs[i], **params, target=target)

            def peer(f):
                if windowed:
                    return lambda i: (lambda: f(qs[i], ks[i], vs[i], False, mask))
                return lambda i: (lambda: f(qs[i], ks[i], vs[i], causal))

            compiled = harness.compiled(sdpa_bshd)
            row = harness.measure(w["name"], f"{b}x{s}x{h}/{h_kv}x{d}", dtype, nbytes, n_sets, {
                "ours": ours,
                "eager": peer(sdpa_bshd),
                "compile": peer(compiled),
                "copy": lambda i: (lambda: flat[2 * i + 1].copy_(flat[2 * i])),
            })
            flops = 4 * b * h * d * int(mask.sum())
            row["op"], row["tflops"] = op_class, flops / (row["ours_us"] * 1e-6) / 1e12
            rows.append(row)
            del qs, ks, vs, flat
    return rows


def paged_prefill_rows(target: str, quick: bool) -> list[dict]:
    """Requests of one chunk length over caches of one length (the workloads' shapes), every page of
    a request's cache and chunk shuffled through the pool."""
    rows = []
    for w in harness.manifest_workloads("attention", "GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp")[: 2 if quick else None]:
        (total, h, d), (n_pool, h_kv, _), (b, pages) = w["q"], w["k_pages"], w["block_table"]
        if d not in (64, 128):
            continue  # the kernel's head dims: others are the reference's
        params = dict(w["params"])
        page_size, s = params["page_size"], total // b
        n_old = pages * page_size - s  # each request's cache fills its pages with the chunk
        dtype = torch.float16
        pool_dtype = harness.DTYPES[w["dtypes"][0]]
        fp8 = pool_dtype == torch.float8_e4m3fn
        nbytes = (2 * total * h + 2 * total * h_kv) * d * dtype.itemsize + 2 * b * (n_old + s) * h_kv * d * pool_dtype.itemsize
        n_sets = harness.n_sets_for(nbytes)
        q = [torch.randn(total, h, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
        kn = [torch.randn(total, h_kv, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
        vn = [torch.randn(total, h_kv, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
        kp = [torch.randn(n_pool, h_kv, d, device="cuda").to(pool_dtype) for _ in range(n_sets)]
        vp = [torch.randn(n_pool, h_kv, d, device="cuda").to(pool_dtype) for _ in range(n_sets)]
        table = torch.randperm(n_pool // page_size)[: b * pages].view(b, pages).to("cuda", torch.int32)
        cu = torch.arange(b + 1, device="cuda", dtype=torch.int32) * s
        seqlens = torch.full((b,), n_old, device="cuda", dtype=torch.int32)
        one = torch.ones(1, device="cuda") if fp8 else None
        qb = [x.view(b, s, h, d) for x in q]
        kc = [torch.randn(b, n_old + s, h_kv, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
        vc = [torch.randn(b, n_old + s, h_kv, d, device="cuda", dtype=dtype) for _ in range(n_sets)]
        mask = torch.ones(s, n_old + s, dtype=torch.bool, device="cuda").tril(n_old)  # query i: keys <= n_old + i
        flat = [torch.empty(nbytes // 2, device="cuda", dtype=torch.uint8) for _ in range(2 * n_sets)]
        compiled = harness.compiled(sdpa_bshd)
        factories = {
            "ours": lambda i: (lambda: ops.attention_grouped_query_attention_prefill_paged_with_kv_cache_fwd_writes_k_pages_writes_v_pages(
                q[i], kn[i], vn[i], kp[i], vp[i], one, one, cu, seqlens, table, **params, target=target)),
            "copy": lambda i: (lambda: flat[2 * i + 1].copy_(flat[2 * i])),
        }
        if params.get("softcap") is None:  # SDPA has no softcap
            factories["eager"] = lambda i: (lambda: sdpa_bshd(qb[i], kc[i], vc[i], False, mask))
            factories["compile"] = lambda i: (lambda: compiled(qb[i], kc[i], vc[i], False, mask))
        row = harness.measure(w["name"], f"{b}x{s}+{n_old}x{h}/{h_kv}x{d} p{page_size}", pool_dtype, nbytes, n_sets,
                              factories)
        flops = 4 * b * h * d * int(mask.sum())
        row["op"], row["tflops"] = "GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp", flops / (row["ours_us"] * 1e-6) / 1e12
        rows.append(row)
        del q, kn, vn, kp, vp, kc, vc, flat
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="the first few workloads only")
    ap.add_argument("--target", default="nvrtc", help="the tileops target timed as 'ours'")
    ap.add_argument("--ops", default="GroupedQueryAttentionDecodeWithKVCacheFwdOp,"
                    "GroupedQueryAttentionDecodePagedWithKVCacheFwdOp,MultiHeadLatentAttentionDecodeWithKVCacheFwdOp",
                    help="the op classes whose rows are timed (comma-separated)")
    args = ap.parse_args()
    tileops.load()
    tables = {"GroupedQueryAttentionDecodeWithKVCacheFwdOp": gqa_rows,
              "GroupedQueryAttentionDecodePagedWithKVCacheFwdOp": gqa_paged_rows,
              "MultiHeadLatentAttentionDecodeWithKVCacheFwdOp": mla_rows}
    rows = {op: fn(args.target, args.quick) for op, fn in tables.items() if op in args.ops.split(",")}
    for op in ("GroupedQueryAttentionFwdOp", "MultiHeadAttentionFwdOp", "GroupedQueryAttentionSlidingWindowFwdOp",
               "GroupedQueryAttentionPrefillFwdOp"):
        if op in args.ops.split(","):
            rows[op] = prefill_rows(op, args.target, args.quick)
    if "GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp" in args.ops.split(","):
        rows["GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp"] = paged_prefill_rows(args.target, args.quick)
    harness.write_json(args.json, {"device": torch.cuda.get_device_properties(0).name, "torch": torch.__version__,
                                   "target": args.target, "kernels": rows})
    for op, r in rows.items():
        if "tflops" in (r[0] if r else {}):
            print_rows(f"{op} (target {args.target}) beside torch SDPA", r)
        else:
            harness.print_table(f"{op} (target {args.target}) beside torch SDPA", r)


if __name__ == "__main__":
    main()
