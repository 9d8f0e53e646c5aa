"""One call moves a Hugging Face `transformers` model onto tileops ops, and one call moves it back.

    import tileops
    summary = tileops.patch(model)          # or tileops.hf.apply_to_llama(model, rope=False)
    print(summary)                          # what was replaced, module by module
    tileops.unpatch(model)                  # the model exactly as it was
    with tileops.patched(model): ...        # the same, for a block

What is replaced (architectures: Llama, Mistral, Qwen2, Qwen3, Gemma, Gemma2, Phi-3):
- RMSNorm: the Llama form (Llama, Mistral, Qwen2, Qwen3 incl. its q/k norms, Phi-3) by RMSNormFwdOp;
  Gemma's `1 + w` form (Gemma, Gemma2) by GemmaRMSNormFwdOp; any torch.nn.RMSNorm by RMSNormFwdOp.
- LayerNorm: any torch.nn.LayerNorm by LayerNormFwdOp.
- The gated MLP activation: SiLU-and-mul (SiluAndMulFwdOp), GELU-tanh-and-mul (Gemma:
  GeluTanhAndMulFwdOp), exact-GELU-and-mul (GeluAndMulFwdOp). Phi-3's fused gate_up projection feeds
  the op directly; the other MLPs compute gate and up with two projections, concatenated first.
- Rotary embedding application (apply_rotary_pos_emb, Phi-3's partial form too) by RopeNeoxCachedFwdOp:
  HF's cos/sin rows (cat(freqs, freqs), so the first half of each row is the whole table) become the
  op's [cos | sin] cache, indexed by token. The op rotates in place; q and k are copied first, since
  HF's function leaves its inputs alone.
Not replaced: attention itself (the catalogue has no attention op), and the residual add + RMSNorm
pair: the add ends one block and the norm starts the next inside the decoder layer's forward, so
fusing them means rewriting HF's forward, which this module never does.

How: each replaced module gets an instance-level `forward` (a bound method in its __dict__); the class,
the parameters, buffers, hooks and state_dict are untouched. Unpatching deletes that one attribute, so
it is exact, and two models (or two modules of one class) are independent, unlike class-wide monkey
patching. Attention modules get a copy of their own class's forward (the same code object) whose
globals name the tileops rotary function instead of HF's.

Training: RMSNormFwdOp and LayerNormFwdOp have a backward op (the opt-in pairing), which patch turns on
(tileops.enable_autograd) and unpatch turns off again when it was off and no patched model remains.
Where an input requires grad, Gemma's norm runs as the paired RMSNormFwdOp with the float32 weight
1 + w (the same formula); the gated activations and RoPE run inside autograd Functions whose backward
is torch's formula for the activation and the inverse rotation (the same RoPE op with -sin).

A call whose inputs the op cannot take (a dtype outside float16/bfloat16/float32, a weight of another
dtype than x where HF would promote, an unexpected rotary layout) runs HF's own code instead. Nothing
here imports transformers before it is needed: `import tileops` never does.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import logging
import sys
import types
import weakref

import torch
from torch import nn

__all__ = ["patch", "unpatch", "patched", "PatchSummary", "ARCHITECTURES", "apply_to_llama", "apply_to_mistral",
           "apply_to_qwen2", "apply_to_qwen3", "apply_to_gemma", "apply_to_gemma2", "apply_to_phi3"]

log = logging.getLogger("tileops.hf")

ARCHITECTURES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3")

# Per architecture: its module classes (names in transformers.models.<arch>.modeling_<arch>) and forms.
_CLASS_PREFIX = {"llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2", "qwen3": "Qwen3", "gemma": "Gemma",
                 "gemma2": "Gemma2", "phi3": "Phi3"}
_GEMMA_NORM = {"gemma", "gemma2"}   # y = norm(x) * (1 + w), in float32
_FUSED_MLP = {"phi3"}               # gate_up_proj, then up * act(gate)
_PARTIAL_ROPE = {"phi3"}            # rotates cos.shape[-1] <= head_dim dims, passes the rest

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)

# The autograd pairing as it was before the first patch (None: patch did not turn it on), and the
# models patched since, whose last unpatch gives the pairing back.
_pairing_before: bool | None = None
_patched_roots: "weakref.WeakSet[nn.Module]" = weakref.WeakSet()


@dataclasses.dataclass
class PatchSummary:
    """What patch replaced: `replaced` maps "Class -> Op" to module names; `skipped` lists recognised
    modules left alone, with why; `untouched` what tileops does not serve yet."""
    model: str
    replaced: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    skipped: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    untouched: tuple[str, ...] = ("attention (no attention op in the catalogue)",
                                  "residual add + RMSNorm (would need HF's decoder forward rewritten)")
    autograd_pairing: bool = False
    _modules: list[nn.Module] = dataclasses.field(default_factory=list, repr=False)

    @property
    def counts(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.replaced.items()}

    @property
    def calls_per_forward(self) -> int:
        """tileops calls (graph nodes under torch.compile) one forward makes: one per replaced module."""
        return sum(self.counts.values())

    def __str__(self) -> str:
        parts = [f"{n} x {k}" for k, n in self.counts.items()] or ["nothing"]
        line = f"tileops.patch({self.model}): " + ", ".join(parts)
        if self.skipped:
            line += f"; {len(self.skipped)} recognised module(s) left alone ({self.skipped[0][1]}, ...)"
        return line + "; untouched: " + ", ".join(self.untouched)


# --- the ops, made once (Op instances hold their params as graph constants) --------------------------

_OPS: dict = {}  # filled by the first patch, read by the forwards (a plain dict: dynamo traces through it)


def _make_ops() -> None:
    if not _OPS:
        from .activation import GeluAndMulFwdOp, GeluTanhAndMulFwdOp, SiluAndMulFwdOp
        from .position import RopeNeoxCachedFwdOp
        _OPS.update(silu=SiluAndMulFwdOp(), gelu_tanh=GeluTanhAndMulFwdOp(), gelu=GeluAndMulFwdOp(),
                    rope=RopeNeoxCachedFwdOp())


def _needs_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


# --- norms -------------------------------------------------------------------------------------------

def _llama_rms_norm(op):
    def forward(self, hidden_states):
        # HF returns weight * x.to(dtype): another weight dtype promotes the result, which the op does not.
        if hidden_states.dtype not in _DTYPES or self.weight.dtype != hidden_states.dtype:
            return type(self).forward(self, hidden_states)
        return op(hidden_states, self.weight)
    return forward


def _gemma_rms_norm(op, paired):
    def forward(self, x):
        if x.dtype not in _DTYPES or self.weight.dtype not in _DTYPES:
            return type(self).forward(self, x)
        if _needs_grad(x, self.weight):
            # GemmaRMSNormFwdOp has no backward op; the paired RMSNormFwdOp with 1 + w is its formula.
            return paired(x, 1.0 + self.weight.float())
        return op(x, self.weight)
    return forward


def _torch_rms_norm(op):
    def forward(self, x):
        if x.dtype not in _DTYPES or (self.weight is not None and self.weight.dtype != x.dtype):
            return type(self).forward(self, x)
        return op(x, self.weight)
    return forward


def _layer_norm(op):
    def forward(self, x):
        dts = {p.dtype for p in (self.weight, self.bias) if p is not None}
        # The op takes weight and bias both of x's dtype or both float32 (its dtype_combos).
        if x.dtype not in _DTYPES or len(dts) > 1 or not dts <= {x.dtype, torch.float32}:
            return type(self).forward(self, x)
        return op(x, self.weight, self.bias)
    return forward


# --- gated activations -------------------------------------------------------------------------------

class _GatedAct(torch.autograd.Function):
    """y = act(x[..., :d]) * x[..., d:] on the tileops op; the backward is torch's own formula, so the
    gradients are those of HF's act(gate) * up."""

    @staticmethod
    def forward(ctx, x, kind):
        ctx.save_for_backward(x)
        ctx.kind = kind
        return _OPS[kind](x)

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        gate, up = x.chunk(2, dim=-1)
        if ctx.kind == "silu":
            act, dgate = nn.functional.silu(gate), torch.ops.aten.silu_backward(dy * up, gate)
        else:
            approximate = "tanh" if ctx.kind == "gelu_tanh" else "none"
            act = nn.functional.gelu(gate, approximate=approximate)
            dgate = torch.ops.aten.gelu_backward(dy * up, gate, approximate=approximate)
        return torch.cat((dgate, dy * act), dim=-1), None


