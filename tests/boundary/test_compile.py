"""torch.compile on CPU (reference target): cold fullgraph, one node, no recompiles, dynamic batch."""
import torch
import torch._dynamo

import tileops
from tileops.norm import RMSNormFwdOp
from support.graphs import GraphRecorder, symint_inputs


def test_cold_fullgraph_compile_sees_one_node(counters):
    torch._dynamo.reset()
    tileops.clear_kernel_caches()  # cold: no kernel constructed before the compiled call
    op = RMSNormFwdOp((32,))
    rec = GraphRecorder()
    fn = torch.compile(lambda x, w: op(x, w), fullgraph=True, backend=rec)
    x, w = torch.randn(4, 32), torch.randn(32)
    y = fn(x, w)
    assert rec.calls() == [torch.ops.tileops.norm_rms_norm_fwd.default]
    torch.testing.assert_close(y, torch.nn.functional.rms_norm(x, [32], w))
    fn(x, w)
    assert len(rec.graphs) == 1  # reuse: the second call does not recompile


def test_inductor_matches_eager_and_does_not_recompile():
    torch._dynamo.reset()
    op = RMSNormFwdOp((64,), eps=1e-6)
    x, w = torch.randn(8, 64), torch.randn(64)
    fn = torch.compile(lambda x, w: op(x, w) * 2 + 1, fullgraph=True)
    torch.testing.assert_close(fn(x, w), op(x, w) * 2 + 1)
    before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    fn(x, w)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == before


def test_dynamic_batch_does_not_recompile():
    torch._dynamo.reset()
    op = RMSNormFwdOp((16,))
    rec = GraphRecorder()
    fn = torch.compile(lambda x: op(x), fullgraph=True, dynamic=True, backend=rec)
    for m in (3, 5, 17, 64):
        x = torch.randn(m, 16)
        torch.testing.assert_close(fn(x), torch.nn.functional.rms_norm(x, [16]))
    assert len(rec.graphs) == 1


def test_mark_dynamic_batch_does_not_recompile():
    torch._dynamo.reset()
    op = RMSNormFwdOp((16,))
    rec = GraphRecorder()
    fn = torch.compile(lambda x: op(x), fullgraph=True, backend=rec)
    for m in (4, 9, 33):
        x = torch.randn(m, 16)
        torch._dynamo.mark_dynamic(x, 0)
        fn(x)
    assert len(rec.graphs) == 1


def test_same_graph_whatever_the_target():
    # docs/CONTRACT.md §3: the compiled graph does not depend on which target serves the op.
    codes = []
    for target in (None, "reference"):
        torch._dynamo.reset()
        op = RMSNormFwdOp((16,), target=target)
        rec = GraphRecorder()
        torch.compile(lambda x: op(x), fullgraph=True, backend=rec)(torch.randn(2, 16))
        codes.append([n.target for n in rec.graphs[0].graph.nodes if n.op == "call_function"])
    assert codes[0] == codes[1] == [torch.ops.tileops.norm_rms_norm_fwd.default]


def test_export_keeps_the_node():
    class M(torch.nn.Module):
        def forward(self, x, w):
            return torch.ops.tileops.norm_rms_norm_fwd(x, w, [16]) + 1

    ep = torch.export.export(M(), (torch.randn(3, 16), torch.randn(16)))
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert torch.ops.tileops.norm_rms_norm_fwd.default in targets
    x, w = torch.randn(3, 16), torch.randn(16)
    torch.testing.assert_close(ep.module()(x, w), torch.nn.functional.rms_norm(x, [16], w) + 1)


def test_op_class_float_param_is_a_constant_under_dynamic_compile():
    # A float param (eps) read from the Op instance used to become a graph input under
    # dynamic=True, and inductor then recompiled on the second batch size.
    from torch._inductor.compile_fx import compile_fx
    from tileops.norm import LayerNormFwdOp

    torch._dynamo.reset()
    compiles = []

    def backend(gm, example_inputs):
        compiles.append(sum(isinstance(e, torch.Tensor) and e.dim() == 0 for e in example_inputs))
        return compile_fx(gm, example_inputs)

    op = LayerNormFwdOp((64,), eps=1e-3)
    fn = torch.compile(lambda x, w, b: op(x, w, b), fullgraph=True, dynamic=True, backend=backend)
    w, b = torch.randn(64), torch.randn(64)
    for m in (32, 5, 17):
        x = torch.randn(m, 64)
        torch.testing.assert_close(fn(x, w, b), torch.nn.functional.layer_norm(x, [64], w, b, 1e-3))
    assert compiles == [0]  # one compile, and eps is no 0-dim tensor input of the graph


def test_an_op_built_inside_the_compiled_function():
    # The Op made while dynamo traces exists only in the trace: its params are the trace's values
    # (a constant eps; a seed that is an input of the function, symbolic once it changes).
    from tileops.regularization import DropoutFwdOp

    torch._dynamo.reset()
    rec = GraphRecorder()
    fn = torch.compile(lambda x, w: RMSNormFwdOp((32,), eps=1e-3)(x, w), fullgraph=True, backend=rec)
    for m in (4, 9):
        x, w = torch.randn(m, 32), torch.randn(32)
        torch.testing.assert_close(fn(x, w), torch.nn.functional.rms_norm(x, [32], w, 1e-3))
    assert rec.calls() == [torch.ops.tileops.norm_rms_norm_fwd.default]

    torch._dynamo.reset()
    rec = GraphRecorder()
    fn = torch.compile(lambda x, s: DropoutFwdOp(p=0.3, seed=s)(x), fullgraph=True, backend=rec)
    x = torch.randn(6, 40)
    for seed in range(1000, 1005):
        assert torch.equal(fn(x, seed), torch.ops.tileops.regularization_dropout_fwd(x, 0.3, seed))
    assert 1 <= len(rec.graphs) <= 2
    assert symint_inputs(rec.graphs[-1]), "the seed is an input of the last graph"
