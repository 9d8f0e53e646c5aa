"""Cold-compile contract entries of the regularization family (see tests/compile_contract.py)."""
import torch


def _dropout(device):
    import tileops.regularization as regularization
    return regularization.DropoutFwdOp(p=0.25, seed=7), (torch.randn(6, 40, device=device),)


def _dropout_bwd(device):
    import tileops.regularization as regularization
    return regularization.DropoutBwdOp(p=0.25, seed=7), (torch.randn(6, 40, device=device),)


CONTRACT = {
    "DropoutFwdOp": _dropout,
    "DropoutBwdOp": _dropout_bwd,
}