def _gated(kind, x):
    if _needs_grad(x):
        return _GatedAct.apply(x, kind)
    return _OPS[kind](x)


def _split_mlp(kind):
    def forward(self, x):
        gate, up = self.gate_proj(x), self.up_proj(x)
        if gate.dtype not in _DTYPES:
            return type(self).forward(self, x)
        # The op reads [gate | up] along the last dim (vLLM's layout).
        return self.down_proj(_gated(kind, torch.cat((gate, up), dim=-1)))
    return forward


def _fused_mlp(kind):
    def forward(self, hidden_states):
        gate_up = self.gate_up_proj(hidden_states)
        if gate_up.dtype not in _DTYPES:
            return type(self).forward(self, hidden_states)
        return self.down_proj(_gated(kind, gate_up))
    return forward


def _act_kind(act) -> str | None:
    """The op for an HF activation module, only where the op computes the same function."""
    from transformers import activations as A
    if type(act) in (A.SiLUActivation, nn.SiLU):
        return "silu"
    inner = getattr(act, "act", None)
    if type(act) is A.GELUTanh and isinstance(inner, functools.partial) and inner.func is nn.functional.gelu \
            and inner.keywords == {"approximate": "tanh"}:
        return "gelu_tanh"
    if type(act) is A.GELUActivation and inner is nn.functional.gelu:
        return "gelu"
    return None


