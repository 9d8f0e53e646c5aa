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
    # No torch function: the formula in float32, rounded once (the manifest's ref_api).
    "quick_gelu": (ops.activation_quick_gelu_fwd, ops.activation_quick_gelu_fwd_writes_x, (),
                   lambda x: (x.float() * torch.sigmoid(1.702 * x.float())).to(x.dtype)),
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


def _mul_and_silu(x):
    d = x.shape[-1] // 2
    return x[..., :d] * F.silu(x[..., d:])


def _fatrelu_and_mul(x, threshold):
    d = x.shape[-1] // 2
    gate = x[..., :d]
    return torch.where(gate <= threshold, torch.zeros_like(gate), gate) * x[..., d:]  # NaN gates stay NaN


def _swiglu_oai_and_mul(x, alpha, limit):
    # vLLM's SwigluOAIAndMul.forward_native, as written there.
    gate, up = x[..., ::2], x[..., 1::2]
    gate = gate.clamp(min=None, max=limit)
    up = up.clamp(min=-limit, max=limit)
    return (up + 1) * (gate * torch.sigmoid(gate * alpha))


# The gated ops with another layout or with params: name -> (plain operator, _out operator,
# params as passed, formula of float32 x and the params).
GATED_FORMULAS = {
    "mul_and_silu": (ops.activation_mul_and_silu_fwd, ops.activation_mul_and_silu_fwd_out, (), _mul_and_silu),
    "fatrelu_and_mul": (ops.activation_fatrelu_and_mul_fwd, ops.activation_fatrelu_and_mul_fwd_out, (0.25,),
                        _fatrelu_and_mul),
    "swiglu_oai_and_mul": (ops.activation_swiglu_oai_and_mul_fwd, ops.activation_swiglu_oai_and_mul_fwd_out,
                           (1.702, 7.0), _swiglu_oai_and_mul),
}


def formula_ref(name, x, params=None):
    """GATED_FORMULAS[name]'s formula in float32 (params as given, else the case's), rounded once."""
    _, _, default, formula = GATED_FORMULAS[name]
    p = default if params is None else params
    # The ops take float params as float32 (as vLLM's kernels): round them the same way here.
    p = tuple(float(torch.tensor(v, dtype=torch.float32)) for v in p)
    return formula(x.float(), *p).to(x.dtype)
