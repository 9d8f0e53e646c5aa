"""Every operator with a boundary on DTensor inputs (gloo, CPU ranks): equal to the op on the whole
tensors for every layout tried, no collectives where the manifest's `sharding:` says the layout is
free, a clear refusal where an input the op writes would have to move (docs/CONTRACT.md §12)."""
import json
import os
import socket
import subprocess
import sys

import pytest
import torch

import tileops

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

pytestmark = pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                                reason="torch.distributed with gloo")


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module", params=[2, 4], ids=lambda w: f"{w}ranks")
def report(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("dtensor") / "report.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), os.path.join(ROOT, "tests")]))
    subprocess.run([sys.executable, os.path.join(HERE, "dtensor_worker.py"), str(request.param), str(_port()), str(out)],
                   check=True, timeout=600, env=env)
    return json.loads(out.read_text())


def _entries():
    return {e["class"]: e for e in tileops.op_table() if e["status"] == "implemented" and e["has_boundary"]}


def _free_at_dim0(entry, op, rows: int, world: int, primary: int) -> bool:
    """Whether sharding the example's input `primary` on dim 0 needs no communication, by the manifest's rule
    (the reduction examples are 2-D). Fewer rows than ranks would leave a rank empty: those move."""
    s = entry["sharding"]
    if s["kind"] == "replicate" or rows < world:
        return False
    if s["kind"] == "free":  # the first dim of that input's shape is among the listed ones
        first = tileops.sharding._tokens(entry["inputs"][primary]["shape"])[0]
        return first == "..." or any(first in g.split("|") for g in s["free"])
    if s.get("combine"):  # a reduced dim shards too: the output is Partial
        return True
    if s["kind"] in ("except", "reduce"):
        d = getattr(op, s[s["kind"]])
        dims = [] if d is None else [d] if isinstance(d, int) else list(d)
        return bool(dims) and all(x % 2 != 0 for x in dims)
    return True


def test_every_operator_has_a_rule(report):
    assert report["registered"] == sum(len(e["operators"]) for e in _entries().values())
    assert {r["op"] for r in report["rows"]} == set(_entries())


def test_every_layout_equals_the_whole_tensor_call(report):
    writers = {c for c, e in _entries().items() if any(i["mutated"] != "no" for i in e["inputs"])}
    bad = []
    for r in report["rows"]:
        if r["ok"]:
            continue
        # an input the op writes, placed where the rule cannot keep it: refused by name, never moved
        if r["op"] in writers and "is written in place and is placed" in r["detail"] and r["shard"] != 0:
            continue
        bad.append((r["op"], r["shard"], r["detail"][:300]))
    assert not bad, bad


def test_free_layouts_issue_no_collectives(report):
    from compile_contract import CONTRACT
    entries = _entries()
    want, got = {}, {}
    for r in report["rows"]:
        if r["shard"] == 0:
            op, inputs = CONTRACT[r["op"]]("cpu")
            tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
            primary = max(tensors, key=lambda t: t.dim())
            at = next(i for i, t in enumerate(inputs) if t is primary)
            want[r["op"]] = _free_at_dim0(entries[r["op"]], op, primary.shape[0], report["world"], at)
            got[r["op"]] = r["ok"] and r["collectives"] == 0
    assert got == want
    # and the rule is what moves data: all replicated, nothing moves either
    assert all(r["collectives"] == 0 for r in report["rows"] if r["shard"] is None)


def test_rope_heads_of_q_and_k_shard_together(report):
    e = report["extras"]["rope_heads"]
    assert e == {"collectives": 0, "placements": "(Shard(dim=1),)", "ok": True}


def test_a_sharded_reduced_dim_gives_a_partial_output_without_collectives(report):
    # torch's sum/amax/amin rules do the same: the reduction runs on local rows, combined when read.
    assert report["extras"]["reduced_dim"] == {
        name: {"collectives": 0, "placements": f"(Partial({op}),)", "ok": True}
        for name, op in (("sum", "sum"), ("amax", "max"), ("amin", "min"))}


def test_bmm_shards_as_torch_bmm(report):
    assert report["extras"]["bmm"] == {
        "m": {"collectives": 0, "placements": "(Shard(dim=1),)", "ok": True},
        "n": {"collectives": 0, "placements": "(Shard(dim=2),)", "ok": True},
        "k": {"collectives": 0, "placements": "(Partial(sum),)", "ok": True}}


def test_gemm_shards_as_torch_mm_whatever_the_flags(report):
    placements = {"m": "(Shard(dim=0),)", "n": "(Shard(dim=1),)", "k": "(Partial(sum),)"}
    assert report["extras"]["gemm"] == {
        f"{dim} ta={ta} tb={tb}": {"collectives": 0, "placements": placements[dim], "ok": True}
        for ta, tb in ((False, True), (True, False)) for dim in "mnk"}


def test_gqa_heads_shard_with_their_kv_heads_only_when_groups_stay_whole(report):
    assert report["extras"]["gqa"] == {
        "kv_heads=4": {"collectives": False, "placements": "(Shard(dim=1),)", "ok": True},
        "kv_heads=3": {"collectives": True, "placements": "(Replicate(),)", "ok": True}}


def test_out_buffer_is_written_where_it_is_or_refused(report):
    assert report["extras"]["out_rows"] == {"ok": True}
    err = report["extras"]["out_cols"]["error"]
    assert "tileops.norm_rms_norm_fwd_out: input 'out' is written in place" in err and "free: ['...']" in err


def test_compiled_function_on_dtensors_equals_eager(report):
    assert report["extras"]["compile"] == {"ok": True, "placements": "(Shard(dim=0),)"}


def test_import_tileops_does_not_import_dtensor():
    code = ("import sys, tileops; tileops.load(); assert 'torch.distributed.tensor' not in sys.modules; "
            "import torch.distributed.tensor; from tileops import sharding; assert sharding._registered")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