# --- rotary embedding --------------------------------------------------------------------------------

def _rope_apply(q, k, cache, positions):
    """q [b, hq, s, d], k [b, hk, s, d] rotated into new tensors by the in-place op."""
    b, hq, s, d = q.shape
    hk = k.shape[1]
    # Token-major copies: the op writes in place and HF's function leaves q and k alone.
    qt = q.transpose(1, 2).clone(memory_format=torch.contiguous_format)
    kt = k.transpose(1, 2).clone(memory_format=torch.contiguous_format)
    _OPS["rope"](positions, qt.view(b * s, hq, d), kt.view(b * s, hk, d), cache)
    return qt.transpose(1, 2), kt.transpose(1, 2)


class _Rope(torch.autograd.Function):
    """RoPE on the tileops op; its gradient is the inverse rotation, the same op with -sin."""

    @staticmethod
    def forward(ctx, q, k, cache, positions):
        ctx.save_for_backward(cache, positions)
        return _rope_apply(q, k, cache, positions)

    @staticmethod
    def backward(ctx, dq, dk):
        cache, positions = ctx.saved_tensors
        half = cache.shape[1] // 2
        inverse = torch.cat((cache[:, :half], -cache[:, half:]), dim=1)
        dq, dk = _rope_apply(dq, dk, inverse, positions)
        return dq, dk, None, None


def _make_rope(original, partial: bool):
    _make_ops()
    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
        fits = (unsqueeze_dim == 1 and q.dim() == 4 and k.dim() == 4 and cos.dim() == 3 and cos.shape == sin.shape
                and q.dtype in _DTYPES and k.dtype == q.dtype and cos.dtype in (q.dtype, torch.float32)
                and sin.dtype == cos.dtype and k.shape[0] == q.shape[0] and k.shape[2] == q.shape[2]
                and k.shape[3] == q.shape[3] and cos.shape[0] in (1, q.shape[0]) and cos.shape[1] == q.shape[2])
        rot = cos.shape[-1] if cos.dim() == 3 else 0
        # Llama's form rotates every dim; Phi-3's the first cos.shape[-1] and passes the rest, as the op.
        if not fits or rot % 2 or rot > q.shape[3] or (rot != q.shape[3] and not partial) \
                or _needs_grad(cos, sin):
            return original(q, k, cos, sin, unsqueeze_dim)
        b, _, s, _ = q.shape
        half = rot // 2
        # HF's rows are cat(freqs, freqs): the first half of cos and of sin is the op's [cos | sin] row.
        cache = torch.cat((cos[..., :half], sin[..., :half]), dim=-1).reshape(cos.shape[0] * s, rot)
        positions = torch.arange(b * s, device=q.device) % (cos.shape[0] * s)  # a batch of 1 is broadcast
        if _needs_grad(q, k):
            return _Rope.apply(q, k, cache, positions)
        return _rope_apply(q, k, cache, positions)
    return apply_rotary_pos_emb


@functools.cache
def _attention_with_rope(cls, partial: bool):
    """cls.forward's own code, with `apply_rotary_pos_emb` looked up in a copy of its globals that names
    tileops' rope. The copy is a module's namespace, registered in sys.modules under its own name: the
    compiler finds an inlined function's globals by their `__name__`, so a bare dict would lead its
    guards back to the original module (torch 2.11 did exactly that)."""
    f = cls.__dict__["forward"]
    name = f"tileops._hf_attention.{cls.__module__}.{cls.__qualname__}"
    mod = types.ModuleType(name)
    mod.__dict__.update(f.__globals__)
    mod.__dict__.update(__name__=name, __spec__=None,
                        apply_rotary_pos_emb=_make_rope(f.__globals__["apply_rotary_pos_emb"], partial))
    sys.modules[name] = mod
    fn = types.FunctionType(f.__code__, mod.__dict__, f.__name__, f.__defaults__, f.__closure__)
    fn.__kwdefaults__ = f.__kwdefaults__
    fn.__qualname__ = f.__qualname__
    return fn


