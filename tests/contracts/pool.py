"""Cold-compile contract entries of the pool family (see tests/compile_contract.py)."""
import torch


def _pool(cls, spatial, **params):
    def make(device):
        import tileops.pool as pool
        # the adaptive pools take float16 / bfloat16 only (manifests/pool.yaml)
        dtype = torch.float16 if device == "cuda" else torch.bfloat16 if "Adaptive" in cls else torch.float32
        return getattr(pool, cls)(**params), (torch.randn(2, 3, *spatial, device=device, dtype=dtype),)
    return make


CONTRACT = {
    "AvgPool1dFwdOp": _pool("AvgPool1dFwdOp", (17,), kernel_size=3, stride=2, padding=1, ceil_mode=True),
    "AvgPool2dFwdOp": _pool("AvgPool2dFwdOp", (9, 11), kernel_size=[3, 2], count_include_pad=False),
    "AvgPool3dFwdOp": _pool("AvgPool3dFwdOp", (5, 6, 7), kernel_size=2, divisor_override=3),
    "MaxPool1dFwdOp": _pool("MaxPool1dFwdOp", (17,), kernel_size=3, dilation=2),
    "MaxPool2dFwdOp": _pool("MaxPool2dFwdOp", (9, 11), kernel_size=3, stride=2, padding=1),
    "MaxPool3dFwdOp": _pool("MaxPool3dFwdOp", (5, 6, 7), kernel_size=[1, 2, 2], ceil_mode=True),
    "AdaptiveAvgPool2dFwdOp": _pool("AdaptiveAvgPool2dFwdOp", (9, 11), output_size=[4, 3]),
    "AdaptiveMaxPool2dFwdOp": _pool("AdaptiveMaxPool2dFwdOp", (9, 11), output_size=5),
    "MaxPool1dIndicesFwdOp": _pool("MaxPool1dIndicesFwdOp", (17,), kernel_size=3, dilation=2),
    "MaxPool2dIndicesFwdOp": _pool("MaxPool2dIndicesFwdOp", (9, 11), kernel_size=3, stride=2, padding=1),
    "MaxPool3dIndicesFwdOp": _pool("MaxPool3dIndicesFwdOp", (5, 6, 7), kernel_size=[1, 2, 2], ceil_mode=True),
    "AdaptiveMaxPool2dIndicesFwdOp": _pool("AdaptiveMaxPool2dIndicesFwdOp", (9, 11), output_size=5),
}
