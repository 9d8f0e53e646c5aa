"""A Llama-style decoder block on tileops ops, tensor- and sequence-parallel with torch's parallelize_module.

    PYTHONPATH=python python examples/tensor_parallel.py      # --ranks 4; --device cpu

Starts two ranks itself: gloo on CPU, NCCL when two GPUs are present. Each rank builds the same block
(same seed), runs it whole as the one-process reference, then shards a copy with a torchtitan-style plan:
the norms sequence-parallel (tokens split across ranks, the tileops norm ops called on DTensors), q/k/v
and gate_up colwise (each rank its own heads and hidden units), o and down rowwise, reduce-scattered back
to token shards. Prints max |sharded - one process|, the collectives of one sharded forward (and of
each tileops call in it), and max |torch.compile(fullgraph=True) - eager| of the sharded block.
Exits 1 when a result differs.
"""
import copy
import os
import socket
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import tileops  # noqa: F401  (loads the library; its DTensor rules register with torch.distributed.tensor)
from tileops.activation import SiluAndMulFwdOp
from tileops.norm import FusedAddRMSNormFwdOp, RMSNormFwdOp
from tileops.position import RopeNeoxCachedFwdOp

DIM, HEADS, KV_HEADS, HIDDEN = 256, 8, 4, 512  # GQA: two q heads a kv head
BATCH, SEQ = 2, 32
TOL = 1e-4  # float32; the sharded block sums its matmuls in another order


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(dim))
        self.op = RMSNormFwdOp((dim,), eps=1e-6)  # an Op is built once: its params are fixed

    def forward(self, x):
        return self.op(x, self.weight)


class FusedAddRMSNorm(nn.Module):
    """y = rms_norm(x + residual); returns (y, x + residual), the new residual stream."""

    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(dim))
        self.op = FusedAddRMSNormFwdOp((dim,), eps=1e-6)

    def forward(self, x, residual):
        return self.op(x, residual, self.weight)


class Attention(nn.Module):
    def __init__(self, dim, heads, kv_heads):
        super().__init__()
        self.head_dim = dim // heads
        self.wq = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, dim, bias=False)
        self.rope = RopeNeoxCachedFwdOp()

    def forward(self, x, positions, cos_sin_cache):
        b, s, _ = x.shape
        # [tokens, heads, head_dim], as the RoPE op takes q and k; sharded, these are DTensors split on heads
        q = self.wq(x).view(b * s, -1, self.head_dim)
        k = self.wk(x).view(b * s, -1, self.head_dim)
        self.rope(positions, q, k, cos_sin_cache)  # in place; heads of q and k split alike: no collective
        q, k, v = (_local(t).view(b, s, -1, self.head_dim).transpose(1, 2) for t in (q, k, self.wv(x)))
        # The catalogue has no attention op yet: torch's SDPA, on this rank's heads (GQA groups stay whole)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.wo(o.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.gate_up = nn.Linear(dim, 2 * hidden, bias=False)  # rows: [gate; up], as checkpoints store them
        self.down = nn.Linear(hidden, dim, bias=False)
        self.act = SiluAndMulFwdOp()
        self.groups = 1  # gate_up's rows come in this many [gate_r; up_r] groups (pair_gate_up_rows)

    def forward(self, x):
        # SiLU-and-mul pairs the halves of a row; each group is one [gate_r | up_r] row of its own
        h = self.act(self.gate_up(x).unflatten(-1, (self.groups, -1)))
        return self.down(h.flatten(-2))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm = RMSNorm(DIM)
        self.attention = Attention(DIM, HEADS, KV_HEADS)
        self.ffn_norm = FusedAddRMSNorm(DIM)
        self.feed_forward = FeedForward(DIM, HIDDEN)

    def forward(self, x, positions, cos_sin_cache):
        y, h = self.ffn_norm(self.attention(self.attention_norm(x), positions, cos_sin_cache), x)
        return h + self.feed_forward(y)


def _local(t):
    """The rank's own part of a DTensor (a plain tensor in the one-process block)."""
    from torch.distributed.tensor import DTensor
    return t.to_local() if isinstance(t, DTensor) else t


def rope_cache(max_pos, rot_dim, base=10000.0):
    """vLLM's cos_sin_cache: row p is [cos(p f_i) | sin(p f_i)], f_i = base^(-2i/rot_dim)."""
    inv_freq = base ** (-torch.arange(0, rot_dim, 2, dtype=torch.float32) / rot_dim)
    angles = torch.outer(torch.arange(max_pos, dtype=torch.float32), inv_freq)
    return torch.cat([angles.cos(), angles.sin()], dim=-1)