# --- recognising modules -----------------------------------------------------------------------------

def _own_forward(cls) -> bool:
    """The class's forward is the one its modeling file defines (not replaced by another patcher)."""
    f = cls.__dict__.get("forward")
    return isinstance(f, types.FunctionType) and f.__module__ == cls.__module__


@functools.cache
def _arch_classes(arch: str) -> dict[str, type] | None:
    try:
        mod = importlib.import_module(f"transformers.models.{arch}.modeling_{arch}")
    except ImportError:
        return None
    p = _CLASS_PREFIX[arch]
    names = {"norm": f"{p}RMSNorm", "mlp": f"{p}MLP", "attention": f"{p}Attention", "rotary": f"{p}RotaryEmbedding"}
    classes = {role: getattr(mod, name, None) for role, name in names.items()}
    return classes if all(classes.values()) else None


def _rotary_fits(model: nn.Module, classes: dict[str, type]) -> bool:
    """Every rotary embedding of this architecture in the model is HF's own: rows cat(freqs, freqs)."""
    rot = [m for m in model.modules() if type(m) is classes["rotary"]]
    return bool(rot) and _own_forward(classes["rotary"]) and all("forward" not in m.__dict__ for m in rot)


def _bind(module: nn.Module, fn, label: str) -> None:
    fn._tileops_patch = label
    module.__dict__["forward"] = types.MethodType(fn, module)


def _is_ours(module: nn.Module) -> bool:
    f = module.__dict__.get("forward")
    return hasattr(getattr(f, "__func__", None), "_tileops_patch")


def _patch(model: nn.Module, archs, *, rms_norm, layer_norm, mlp, rope, require: str | None = None) -> PatchSummary:
    if not isinstance(model, nn.Module):
        raise TypeError(f"tileops.patch: expected a torch.nn.Module, got {type(model).__name__}")
    from .norm import GemmaRMSNormFwdOp, LayerNormFwdOp, RMSNormFwdOp
    _make_ops()
    summary = PatchSummary(model=type(model).__name__)

    def take(name, module, fn, label):
        if _is_ours(module):
            return  # patched before: patching again changes nothing
        if "forward" in module.__dict__:
            summary.skipped.append((name, "its forward was already replaced by someone else"))
            return
        _bind(module, fn, label)
        summary.replaced.setdefault(label, []).append(name)
        summary._modules.append(module)

    by_class = {}
    rope_ok = {}
    for arch in archs:
        classes = _arch_classes(arch)
        if classes is None:
            continue
        for role, cls in classes.items():
            by_class[cls] = (arch, role)
        rope_ok[arch] = _rotary_fits(model, classes)
    if require is not None and not any(type(m) in by_class and by_class[type(m)][0] == require
                                       for m in model.modules()):
        raise ValueError(f"tileops.hf.apply_to_{require}: {type(model).__name__} holds no {require} modules")

    for name, m in model.named_modules():
        name = name or "(root)"
        cls = type(m)
        if cls in (nn.LayerNorm, nn.RMSNorm) and not _own_forward(cls):
            summary.skipped.append((name, f"{cls.__name__}.forward was replaced class-wide by another patcher"))
            continue
        if cls is nn.LayerNorm and layer_norm:
            take(name, m, _layer_norm(LayerNormFwdOp(normalized_shape=m.normalized_shape, eps=m.eps)),
                 "LayerNorm -> LayerNormFwdOp")
            continue
        if cls is nn.RMSNorm and rms_norm:
            shape = m.normalized_shape
            take(name, m, _torch_rms_norm(RMSNormFwdOp(normalized_shape=shape, eps=m.eps)), "RMSNorm -> RMSNormFwdOp")
            continue
        if cls not in by_class:
            continue
        arch, role = by_class[cls]
        if role == "rotary":
            continue  # its cos/sin stay HF's; the attention's application of them is what is replaced
        if not _own_forward(cls):
            summary.skipped.append((name, f"{cls.__name__}.forward was replaced class-wide by another patcher"))
            continue
        if role == "norm" and rms_norm:
            n = m.weight.shape
            if arch in _GEMMA_NORM:
                fn = _gemma_rms_norm(GemmaRMSNormFwdOp(normalized_shape=n, eps=m.eps),
                                     RMSNormFwdOp(normalized_shape=n, eps=m.eps))
                take(name, m, fn, f"{cls.__name__} -> GemmaRMSNormFwdOp")
            else:
                take(name, m, _llama_rms_norm(RMSNormFwdOp(normalized_shape=n, eps=m.variance_epsilon)),
                     f"{cls.__name__} -> RMSNormFwdOp")
        elif role == "mlp" and mlp:
            kind = _act_kind(m.activation_fn if arch in _FUSED_MLP else m.act_fn)
            if kind is None:
                summary.skipped.append((name, "its activation has no gated tileops op"))
                continue
            op = {"silu": "SiluAndMulFwdOp", "gelu_tanh": "GeluTanhAndMulFwdOp", "gelu": "GeluAndMulFwdOp"}[kind]
            take(name, m, _fused_mlp(kind) if arch in _FUSED_MLP else _split_mlp(kind), f"{cls.__name__} -> {op}")
        elif role == "attention" and rope:
            if not rope_ok[arch]:
                summary.skipped.append((name, "its rotary embedding is not HF's own (cos/sin rows unknown)"))
                continue
            f = cls.__dict__["forward"]
            # A decorated forward's code is the decorator's: only a plain one can be copied with new globals.
            if hasattr(f, "__wrapped__") or "apply_rotary_pos_emb" not in f.__code__.co_names:
                summary.skipped.append((name, "its forward does not call apply_rotary_pos_emb itself"))
                continue
            take(name, m, _attention_with_rope(cls, arch in _PARTIAL_ROPE), f"{cls.__name__} rotary -> RopeNeoxCachedFwdOp")

    if summary._modules:
        _turn_pairing_on(model)
    from . import autograd_enabled
    summary.autograd_pairing = autograd_enabled()
    log.info("%s", summary)
    return summary


