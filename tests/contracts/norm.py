"""Cold-compile contract entries of the norm family (see tests/compile_contract.py)."""
import torch


def _inputs(device, *shapes):
    dtype = torch.float16 if device == "cuda" else torch.float32
    return tuple(torch.randn(*s, device=device, dtype=dtype) for s in shapes)


def _rms_norm(device):
    from tileops.norm import RMSNormFwdOp
    return RMSNormFwdOp((256,)), _inputs(device, (8, 256), (256,))


def _fused_add_rms_norm(device):
    from tileops.norm import FusedAddRMSNormFwdOp
    return FusedAddRMSNormFwdOp((256,)), _inputs(device, (8, 256), (8, 256), (256,))


def _layer_norm(device):
    from tileops.norm import LayerNormFwdOp
    return LayerNormFwdOp((256,)), _inputs(device, (8, 256), (256,), (256,))


def _group_norm(device):
    from tileops.norm import GroupNormFwdOp
    return GroupNormFwdOp(4), _inputs(device, (2, 16, 8, 8), (16,), (16,))


def _instance_norm(device):
    from tileops.norm import InstanceNormFwdOp
    return InstanceNormFwdOp(), _inputs(device, (2, 16, 8, 8)) + (None, None) + _inputs(device, (16,), (16,))


def _batch_norm(device):
    from tileops.norm import BatchNormFwdOp
    running = (torch.zeros(16, device=device), torch.ones(16, device=device))
    return BatchNormFwdOp(training=True), _inputs(device, (2, 16, 8, 8)) + running + _inputs(device, (16,), (16,))


def _gemma_rms_norm(device):
    from tileops.norm import GemmaRMSNormFwdOp
    return GemmaRMSNormFwdOp((256,)), _inputs(device, (8, 256), (256,))


def _gemma_fused_add_rms_norm(device):
    from tileops.norm import GemmaFusedAddRMSNormFwdOp
    return GemmaFusedAddRMSNormFwdOp((256,)), _inputs(device, (8, 256), (8, 256), (256,))


def _scale(device):
    return torch.full((1,), 0.05, device=device)


def _rms_norm_static_quant(device):
    from tileops.norm import RMSNormStaticQuantFwdOp
    return RMSNormStaticQuantFwdOp((256,)), _inputs(device, (8, 256), (256,)) + (_scale(device),)


def _fused_add_rms_norm_static_quant(device):
    from tileops.norm import FusedAddRMSNormStaticQuantFwdOp
    return FusedAddRMSNormStaticQuantFwdOp((256,)), _inputs(device, (8, 256), (8, 256), (256,)) + (_scale(device),)


def _rms_norm_dynamic_quant(device):
    from tileops.norm import RMSNormDynamicQuantFwdOp
    return RMSNormDynamicQuantFwdOp((256,)), _inputs(device, (8, 256), (256,)) + (None,)


def _fused_add_rms_norm_dynamic_quant(device):
    from tileops.norm import FusedAddRMSNormDynamicQuantFwdOp
    return FusedAddRMSNormDynamicQuantFwdOp((256,)), _inputs(device, (8, 256), (8, 256), (256,)) + (None,)


def _rms_norm_bwd(device):
    from tileops.norm import RMSNormBwdOp
    return RMSNormBwdOp((256,)), _inputs(device, (8, 256), (8, 256), (256,))


def _layer_norm_bwd(device):
    from tileops.norm import LayerNormBwdOp
    return LayerNormBwdOp((256,)), _inputs(device, (8, 256), (8, 256), (256,))


def _batch_norm_bwd(device):
    from tileops.norm import BatchNormBwdOp
    stats = tuple(torch.rand(16, device=device) + 0.5 for _ in range(3))  # float32 weight, mean, rstd
    return BatchNormBwdOp(), _inputs(device, (2, 16, 8, 8), (2, 16, 8, 8)) + stats


CONTRACT = {
    "LayerNormFwdOp": _layer_norm,
    "GroupNormFwdOp": _group_norm,
    "InstanceNormFwdOp": _instance_norm,
    "BatchNormFwdOp": _batch_norm,
    "RMSNormFwdOp": _rms_norm,
    "FusedAddRMSNormFwdOp": _fused_add_rms_norm,
    "GemmaRMSNormFwdOp": _gemma_rms_norm,
    "GemmaFusedAddRMSNormFwdOp": _gemma_fused_add_rms_norm,
    "RMSNormStaticQuantFwdOp": _rms_norm_static_quant,
    "FusedAddRMSNormStaticQuantFwdOp": _fused_add_rms_norm_static_quant,
    "RMSNormDynamicQuantFwdOp": _rms_norm_dynamic_quant,
    "FusedAddRMSNormDynamicQuantFwdOp": _fused_add_rms_norm_dynamic_quant,
    "RMSNormBwdOp": _rms_norm_bwd,
    "LayerNormBwdOp": _layer_norm_bwd,
    "BatchNormBwdOp": _batch_norm_bwd,
}
