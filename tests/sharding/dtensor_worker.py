"""One rank of the DTensor checks (tests/sharding/test_dtensor.py spawns `world` of them over gloo).

For every op class of the compile-contract registry: its example inputs distributed with the primary
input (the first of the largest rank) sharded on each of its dims in turn (the other inputs of that
rank and size there alike, the rest replicated), and all replicated; the op on those DTensors against the op on the
whole tensors, and the collectives each call issued. Rank 0 writes what it saw as JSON.
"""
import json
import os
import sys
import traceback

import torch
import torch.distributed as dist

# A shard's sums may run in another order than the whole call's (ATen picks its blocking by size), so a
# 16-bit result may differ in its last bit: one rounding of the output dtype, relative.
ROUNDING = {torch.float16: 2 ** -10, torch.bfloat16: 2 ** -7}

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def _tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for v in x for t in _tensors(v)]
    return []


def _full(x):
    from torch.distributed.tensor import DTensor
    if not isinstance(x, DTensor):
        return x
    if x.dtype.itemsize == 1 and x.dtype.is_floating_point:  # gloo moves no float8: gather the bytes
        local = x.to_local().view(torch.uint8)
        raw = DTensor.from_local(local, x.device_mesh, x.placements, shape=x.shape, stride=x.stride())
        return raw.full_tensor().view(x.dtype)
    return x.full_tensor()


def _check(op, inputs, dinputs):
    """The op on whole and on distributed inputs; returns (ok, detail, collectives of the DTensor call).
    Compares the results, and the inputs too (in-place ops write them)."""
    from torch.distributed.tensor.debug import CommDebugMode
    want_in = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    want = op(*want_in)
    error = None
    with CommDebugMode() as comm:
        try:
            got = op(*dinputs)
        except Exception as e:  # every rank learns of it before the next collective, or they would hang
            error = f"{type(e).__name__}: {e}"
    collectives = comm.get_total_counts()
    failed = torch.tensor([error is not None], dtype=torch.int32)
    dist.all_reduce(failed)
    if failed.item():
        raise RuntimeError(error or "failed on another rank")
    pairs = list(zip(_tensors(want), _tensors(got))) + list(zip(_tensors(want_in), _tensors(list(dinputs))))
    for w, g in pairs:
        g = _full(g)
        rtol = ROUNDING.get(w.dtype, 1e-4)
        if w.shape != g.shape or w.dtype != g.dtype or not torch.allclose(
                _widened(w), _widened(g), rtol=rtol, atol=1e-5, equal_nan=True):
            return False, f"mismatch: want {w.dtype}{tuple(w.shape)} got {g.dtype}{tuple(g.shape)}", collectives
    return True, "", collectives


def _widened(t):
    """A common dtype to compare in; complex stays complex (a real cast drops the imaginary part)."""
    return t.to(torch.complex128) if t.is_complex() else t.double()