def _turn_pairing_on(model: nn.Module) -> None:
    global _pairing_before
    from . import autograd_enabled, enable_autograd
    if not _patched_roots and _pairing_before is None:
        if not autograd_enabled():
            enable_autograd(True)
            _pairing_before = False
    _patched_roots.add(model)


def _restore(modules) -> int:
    n = 0
    for m in modules:
        if _is_ours(m):
            del m.__dict__["forward"]
            n += 1
    return n


def _release(model: nn.Module) -> None:
    global _pairing_before
    _patched_roots.discard(model)
    if not _patched_roots and _pairing_before is not None:
        from . import enable_autograd
        enable_autograd(_pairing_before)
        _pairing_before = None


def patch(model: nn.Module, *, rms_norm: bool = True, layer_norm: bool = True, mlp: bool = True,
          rope: bool = True) -> PatchSummary:
    """Replaces, in `model`, every module tileops serves (module docstring) and returns what it did.
    Modules it does not recognise are left as they are. Patch before torch.compile."""
    return _patch(model, ARCHITECTURES, rms_norm=rms_norm, layer_norm=layer_norm, mlp=mlp, rope=rope)


def unpatch(model: nn.Module) -> int:
    """Gives every module tileops patched its class's forward back; returns how many."""
    n = _restore(model.modules())
    _release(model)
    return n


@contextlib.contextmanager
def patched(model: nn.Module, **switches):
    """`with tileops.patched(model) as summary:`; on exit the modules this call patched are restored."""
    summary = patch(model, **switches)
    try:
        yield summary
    finally:
        _restore(summary._modules)
        if not any(_is_ours(m) for m in model.modules()):
            _release(model)


def _arch_patcher(arch: str):
    def apply(model: nn.Module, *, rms_norm: bool = True, layer_norm: bool = True, mlp: bool = True,
              rope: bool = True) -> PatchSummary:
        return _patch(model, (arch,), rms_norm=rms_norm, layer_norm=layer_norm, mlp=mlp, rope=rope, require=arch)
    apply.__name__ = apply.__qualname__ = f"apply_to_{arch}"
    apply.__doc__ = (f"patch(model) for a {_CLASS_PREFIX[arch]} model only (raises if it holds none of its "
                     "modules). Unlike Liger's form, it takes the model: classes are never patched process-wide.")
    return apply


apply_to_llama = _arch_patcher("llama")
apply_to_mistral = _arch_patcher("mistral")
apply_to_qwen2 = _arch_patcher("qwen2")
apply_to_qwen3 = _arch_patcher("qwen3")
apply_to_gemma = _arch_patcher("gemma")
apply_to_gemma2 = _arch_patcher("gemma2")
apply_to_phi3 = _arch_patcher("phi3")
