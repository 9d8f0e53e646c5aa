"""Cold-compile contract entries of the convolution family (see tests/compile_contract.py)."""
import torch


def _conv(cls, rank, spatial, kernel, *, bias=True, **params):
    def make(device):
        import tileops.convolution as convolution
        # Conv1dFwdOp takes float16 / bfloat16 only (manifests/convolution.yaml)
        dtype = torch.float16 if device == "cuda" else torch.bfloat16 if rank == 1 else torch.float32
        groups = params.get("groups", 1)
        x = torch.randn(2, 4, *spatial, device=device, dtype=dtype)
        w = torch.randn(6, 4 // groups, *kernel, device=device, dtype=dtype)
        inputs = (x, w, torch.randn(6, device=device, dtype=dtype)) if bias else (x, w)
        return getattr(convolution, cls)(**params), inputs
    return make


CONTRACT = {
    "Conv1dFwdOp": _conv("Conv1dFwdOp", 1, (17,), (3,), stride=2, padding=1, groups=2),
    "Conv2dFwdOp": _conv("Conv2dFwdOp", 2, (9, 11), (3, 2), bias=False, padding_str="same", dilation=[2, 1]),
    "Conv3dFwdOp": _conv("Conv3dFwdOp", 3, (5, 6, 7), (2, 3, 3), stride=[1, 2, 2], padding=[0, 1, 1]),
}
