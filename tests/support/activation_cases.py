"""Activation operators paired with their torch references (shared by the CPU and GPU tests)."""
import torch
import torch.nn.functional as F

ops = torch.ops.tileops

# name -> (plain operator, _writes_x operator or None, params, torch function)
UNARY = {
    "relu": (ops.activation_relu_fwd, ops.activation_relu_fwd_writes_x, (), torch.relu),
    "silu": (ops.activation_silu_fwd, ops.activation_silu_fwd_writes_x, (), F.silu),
    "gelu": (ops.activation_gelu_fwd, ops.activation_gelu_fwd_writes_x, (), F.gelu),
    "gelu_none": (ops.activation_gelu_fwd, ops.activation_gelu_fwd_writes_x, ("none",), F.gelu),
    "gelu_tanh": (ops.activation_gelu_fwd, ops.activation_gelu_fwd_writes_x, ("tanh",),
                  lambda x: F.gelu(x, approximate="tanh")),
    # No in-place branch: integer x gives float32 y, which x cannot hold (manifest comment).
    "sigmoid": (ops.activation_sigmoid_fwd, None, (), torch.sigmoid),
}
# The unary ops with a _writes_x branch.
IN_PLACE = sorted(n for n, case in UNARY.items() if case[1] is not None)

# SigmoidFwdOp's x dtypes beyond float16/bfloat16/float32: y is float32 for these (promote_int_to_float).
INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool]


def promoted(dtype):
    """y's dtype for x of `dtype` under promote_int_to_float: floats keep theirs, the rest float32."""
    return dtype if dtype.is_floating_point else torch.float32


def int_sample(shape, dtype, device="cpu", offset=0, seed=0):
    """Integer/bool x of `shape`, `offset` elements into its storage: mostly small values (the curved
    part of sigmoid, both signs where the dtype has them), with the dtype's min and max sprinkled in."""
    g = torch.Generator().manual_seed(seed)
    n = 1
    for s in shape:
        n *= s
    if dtype == torch.bool:
        flat = torch.rand(n + offset, generator=g) < 0.5
    else:
        info = torch.iinfo(dtype)
        flat = torch.randint(max(info.min, -20), min(info.max, 20) + 1, (n + offset,), generator=g).to(dtype)
        flat[offset::5] = info.max
        flat[offset + 2::7] = info.min
    return flat.to(device)[offset:].view(shape)
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