def run(rank, world, out_path, only):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

    import tileops
    from compile_contract import CONTRACT

    mesh = init_device_mesh("cpu", (world,))
    results = []
    for cls in sorted(CONTRACT):
        if only and cls not in only:
            continue
        torch.manual_seed(0)
        if os.environ.get("TILEOPS_DTENSOR_TRACE"):
            print(rank, cls, flush=True)
        op, inputs = CONTRACT[cls]("cpu")
        tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
        primary = max(tensors, key=lambda t: t.dim())
        layouts = [("dim", d) for d in range(primary.dim())] + [("replicate", None)]
        # gloo moves no float8: an op with float8 inputs is checked on replicated inputs made in place
        # (DTensor.from_local, no collective); sharded ones would need gathers gloo cannot do.
        float8_inputs = any(t.dtype.itemsize == 1 and t.dtype.is_floating_point for t in tensors)
        if float8_inputs:
            layouts = [("replicate", None)]
        for kind, d in layouts:
            def place(t):
                if kind == "dim" and t.dim() == primary.dim() and t.shape[d] == primary.shape[d]:
                    return [Shard(d)]
                return [Replicate()]
            row = {"op": cls, "shard": d}
            if os.environ.get("TILEOPS_DTENSOR_TRACE"):
                print(rank, cls, d, flush=True)
            try:
                make = (lambda t: DTensor.from_local(t.clone(), mesh, [Replicate()])) if float8_inputs else \
                    (lambda t: distribute_tensor(t.clone(), mesh, place(t)))
                dinputs = [make(t) if isinstance(t, torch.Tensor) else t for t in inputs]
                ok, detail, collectives = _check(op, inputs, dinputs)
                row.update(ok=ok, detail=detail, collectives=collectives)
            except Exception as e:  # recorded, not raised: one report for every op
                row.update(ok=False, detail=f"{type(e).__name__}: {e}"[:400], collectives=-1,
                           trace=traceback.format_exc()[-1500:])
            results.append(row)
    extras = {} if only else _extras(mesh)
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump({"world": world, "rows": results, "extras": extras,
                       "registered": tileops.sharding.register()}, f)


