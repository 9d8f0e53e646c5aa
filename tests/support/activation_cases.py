"""Activation operators paired with their torch references (shared by the CPU and GPU tests)."""
import torch
import torch.nn.functional as F

ops = torch.ops.tileops

# name -> (plain operator, _writes_x operator, params, torch function)
UNARY = {
    "relu": (ops.activation_relu_fwd, ops.activation_relu_fwd_writes_x, (), torch.relu),
    "silu": (ops.activation_silu_fwd, ops.activation_silu_fwd_writes_x, (), F.silu),
    "gelu": (ops.activation_gelu_fwd, ops.activation_gelu_fwd_writes_x, (), F.gelu),
    "gelu_none": (ops.activation_gelu_fwd, ops.activation_gelu_fwd_writes_x, ("none",), F.gelu),
    "gelu_tanh": (ops.activation_gelu_fwd, ops.activation_gelu_fwd_writes_x, ("tanh",),
                  lambda x: F.gelu(x, approximate="tanh")),
}
# name -> (plain operator, _out operator, torch activation of the gate)
GATED = {
    "silu_and_mul": (ops.activation_silu_and_mul_fwd, ops.activation_silu_and_mul_fwd_out, F.silu),
    "gelu_and_mul": (ops.activation_gelu_and_mul_fwd, ops.activation_gelu_and_mul_fwd_out, F.gelu),
    "gelu_tanh_and_mul": (ops.activation_gelu_tanh_and_mul_fwd, ops.activation_gelu_tanh_and_mul_fwd_out,
                          lambda g: F.gelu(g, approximate="tanh")),
}


def gated_ref(act, x):
    """The ref_api formula in float32, rounded once to x's dtype."""
    xf, d = x.float(), x.shape[-1] // 2
    return (act(xf[..., :d]) * xf[..., d:]).to(x.dtype)
