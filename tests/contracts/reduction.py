"""Cold-compile contract entries of the reduction family (see tests/compile_contract.py)."""
import torch


def _x(device):
    return torch.randn(8, 256, device=device, dtype=torch.float16 if device == "cuda" else torch.float32)


def _softmax(device):
    from tileops.reduction import SoftmaxFwdOp
    return SoftmaxFwdOp(dim=-1), (_x(device),)


def _log_softmax(device):
    from tileops.reduction import LogSoftmaxFwdOp
    return LogSoftmaxFwdOp(dim=0), (_x(device),)  # a non-last dim: the movedim path compiles too


def _reduce(cls, **params):
    def make(device):
        import tileops.reduction as reduction
        return getattr(reduction, cls)(**params), (_x(device),)
    return make


CONTRACT = {
    "SoftmaxFwdOp": _softmax,
    "LogSoftmaxFwdOp": _log_softmax,
    "SumFwdOp": _reduce("SumFwdOp", dim=[0], dtype=torch.float32),
    "MeanFwdOp": _reduce("MeanFwdOp", dim=[-1], keepdim=True),
    "AmaxFwdOp": _reduce("AmaxFwdOp"),
    "AminFwdOp": _reduce("AminFwdOp", dim=[1]),
    "ProdFwdOp": _reduce("ProdFwdOp", dim=1),
    "VarFwdOp": _reduce("VarFwdOp", dim=[1], correction=0),
    "StdFwdOp": _reduce("StdFwdOp", dim=[0]),
    "VarMeanFwdOp": _reduce("VarMeanFwdOp", dim=[1]),
    "ArgmaxFwdOp": _reduce("ArgmaxFwdOp", dim=-1),
    "ArgminFwdOp": _reduce("ArgminFwdOp"),
    "AllFwdOp": _reduce("AllFwdOp", dim=[1]),
    "AnyFwdOp": _reduce("AnyFwdOp"),
    "CountNonzeroFwdOp": _reduce("CountNonzeroFwdOp", dim=[0]),
    "L1NormFwdOp": _reduce("L1NormFwdOp", dim=[1]),
    "L2NormFwdOp": _reduce("L2NormFwdOp", dim=[1]),
    "InfNormFwdOp": _reduce("InfNormFwdOp"),
    "LogSumExpFwdOp": _reduce("LogSumExpFwdOp", dim=[-1]),
    "CumsumFwdOp": _reduce("CumsumFwdOp", dim=-1),
    "CumprodFwdOp": _reduce("CumprodFwdOp", dim=0, dtype=torch.float32),
    "LogCumSumExpFwdOp": _reduce("LogCumSumExpFwdOp", dim=1),
}