# ---- the sharding ------------------------------------------------------------------------------------------
def pair_gate_up_rows(ff: FeedForward, world: int) -> None:
    """Colwise gives rank r a contiguous block of gate_up's rows, and SiLU-and-mul needs each rank's gate
    rows beside its own up rows: reorder [gate; up] to [gate_0; up_0; gate_1; up_1; ...] (vLLM's merged
    column-parallel layout), as a checkpoint loader would."""
    hidden = ff.down.in_features
    w = ff.gate_up.weight.detach()
    ff.gate_up.weight = nn.Parameter(w.view(2, world, hidden // world, -1).transpose(0, 1).reshape(2 * hidden, -1))
    ff.groups = world


def parallelize(block: Block, mesh) -> Block:
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel, parallelize_module)

    class SequenceParallelAllInputs(SequenceParallel):
        """torch's SequenceParallel passes on its module's first input only; the fused norm takes two."""

        @staticmethod
        def _prepare_input_fn(sequence_sharding, mod, inputs, device_mesh):
            return tuple(SequenceParallel._prepare_input_fn(sequence_sharding, mod, (t,), device_mesh)
                         for t in inputs)

    pair_gate_up_rows(block.feed_forward, mesh.size())
    tokens, whole = Shard(1), Replicate()
    # The residual stream stays a DTensor split on tokens (Shard(1)); the matmuls gather it (all-gather)
    # and hand their partial sums back as token shards (reduce-scatter): two of each a block.
    return parallelize_module(block, mesh, {
        "attention_norm": SequenceParallel(),
        "attention": PrepareModuleInput(input_layouts=(tokens, whole, whole),
                                        desired_input_layouts=(whole, whole, whole)),
        # q and k stay DTensors (heads split) for the RoPE op's sharding rule; v goes straight to SDPA
        "attention.wq": ColwiseParallel(use_local_output=False),
        "attention.wk": ColwiseParallel(use_local_output=False),
        "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=tokens, use_local_output=False),
        "ffn_norm": SequenceParallelAllInputs(),
        "feed_forward": PrepareModuleInput(input_layouts=(tokens,), desired_input_layouts=(whole,)),
        "feed_forward.gate_up": ColwiseParallel(use_local_output=False),
        "feed_forward.down": RowwiseParallel(output_layouts=tokens, use_local_output=False),
    })


# ---- one rank ----------------------------------------------------------------------------------------------
def _tileops_calls():
    """A dispatch mode recording each tileops op called on DTensors: its name, its DTensor inputs'
    placements and the collectives DTensor issued for that call alone (its sharding rule's doing)."""
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.debug import CommDebugMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class TileopsCalls(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.namespace != "tileops" or DTensor not in types:
                return func(*args, **(kwargs or {}))
            with CommDebugMode() as comm:
                out = func(*args, **(kwargs or {}))
            placements = [str(a.placements[0]) for a in args if isinstance(a, DTensor)]
            self.calls.append((func._schema.name.split("::")[1], placements, comm.get_total_counts()))
            return out
    return TileopsCalls()


def run(rank: int, world: int, device: str) -> bool:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    from torch.distributed.tensor.debug import CommDebugMode

    mesh = init_device_mesh(device, (world,))
    torch.manual_seed(0)  # every rank builds the same block and inputs
    block = Block().to(device)
    x = torch.randn(BATCH, SEQ, DIM, device=device)
    positions = torch.arange(SEQ, device=device).repeat(BATCH)  # one per token of the flattened batch
    cache = rope_cache(SEQ, DIM // HEADS).to(device)
    with torch.no_grad():
        want = block(x, positions, cache)  # the one-process block

        sharded = parallelize(copy.deepcopy(block), mesh)
        dx = distribute_tensor(x, mesh, [Shard(1)])  # tokens split across ranks
        with CommDebugMode() as comm, _tileops_calls() as tileops_calls:
            got = sharded(dx, positions, cache)
        diff = (got.full_tensor() - want).abs().max().item()
        counts = {str(k).split(".")[-1]: v for k, v in comm.get_comm_counts().items()}
        calls = tileops_calls.calls

        compiled = torch.compile(sharded, fullgraph=True)
        got_c = compiled(dx, positions, cache)
        diff_c = (got_c.full_tensor() - got.full_tensor()).abs().max().item()

    # the plan moves data four times: all-gather and reduce-scatter around attention, and around the MLP
    # (one rank: DTensor moves nothing)
    want_counts = {"all_gather_into_tensor": 2, "reduce_scatter_tensor": 2} if world > 1 else {}
    # the block's four tileops calls all ran on DTensors, and none moved data itself
    ok = diff <= TOL and diff_c <= TOL and counts == want_counts and [n for *_, n in calls] == [0] * 4
    if rank == 0:
        print(f"ranks: {world} ({'nccl' if device == 'cuda' else 'gloo'}, {device})")
        print(f"max |sharded - one process|       = {diff:.3g}  (tolerance {TOL:g})")
        print(f"collectives of one sharded forward: {counts}  (the plan's: {want_counts})")
        for name, placements, n in calls:
            print(f"  tileops.{name}({', '.join(placements)}): {n} collectives")
        print(f"max |compiled - eager| (sharded)   = {diff_c:.3g}  (fullgraph=True)")
        print("OK" if ok else "MISMATCH")
    return ok


def _rank_main(rank: int, world: int, port: int, device: str) -> None:
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if device == "cuda":
        torch.cuda.set_device(rank)
    else:  # the ranks share the cores (torchrun's OMP_NUM_THREADS does the same)
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    dist.init_process_group("nccl" if device == "cuda" else "gloo", rank=rank, world_size=world)
    try:
        ok = run(rank, world, device)
    finally:
        dist.destroy_process_group()
    if not ok:
        sys.exit(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=2, help="processes, one a GPU with NCCL (default 2)")
    ap.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda when there is a GPU a rank")
    args = ap.parse_args()
    world = args.ranks
    if world < 1 or KV_HEADS % world or SEQ % world:  # each rank whole kv heads (GQA groups), equal token shards
        ap.error(f"--ranks must divide {KV_HEADS} (kv heads) and {SEQ} (tokens)")
    device = args.device or ("cuda" if torch.cuda.is_available() and torch.cuda.device_count() >= world else "cpu")
    start = time.perf_counter()
    try:
        torch.multiprocessing.spawn(_rank_main, args=(world, _free_port(), device), nprocs=world)
    except torch.multiprocessing.ProcessExitedException as e:  # a rank saw a mismatch (or died)
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    print(f"time: {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