def _extras(mesh):
    """The cases a layout of the registry's examples does not reach: heads of q and k sharded
    together (RoPE, GQA), an out= buffer placed otherwise than the rule's output, and torch.compile."""
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.debug import CommDebugMode
    from tileops.norm import RMSNormFwdOp
    from tileops.position import RopeNeoxCachedFwdOp
    out = {}
    torch.manual_seed(1)
    positions = torch.arange(8) % 5
    q, k, cache = torch.randn(8, 8, 64), torch.randn(8, 4, 64), torch.randn(16, 64)  # GQA: 2 q heads a kv head
    rope = RopeNeoxCachedFwdOp()
    wq, wk = q.clone(), k.clone()
    rope(positions, wq, wk, cache)
    dq, dk = (distribute_tensor(t.clone(), mesh, [Shard(1)]) for t in (q, k))
    dp, dc = (distribute_tensor(t, mesh, [Replicate()]) for t in (positions, cache))
    with CommDebugMode() as comm:
        rope(dp, dq, dk, dc)
    out["rope_heads"] = {"collectives": comm.get_total_counts(), "placements": str(dq.placements),
                         "ok": torch.allclose(dq.full_tensor(), wq) and torch.allclose(dk.full_tensor(), wk)}

    x, w = torch.randn(8, 256), torch.randn(256)
    dx, dw = distribute_tensor(x, mesh, [Shard(0)]), distribute_tensor(w, mesh, [Replicate()])
    y = torch.empty(8, 256)
    for name, placement in (("out_rows", Shard(0)), ("out_cols", Shard(1))):
        dy = distribute_tensor(y.clone(), mesh, [placement])
        try:
            torch.ops.tileops.norm_rms_norm_fwd_out(dx, dw, dy, [256])
            out[name] = {"ok": torch.allclose(dy.full_tensor(), torch.ops.tileops.norm_rms_norm_fwd(x, w, [256]))}
        except RuntimeError as e:
            out[name] = {"error": str(e).splitlines()[0]}

    # A sharded reduced dim: each rank reduces its rows, the output stays Partial until read.
    reduced = {}
    for name, op in (("sum", "reduction_sum_fwd"), ("amax", "reduction_amax_fwd"), ("amin", "reduction_amin_fwd")):
        with CommDebugMode() as comm:
            r = getattr(torch.ops.tileops, op)(dx, [0], False)
        reduced[name] = {"collectives": comm.get_total_counts(), "placements": str(r.placements),
                         "ok": torch.allclose(r.full_tensor(), getattr(torch.ops.tileops, op)(x, [0], False),
                                              rtol=1e-5, atol=1e-5)}
    out["reduced_dim"] = reduced

    # BmmFwdOp as torch.bmm shards: M or N give a sharded d, K (both operands) a Partial(sum) one.
    a, b = torch.randn(2, 8, 16), torch.randn(2, 16, 12)
    want = torch.ops.tileops.gemm_bmm_fwd(a, b)
    bmm = {}
    for name, pa, pb in (("m", Shard(1), Replicate()), ("n", Replicate(), Shard(2)), ("k", Shard(2), Shard(1))):
        da, db = distribute_tensor(a, mesh, [pa]), distribute_tensor(b, mesh, [pb])
        with CommDebugMode() as comm:
            d = torch.ops.tileops.gemm_bmm_fwd(da, db)
        bmm[name] = {"collectives": comm.get_total_counts(), "placements": str(d.placements),
                     "ok": torch.allclose(d.full_tensor(), want, rtol=1e-5, atol=1e-5)}
    out["bmm"] = bmm

    # GemmFwdOp as torch.mm shards, whichever operand is stored transposed.
    gemm = {}
    for ta, tb in ((False, True), (True, False)):
        a = torch.randn(16, 8) if ta else torch.randn(8, 16)    # M = 8, K = 16
        b = torch.randn(12, 16) if tb else torch.randn(16, 12)  # N = 12
        want = torch.ops.tileops.gemm_fwd(a, b, trans_a=ta, trans_b=tb)
        m_a, k_a = (1, 0) if ta else (0, 1)
        k_b, n_b = (1, 0) if tb else (0, 1)
        for name, pa, pb in (("m", Shard(m_a), Replicate()), ("n", Replicate(), Shard(n_b)),
                             ("k", Shard(k_a), Shard(k_b))):
            da, db = distribute_tensor(a, mesh, [pa]), distribute_tensor(b, mesh, [pb])
            with CommDebugMode() as comm:
                d = torch.ops.tileops.gemm_fwd(da, db, trans_a=ta, trans_b=tb)
            gemm[f"{name} ta={ta} tb={tb}"] = {
                "collectives": comm.get_total_counts(), "placements": str(d.placements),
                "ok": torch.allclose(d.full_tensor(), want, rtol=1e-5, atol=1e-5)}
    out["gemm"] = gemm

    # GQA decode with its heads sharded: whole KV groups per rank when H and H_kv split evenly (0
    # collectives); H_kv = 3 splits over neither 2 nor 4 ranks and is gathered rather than mispaired.
    gqa = {}
    for kv_heads in (4, 3):
        q = torch.randn(2, 4 * kv_heads, 16, dtype=torch.float16)
        k, v = (torch.randn(2, 5, kv_heads, 16, dtype=torch.float16) for _ in range(2))
        want = torch.ops.tileops.attention_grouped_query_attention_decode_with_kv_cache_fwd(q, k, v)
        dq = distribute_tensor(q, mesh, [Shard(1)])
        dk, dv = (distribute_tensor(t, mesh, [Shard(2)]) for t in (k, v))
        with CommDebugMode() as comm:
            o = torch.ops.tileops.attention_grouped_query_attention_decode_with_kv_cache_fwd(dq, dk, dv)
        gqa[f"kv_heads={kv_heads}"] = {"collectives": comm.get_total_counts() > 0, "placements": str(o.placements),
                                       "ok": torch.allclose(o.full_tensor(), want, rtol=1e-3, atol=1e-3)}
    out["gqa"] = gqa

    norm = RMSNormFwdOp((256,))

    def block(a, b):
        return torch.ops.tileops.activation_silu_fwd(norm(a, b))
    want = block(x, w)
    got = torch.compile(block, fullgraph=True)(dx, dw)
    out["compile"] = {"ok": torch.allclose(got.full_tensor(), want), "placements": str(got.placements)}
    return out


def main(rank, world, port, out_path, only):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        run(rank, world, out_path, only)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    world, port, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    only = set(sys.argv[4].split(",")) if len(sys.argv) > 4 and sys.argv[4] else set()
    torch.multiprocessing.spawn(main, args=(world, port, out_path, only), nprocs=world)
