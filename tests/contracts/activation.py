"""Cold-compile contract entries of the activation family (see tests/compile_contract.py)."""
import torch


def _x(device, last):
    return torch.randn(4, 3, last, device=device, dtype=torch.bfloat16 if device == "cuda" else torch.float32)


def _make(name, last, **params):
    def make(device):
        import tileops.activation as act
        return getattr(act, name)(**params), (_x(device, last),)
    return make


def _sigmoid(device):
    # An integer x: the compiled graph's fake output must come out float32 (promote_int_to_float).
    import tileops.activation as act
    return act.SigmoidFwdOp(), (torch.randint(-8, 8, (4, 3, 64), device=device, dtype=torch.int32),)


CONTRACT = {
    "ReluFwdOp": _make("ReluFwdOp", 64),
    "SiluFwdOp": _make("SiluFwdOp", 64),
    "GeluFwdOp": _make("GeluFwdOp", 64, approximate="tanh"),
    "SigmoidFwdOp": _sigmoid,
    "SiluAndMulFwdOp": _make("SiluAndMulFwdOp", 128),
    "GeluAndMulFwdOp": _make("GeluAndMulFwdOp", 128),
    "GeluTanhAndMulFwdOp": _make("GeluTanhAndMulFwdOp", 128),
    "QuickGeluFwdOp": _make("QuickGeluFwdOp", 64),
    "MulAndSiluFwdOp": _make("MulAndSiluFwdOp", 128),
    "FatreluAndMulFwdOp": _make("FatreluAndMulFwdOp", 128, threshold=0.1),
    "SwigluOAIAndMulFwdOp": _make("SwigluOAIAndMulFwdOp", 128, alpha=1.5, limit=6.0),
}
