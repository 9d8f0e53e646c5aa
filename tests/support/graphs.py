"""A torch.compile backend for tests: it keeps every FX graph dynamo hands it."""
import operator


class GraphRecorder:
    """Records each graph and runs it as traced, or through inductor (inductor=True)."""

    def __init__(self, inductor=False):
        self.graphs = []
        self.inductor = inductor

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        if self.inductor:
            from torch._inductor.compile_fx import compile_fx
            return compile_fx(gm, example_inputs)
        return gm.forward

    def calls(self, i=0, packets=False):
        """What graph i calls, in order (tuple indexing left out); packets: overload packets, not overloads."""
        return [getattr(n.target, "overloadpacket", n.target) if packets else n.target
                for n in self.graphs[i].graph.nodes if n.op == "call_function" and n.target is not operator.getitem]


def symint_inputs(gm):
    """The placeholders of a dynamo graph that stand for a symbolic int (an int made an input)."""
    import torch
    return [n.name for n in gm.graph.nodes if n.op == "placeholder" and isinstance(n.meta.get("example_value"), torch.SymInt)]
