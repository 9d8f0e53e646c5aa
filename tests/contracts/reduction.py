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


CONTRACT = {
    "SoftmaxFwdOp": _softmax,
    "LogSoftmaxFwdOp": _log_softmax,
}
