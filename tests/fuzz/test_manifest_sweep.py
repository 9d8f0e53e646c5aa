"""Every operator with a boundary, bent one manifest rule at a time: what the manifest says of each input
(its dtypes, its shape) decides the mutation and the expected answer, so a new entry is covered the day
its contract row exists. The calls are the contract registry's (tests/contracts/); the answers:
  - an input given a dtype its entry does not list (nor any other input of the call has) is refused,
    naming the operator and the input;
  - an input of fixed rank (a shape without `...`, not `any`) given one more dim is refused, naming the
    operator;
  - an input split across devices (one tensor on meta, the rest on the CPU) is refused, naming the
    operator;
  - the same values in non-contiguous inputs give the contiguous call's result;
  - meta inputs give the real call's shapes and dtypes (the generated Meta kernel) and build nothing;
  - a size two tensor dims share by name (`D` in q [B, H, D] and k [B, N_kv, H_kv, D]), grown by one
    in one of them, is refused naming the operator;
  - a size that only one tensor dim names, changed by one so that a shape rule relating it to other
    sizes by an expression turns false, is refused naming the operator and the rule;
  - each shape rule bounding a param by a number, broken by the nearest value it refuses, is refused
    naming the operator and the rule;
  - every contract row has a float64 oracle: the entry's ref_api where it is a torch function taking
    the op's arguments in schema order, else its formula written out below (REF_API_CALLS). The
    answer is that oracle's on the inputs widened to float64, within one rounding to the result's
    dtype; an in-place op's answer is what it writes.
"""
import math
import re

import pytest
import torch

import tileops
from compile_contract import CONTRACT
from support.decode_oracle import bottom_right, gather_pages
from support.philox import dropout_factor

ENTRIES = {e["class"]: e for e in tileops.op_table()}
CLASSES = sorted(CONTRACT)
ERRORS = (TypeError, RuntimeError, ValueError, IndexError)
FOREIGN = (torch.complex64, torch.int16, torch.float64, torch.bool)


def foreign_dtype(spec, inputs):
    """A dtype the input's manifest entry does not name and no tensor of the call has (so no same_as
    rule can let it through)."""
    present = {a.dtype for a in inputs if isinstance(a, torch.Tensor)}
    allowed = {d.strip() for d in spec["dtype"].split("|")}
    return next(d for d in FOREIGN if str(d).removeprefix("torch.") not in allowed and d not in present)


def call(op_class):
    op, inputs = CONTRACT[op_class]("cpu")
    return op, list(inputs), ENTRIES[op_class]


def tensor_inputs(entry, inputs):
    """(position, manifest input) of each tensor argument; contract rows pass inputs in manifest order."""
    spec = entry["inputs"]
    return [(i, spec[i]) for i, a in enumerate(inputs) if isinstance(a, torch.Tensor) and i < len(spec)]


def fresh(inputs):
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in inputs]


def flat(result):
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return [t for r in result for t in flat(r)]
    return []


def refusal(op, inputs, entry):
    """The message of the error the call raises; fails the test if it raises none or names no operator."""
    with pytest.raises(ERRORS) as info:
        op(*inputs)
    msg = str(info.value)
    names = [o["name"] for o in entry["operators"]]
    assert any(f"tileops::{n}" in msg for n in names), f"the error names none of {names}: {msg}"
    return msg


@pytest.mark.parametrize("op_class", CLASSES)
def test_a_dtype_outside_the_manifest_is_refused(op_class):
    op, inputs, entry = call(op_class)
    slots = tensor_inputs(entry, inputs)
    assert slots, "no tensor input to bend"
    for i, spec in slots:
        bad = fresh(inputs)
        bad[i] = bad[i].to(foreign_dtype(spec, inputs))
        msg = refusal(op, bad, entry)
        assert spec["name"] in msg, f"input {spec['name']!r} ({spec['dtype']}) refused without its name: {msg}"


@pytest.mark.parametrize("op_class", CLASSES)
def test_one_more_dim_on_a_fixed_rank_input_is_refused(op_class):
    op, inputs, entry = call(op_class)
    fixed = [(i, s) for i, s in tensor_inputs(entry, inputs)
             if s["shape"] and s["shape"] != "any" and "..." not in s["shape"]]
    if not fixed:
        pytest.skip("every tensor input takes any rank")
    for i, spec in fixed:
        bad = fresh(inputs)
        bad[i] = bad[i].unsqueeze(0)
        refusal(op, bad, entry)


def _symbols(op, entry, inputs):
    """{(position, dim): size name} for the call's tensor inputs, from their manifest shapes: bare
    symbols ('[B, H, D]'; after '...' counted from the end), a list param's dims ('*normalized_shape'),
    'same_as(x)' (x's names) and 'along(x, k)' (x's dim k). Dims of 'any' inputs share a name where
    broadcasting makes them meet with sizes above 1 (right-aligned)."""
    names, slots = {}, tensor_inputs(entry, inputs)
    position = {spec["name"]: i for i, spec in slots}
    for i, spec in slots:
        shape, rank = (spec["shape"] or "").strip(), inputs[i].dim()
        m = re.fullmatch(r"same_as\((\w+)\)", shape)
        if m and m.group(1) in position:
            j = position[m.group(1)]
            names.update({(i, d): names.get((j, d), f"{m.group(1)}#{d}") for d in range(rank)})
            names.update({(j, d): names.get((j, d), f"{m.group(1)}#{d}") for d in range(rank)})
            continue
        m = re.fullmatch(r"along\((\w+),\s*(-?\d+)\)", shape)
        if m and m.group(1) in position and rank == 1:
            j, k = position[m.group(1)], int(m.group(2))
            k %= inputs[j].dim()
            names[(i, 0)] = names.setdefault((j, k), f"{m.group(1)}#{k}")
            continue
        if shape == "any":
            for d in range(rank):
                if inputs[i].shape[d] > 1:
                    names[(i, d)] = f"broadcast#{d - rank}"
            continue
        if not shape.startswith("["):
            continue
        dims = []
        for tok in (t.strip() for t in shape[1:-1].split(",") if t.strip()):
            if tok.startswith("*") and isinstance(getattr(op, tok[1:], None), (list, tuple)):
                dims += [f"{tok[1:]}[{k}]" for k in range(len(getattr(op, tok[1:])))]
            else:
                dims.append(tok)
        first = 0
        if dims[:1] == ["..."]:
            dims, first = dims[1:], rank - len(dims) + 1
        elif "..." in dims or len(dims) != rank:
            continue
        for k, sym in enumerate(dims):
            if re.fullmatch(r"[A-Za-z_]\w*(\[\d+\])?", sym) and first + k >= 0:
                names[(i, first + k)] = sym
    return names


def _shared_dims(op, entry, inputs):
    """(position, dim, name) of every tensor dim whose size another tensor dim of the call shares by
    name: the manifest says those sizes are equal."""
    seen = {}
    for (i, d), sym in _symbols(op, entry, inputs).items():
        seen.setdefault(sym, []).append((i, d))
    return [(i, d, sym) for sym, where in seen.items() if len({i for i, _ in where}) > 1 or len(where) > 1
            for i, d in where]


@pytest.mark.parametrize("op_class", CLASSES)
def test_a_shared_dim_that_disagrees_is_refused(op_class):
    # Two inputs whose manifest shapes name the same size (q [B, H, D], k [B, N_kv, H_kv, D]): one of
    # them one larger there is refused before any work, naming the operator.
    op, inputs, entry = call(op_class)
    shared = _shared_dims(op, entry, inputs)
    if not shared:
        pytest.skip("no size named by two tensor dims")
    for i, d, sym in shared:
        bad = fresh(inputs)
        t = bad[i]
        size = list(t.shape)
        size[d] += 1
        grown = torch.zeros(size, dtype=t.dtype)
        grown.narrow(d, 0, t.shape[d]).copy_(t)
        bad[i] = grown
        with pytest.raises(ERRORS) as info:
            op(*bad)
        msg = str(info.value)
        names = [o["name"] for o in entry["operators"]]
        assert any(f"tileops::{n}" in msg for n in names), f"{sym} of input {i} grown: {msg}"


def _contract_manifest_ops():
    """The code generator's model of every manifest entry that has a contract row (its rules parsed)."""
    import glob
    import os
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, os.path.join(root, "scripts"))
    from codegen.__main__ import load_ops
    return [op for op in load_ops(glob.glob(os.path.join(root, "manifests", "*.yaml")), root) if op.cls in CONTRACT]


def _rule_dims():
    """(op class, the rules the change breaks, input position, dim, new size) for each shape rule
    relating sizes by an expression ('C_in == C_in_g * groups', 'routes == T * top_k', 'H % H_kv ==
    0'): a dim the rule names by a symbol no other tensor dim shares, grown or shrunk by one so that
    the rule, evaluated in Python on the contract row's sizes and params, turns false."""
    out = []
    for mop in _contract_manifest_ops():
        op, inputs, entry = call(mop.cls)
        names = _symbols(op, entry, inputs)
        where = {}
        for (i, d), sym in names.items():
            where.setdefault(sym, []).append((i, d))
        params = {p["name"] for p in entry["params"]}
        free = {sym: w[0] for sym, w in where.items() if len(w) == 1 and sym.isidentifier() and sym not in params}
        position = {spec["name"]: i for i, spec in tensor_inputs(entry, inputs)}
        env = {p["name"]: getattr(op, p["name"], None) for p in entry["params"]}
        env.update({sym: inputs[i].shape[d] for sym, (i, d) in free.items()})
        env.update(select=lambda c, a, b: a if c else b, ndim=lambda t: t.dim(),
                   given=lambda v: v is not None, **{n: inputs[i] for n, i in position.items() if n not in env})
        def broken_by(binding):  # the op's rules that the binding makes false (those Python can read)
            out = []
            for r in mop.rules:
                try:
                    if not eval(r.text, {}, binding):
                        out.append(r.text)
                except Exception:  # noqa: BLE001
                    pass
            return tuple(out)

        for rule in mop.rules:
            syms = [t for t in re.findall(r"[A-Za-z_]\w*", rule.text) if t in free]
            try:
                if not syms or not eval(rule.text, {}, dict(env)):
                    continue
            except Exception:  # noqa: BLE001 - a rule Python cannot read as written is left to the per-op tests
                continue
            for sym in dict.fromkeys(syms):
                i, d = free[sym]
                for size in (env[sym] + 1, env[sym] - 1):
                    try:
                        broken = size >= 1 and not eval(rule.text, {}, {**env, sym: size})
                    except Exception:  # noqa: BLE001 - the other side of an 'or' names what Python lacks
                        broken = False
                    if broken:
                        out.append(pytest.param(mop.cls, broken_by({**env, sym: size}), i, d, size,
                                                id=f"{mop.cls}-{rule.text}-{sym}"))
                        break
    return out


@pytest.mark.parametrize("op_class,rules,i,d,size", _rule_dims())
def test_a_size_that_breaks_an_expression_rule_is_refused_naming_it(op_class, rules, i, d, size):
    op, inputs, entry = call(op_class)
    bad = fresh(inputs)
    t = bad[i]
    shape = list(t.shape)
    shape[d] = size
    keep = min(size, t.shape[d])
    grown = torch.zeros(shape, dtype=t.dtype)
    grown.narrow(d, 0, keep).copy_(t.narrow(d, 0, keep))
    bad[i] = grown
    msg = refusal(op, bad, entry)
    assert any(r in msg for r in rules), f"refused naming none of the rules it breaks {rules}: {msg}"


@pytest.mark.parametrize("op_class", CLASSES)
def test_inputs_on_two_devices_are_refused(op_class):
    op, inputs, entry = call(op_class)
    slots = tensor_inputs(entry, inputs)
    if len(slots) < 2:
        pytest.skip("one tensor input")
    for i, _ in slots:
        bad = fresh(inputs)
        bad[i] = bad[i].to("meta")
        refusal(op, bad, entry)


def spread(t):
    """t's values in a non-contiguous tensor: every dim's stride doubled (a tensor of one element or none
    has no non-contiguous form and is copied)."""
    if t.numel() <= 1:
        return t.clone()
    big = torch.zeros([2 * n for n in t.shape], dtype=t.dtype)
    view = big[tuple(slice(None, None, 2) for _ in t.shape)]
    view.copy_(t)
    assert not view.is_contiguous() and torch.equal(view, t)
    return view


@pytest.mark.parametrize("op_class", CLASSES)
def test_non_contiguous_inputs_give_the_contiguous_result(op_class):
    op, inputs, entry = call(op_class)
    torch.manual_seed(0)
    want_args = fresh(inputs)
    want = flat(op(*want_args))
    torch.manual_seed(0)
    got_args = [spread(a) if isinstance(a, torch.Tensor) else a for a in inputs]
    got = flat(op(*got_args))
    # Within torch's default tolerance: ATen's CPU loops take a vectorised path for contiguous data and a
    # scalar one otherwise, a last-bit difference in some functions (mish, softplus, pow).
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, equal_nan=True)
    for g, w in zip(got_args, want_args):  # inputs the op writes end alike too
        if isinstance(g, torch.Tensor):
            torch.testing.assert_close(g, w, equal_nan=True)


@pytest.mark.parametrize("op_class", CLASSES)
def test_meta_inputs_give_the_real_shapes_and_build_nothing(op_class, counters):
    op, inputs, entry = call(op_class)
    real = flat(op(*fresh(inputs)))
    before = counters()["kernel_builds"]
    meta = flat(op(*[a.to("meta") if isinstance(a, torch.Tensor) else a for a in inputs]))
    assert [(t.device.type, t.shape, t.dtype) for t in meta] == [("meta", t.shape, t.dtype) for t in real]
    assert counters()["kernel_builds"] == before


def _bound_rules():
    """(op class, rule, param, value breaking it) for every shape rule that bounds one param by a number
    ('0 < base', 'topk > 0', 'eps >= 0'), read from the manifests through the code generator's model."""
    flip = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}
    out = []
    for op in _contract_manifest_ops():
        params = {p.name: p for p in op.params}
        for rule in op.rules:
            m = re.fullmatch(r"\s*(-?[\d.]+|[A-Za-z_]\w*)\s*(<=|>=|<|>|!=|==)\s*(-?[\d.]+|[A-Za-z_]\w*)\s*", rule.text)
            if not m:
                continue
            left, cmp, right = m.groups()
            if left in params and right not in params:
                name, cmp, bound = left, cmp, right
            elif right in params and left not in params:
                name, cmp, bound = right, flip[cmp], left
            else:
                continue
            p = params[name]
            if p.type not in ("int", "float") or re.fullmatch(r"-?[\d.]+", bound) is None:
                continue
            num = float(bound) if p.type == "float" else int(float(bound))
            step = 1 if p.type == "int" else 0.5
            # the nearest value the rule refuses: `p > 0` -> 0, `p >= 0` -> -1 (or -0.5), `p != 1` -> 1
            bad = {">": num, "<": num, ">=": num - step, "<=": num + step, "!=": num, "==": num + step}[cmp]
            out.append(pytest.param(op.cls, rule.text, name, bad, id=f"{op.cls}-{rule.text}"))
    return out


@pytest.mark.parametrize("op_class,rule,name,bad", _bound_rules())
def test_each_param_bound_broken_is_refused_naming_the_rule(op_class, rule, name, bad):
    # Every rule that bounds a param by a number, broken by the nearest value it refuses in an otherwise
    # valid call (the contract row's), is refused before any work naming the operator and the rule.
    op, inputs, entry = call(op_class)
    params = {p["name"]: getattr(op, p["name"]) for p in entry["params"]}
    params[name] = bad
    bent = type(op)(**params, target=op.target, inplace=op.inplace)
    msg = refusal(bent, fresh(inputs), entry)
    assert rule in msg and name in msg, f"refused without the rule {rule!r}: {msg}"


# Results against the float64 oracle: one rounding to the result's dtype plus the reduction order.
ORACLE_TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.float16: dict(rtol=2e-3, atol=1e-3),
              torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2)}


def assert_rounds_alike(got, want):
    # an 8-bit float result: what the float64 answer rounds to, or its neighbour where the answer lies
    # within 1e-3 (relative) of a rounding boundary (float32 arithmetic before the one rounding)
    lo, hi = ((want * (1 + d)).to(got.dtype).double() for d in (-1e-3, 1e-3))
    g = got.double()
    ok = ((g >= torch.minimum(lo, hi)) & (g <= torch.maximum(lo, hi))) | (g.isnan() & want.isnan())
    assert ok.all(), (g[~ok][:8], want[~ok][:8])


F = torch.nn.functional


def _halves(x):
    d = x.shape[-1] // 2
    return x[..., :d], x[..., d:]


def _sdpa(q, k, v, is_causal, gqa=False):
    # the entries' [B, S, H, D] as SDPA's [B, H, S, D], and back
    o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                       is_causal=is_causal, enable_gqa=gqa)
    return o.transpose(1, 2)


def _wide(dtype):
    # a floating dtype param (the accumulation type) widened with the inputs
    return torch.float64 if dtype is not None and dtype.is_floating_point else dtype


def _rms(x, shape, w, eps):
    return F.rms_norm(x, shape, w, eps)


# Entries whose ref_api is the torch function, called with keywords or another argument layout than the
# schema's order: (inputs widened to float64, params) -> the ref_api's answer.
REF_API_CALLS = {
    "AddFwdOp": lambda x, p: torch.add(x[0], x[1], alpha=p["alpha"]),
    "SubFwdOp": lambda x, p: torch.sub(x[0], x[1], alpha=p["alpha"]),
    "DivFwdOp": lambda x, p: torch.div(x[0], x[1], rounding_mode=p["rounding_mode"]),
    "RoundFwdOp": lambda x, p: torch.round(x[0], decimals=p["decimals"]),
    "CumsumFwdOp": lambda x, p: torch.cumsum(x[0], p["dim"], dtype=_wide(p["dtype"])),
    "CumprodFwdOp": lambda x, p: torch.cumprod(x[0], p["dim"], dtype=_wide(p["dtype"])),
    "SumFwdOp": lambda x, p: torch.sum(x[0], p["dim"], keepdim=p["keepdim"], dtype=_wide(p["dtype"])),
    "MeanFwdOp": lambda x, p: torch.mean(x[0], p["dim"], keepdim=p["keepdim"], dtype=_wide(p["dtype"])),
    "ProdFwdOp": lambda x, p: torch.prod(x[0], p["dim"], keepdim=p["keepdim"], dtype=_wide(p["dtype"])),
    "StdFwdOp": lambda x, p: torch.std(x[0], p["dim"], correction=p["correction"], keepdim=p["keepdim"]),
    "VarFwdOp": lambda x, p: torch.var(x[0], p["dim"], correction=p["correction"], keepdim=p["keepdim"]),
    "VarMeanFwdOp": lambda x, p: torch.var_mean(x[0], p["dim"], correction=p["correction"], keepdim=p["keepdim"]),
    "L1NormFwdOp": lambda x, p: torch.linalg.vector_norm(x[0], 1, p["dim"], p["keepdim"]),
    "L2NormFwdOp": lambda x, p: torch.linalg.vector_norm(x[0], 2, p["dim"], p["keepdim"]),
    "InfNormFwdOp": lambda x, p: torch.linalg.vector_norm(x[0], float("inf"), p["dim"], p["keepdim"]),
    "GeluFwdOp": lambda x, p: F.gelu(x[0], approximate=p["approximate"]),
    "QuickGeluFwdOp": lambda x, p: x[0] * torch.sigmoid(1.702 * x[0]),
    "GeluAndMulFwdOp": lambda x, p: (lambda a, b: F.gelu(a) * b)(*_halves(x[0])),
    "GeluTanhAndMulFwdOp": lambda x, p: (lambda a, b: F.gelu(a, approximate="tanh") * b)(*_halves(x[0])),
    "SiluAndMulFwdOp": lambda x, p: (lambda a, b: F.silu(a) * b)(*_halves(x[0])),
    "MulAndSiluFwdOp": lambda x, p: (lambda a, b: a * F.silu(b))(*_halves(x[0])),
    "FatreluAndMulFwdOp": lambda x, p: (lambda a, b: F.threshold(a, p["threshold"], 0.0) * b)(*_halves(x[0])),
    "GemmFwdOp": lambda x, p: (x[0].T if p["trans_a"] else x[0]) @ (x[1].T if p["trans_b"] else x[1]),
    "LayerNormFwdOp": lambda x, p: F.layer_norm(x[0], p["normalized_shape"], *x[1:3], p["eps"]),
    "GroupNormFwdOp": lambda x, p: F.group_norm(x[0], p["num_groups"], *x[1:3], p["eps"]),
    "RMSNormFwdOp": lambda x, p: _rms(x[0], p["normalized_shape"], x[1], p["eps"]),
    "GemmaRMSNormFwdOp": lambda x, p: _rms(x[0], p["normalized_shape"], 1 + x[1], p["eps"]),
    "FusedAddRMSNormFwdOp": lambda x, p: (_rms(x[0] + x[1], p["normalized_shape"], x[2], p["eps"]), x[0] + x[1]),
    "GemmaFusedAddRMSNormFwdOp": lambda x, p: (_rms(x[0] + x[1], p["normalized_shape"], 1 + x[2], p["eps"]),
                                               x[0] + x[1]),
    "Conv1dFwdOp": lambda x, p: _conv(F.conv1d, x, p),
    "Conv2dFwdOp": lambda x, p: _conv(F.conv2d, x, p),
    "Conv3dFwdOp": lambda x, p: _conv(F.conv3d, x, p),
    "MaxPool1dIndicesFwdOp": lambda x, p: F.max_pool1d(x[0], **p, return_indices=True),
    "MaxPool2dIndicesFwdOp": lambda x, p: F.max_pool2d(x[0], **p, return_indices=True),
    "MaxPool3dIndicesFwdOp": lambda x, p: F.max_pool3d(x[0], **p, return_indices=True),
    "AdaptiveMaxPool2dIndicesFwdOp": lambda x, p: F.adaptive_max_pool2d(x[0], p["output_size"], return_indices=True),
    "MultiHeadAttentionFwdOp": lambda x, p: _sdpa(*x[:3], p["is_causal"]),
    "GroupedQueryAttentionFwdOp": lambda x, p: _sdpa(*x[:3], p["is_causal"], gqa=True),
    "MultiHeadAttentionDecodeWithKVCacheFwdOp": lambda x, p: _sdpa(*x[:3], False),
    # entries whose ref_api is a formula, written out here in float64
    "RMSNormBwdOp": lambda x, p: _grads(lambda a, w: F.rms_norm(a, p["normalized_shape"], w, p["eps"]), x[0], x[1:3]),
    "LayerNormBwdOp": lambda x, p: _grads(
        lambda a, w, b: F.layer_norm(a, p["normalized_shape"], w, b, p["eps"]), x[0],
        [x[1], x[2], torch.zeros_like(x[2])]),  # dbias: the gradient of a zero bias
    "SwigluOAIAndMulFwdOp": lambda x, p: (lambda g, u: (u.clamp(-p["limit"], p["limit"]) + 1) * g
                                          * torch.sigmoid(p["alpha"] * g))(x[0][..., 0::2].clamp(max=p["limit"]),
                                                                           x[0][..., 1::2]),
    "GroupedQueryAttentionDecodeWithKVCacheFwdOp": lambda x, p: _attend(
        x[0].unsqueeze(2), x[1].transpose(1, 2), x[2].transpose(1, 2), p["sm_scale"], p["softcap"]).squeeze(2),
    "MultiHeadLatentAttentionDecodeWithKVCacheFwdOp": lambda x, p: _attend(
        torch.cat(x[:2], -1).unsqueeze(2), torch.cat(x[2:4], -1).transpose(1, 2), x[2].transpose(1, 2)).squeeze(2),
    "GroupedQueryAttentionSlidingWindowFwdOp": lambda x, p: _attend(
        *(t.transpose(1, 2) for t in x[:3]),
        keep=bottom_right(x[0].shape[1], x[0].shape[1], p["is_causal"], p["window_size_left"],
                          p["window_size_right"])).transpose(1, 2),
    "MultiHeadAttentionBwdOp": lambda x, p: _attention_bwd(*x, p["is_causal"]),
    "GroupedQueryAttentionBwdOp": lambda x, p: _attention_bwd(*x, p["is_causal"]),
    "BmmFp8KNFwdOp": lambda x, p: x[0] @ x[1] * x[2] * x[3],
    "BmmFp8NKFwdOp": lambda x, p: x[0] @ x[1].transpose(1, 2) * x[2] * x[3],
    "BmmFp8FwdOp": lambda x, p: x[0] @ (x[1].transpose(1, 2) if p["trans_b"] else x[1]) * x[2] * x[3],
    "DeltaNetDecodeFwdOp": lambda x, p: _delta_step(x[0], x[1], x[2], x[3], x[4], 1.0),
    "GatedDeltaNetDecodeFwdOp": lambda x, p: _delta_step(x[0], x[1], x[2], x[4], x[5], torch.exp(x[3])),
    "GLADecodeFwdOp": lambda x, p: (lambda s: (torch.einsum("bhkv,bhk->bhv", s, x[0]) * (
        p["scale"] if p["scale"] > 0 else x[0].shape[-1] ** -0.5), s))(
        torch.exp(x[3])[..., None] * x[4] + torch.einsum("bhk,bhv->bhkv", x[1], x[2])),
    "SSDDecodeFwdOp": lambda x, p: _ssd_step(*x),
    "MHCPostFwdOp": lambda x, p: (x[1][:, :, None] * x[0][:, None, :]).reshape(x[2].shape) + x[2],
    "MoeGroupedGemmNopadFwdOp": lambda x, p: _runs_gemm(*x),
    "GroupedGemmFwdOp": lambda x, p: _runs_gemm(x[0], x[1] if p["transpose_b"] else x[1].transpose(1, 2), *x[2:4]),
    "MoeGateUpFwdOp": lambda x, p: (lambda h: (F.silu if p["activation"] == "silu_and_mul" else F.gelu)(
        h[:, : h.shape[1] // 2]) * h[:, h.shape[1] // 2:])(_runs_gemm(*x)),
    "MoeUnpermuteFwdOp": lambda x, p: p["routed_scaling_factor"] * (
        torch.where(x[1][:, None] >= 0, x[0][x[1].clamp(min=0).long()], 0.0).unflatten(0, x[2].shape)
        * x[2][..., None]).sum(1),
    "SSDStatePassingFwdOp": lambda x, p: _state_passing(*x),
    "CBProducerFwdOp": lambda x, p: (lambda c, b: torch.einsum("bclgn,bcsgn->bcgls", c, b).tril())(
        *(m.unflatten(1, (p["num_chunks"], p["chunk_len"])) for m in x[:2])),
    "MultiHeadAttentionDecodePagedWithKVCacheFwdOp": lambda x, p: torch.stack([
        _attend(x[0][b].transpose(0, 1), *_paged_kv(x, b, p["page_size"]),
                keep=bottom_right(x[0].shape[1], int(x[3][b]), p["is_causal"])).transpose(0, 1)
        for b in range(x[0].shape[0])]),
    "GroupedQueryAttentionDecodePagedWithKVCacheFwdOp": lambda x, p: torch.stack([
        _attend(x[0][b][:, None], *_paged_kv(x, b, p["page_size"]),
                p["sm_scale"], p["softcap"])[:, 0] for b in range(x[0].shape[0])]),
    "GroupedQueryAttentionSlidingWindowVarlenFwdOp": lambda x, p: torch.cat([
        _attend(*(t[int(cu[b]):int(cu[b + 1])].transpose(0, 1) for t, cu in zip(x[:3], (x[3], x[4], x[4]))),
                keep=bottom_right(int(x[3][b + 1] - x[3][b]), int(x[4][b + 1] - x[4][b]), p["is_causal"],
                                   p["window_size_left"], p["window_size_right"])).transpose(0, 1)
        for b in range(x[3].shape[0] - 1)]),
    "RopeNeoxFwdOp": lambda x, p: _rope(x[0], _seq_positions(x[0], p["layout"]), p["base"], x[0].shape[-1]),
    "RopeNonNeoxFwdOp": lambda x, p: _rope(x[0], _seq_positions(x[0], p["layout"]), p["base"], x[0].shape[-1],
                                           pairs=True),
    "RopeNeoxPositionIdsFwdOp": lambda x, p: _rope(x[0], x[1][:, None], p["base"],
                                                   p["rotary_dim"] or x[0].shape[-1]),
    "GLAFwdOp": lambda x, p: _gla(*x, p["scale"]),
    "SSDChunkScanFwdOp": lambda x, p: _chunk_scan(*x),
    "DaCumsumFwdOp": lambda x, p: _da_cumsum(*x, p),
    "SSDChunkStateFwdOp": lambda x, p: _chunk_state(*x),
    "GemmW4A16FwdOp": lambda x, p: x[0] @ _w4_weight(*x[1:], p).T,
    # in-place RoPEs: the answer is the rotated q and k (what the op writes)
    "RopeNeoxCachedFwdOp": lambda x, p: _cached_rope(*x),
    "RopeNonNeoxCachedFwdOp": lambda x, p: _cached_rope(*x, pairs=True),
    "RopeNeoxCachedFlatFwdOp": lambda x, p: _cached_rope_flat(x, p["head_size"]),
    "RopeNonNeoxCachedFlatFwdOp": lambda x, p: _cached_rope_flat(x, p["head_size"], pairs=True),
    "RopeLlama31FwdOp": lambda x, p: _freq_rope(x[0], p["layout"], _llama31_freqs(x[0].shape[-1] // 2, p)),
    "RopeYarnFwdOp": lambda x, p: _freq_rope(x[0], p["layout"], _yarn_freqs(x[0].shape[-1] // 2, p),
                                             p["attn_factor"]),
    "RopeLongRopeFwdOp": lambda x, p: _freq_rope(x[0], p["layout"], *_longrope_freqs(x[0].shape[-1] // 2, x[1], p)),
    "GroupedQueryAttentionPrefillFwdOp": lambda x, p: _varlen_prefill(*x, *[None] * (8 - len(x)), p=p),
    "GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp": lambda x, p: _paged_prefill(*x, p),
    "GatedDeltaNetPrefillBHTDFwdOp": lambda x, p: _gdn_prefill(*x),
    "GatedDeltaNetPrefillBTHDFwdOp": lambda x, p: (lambda o, h: (o.transpose(1, 2), h))(
        *_gdn_prefill(*(t.transpose(1, 2) for t in x))),
    "TopkSelectorFwdOp": lambda x, p: _topk_in_ranges(*x, p["topk"]),
    "MoePermuteAlignFwdOp": lambda x, p: _align_blocks(x[0], p["num_experts"], p["block_size"]),
    "FP8QuantFwdOp": lambda x, p: (lambda scale: (scale, x[0] / scale[..., None]))(
        x[0].abs().amax(-1).clamp(min=1e-4) / 448),
    "RMSNormStaticQuantFwdOp": lambda x, p: _quantised(_rms_rounded(x[0], x[1], p), x[2], p),
    "FusedAddRMSNormStaticQuantFwdOp": lambda x, p: (lambda s: (_quantised(_rms_rounded(s, x[2], p), x[3], p), s))(
        _rounded(x[0] + x[1], p)),
    "RMSNormDynamicQuantFwdOp": lambda x, p: _per_row_quantised(_rms_rounded(x[0], x[1], p),
                                                                x[2] if len(x) > 2 else None, p),
    "FusedAddRMSNormDynamicQuantFwdOp": lambda x, p: (lambda s: (
        *_per_row_quantised(_rms_rounded(s, x[2], p), x[3] if len(x) > 3 else None, p), s))(_rounded(x[0] + x[1], p)),
    "BatchNormBwdOp": lambda x, p: _batch_norm_bwd(*x),
    "GemmFp8FwdOp": lambda x, p: ((x[0] * _k_blocks(x[2], x[0].shape[1])) @ (x[1] * _k_blocks(x[3], x[1].shape[1])).T
                                  + (x[4] if len(x) > 4 and x[4] is not None else 0)),
    "DeepSeekSparseAttentionDecodeWithKVCacheFwdOp": lambda x, p: _sparse_decode(*x, p),
    "MHCPreFwdOp": lambda x, p: _mhc_pre(*x, p),
    "EngramGateConvFwdOp": lambda x, p: _engram_gate_conv(*x, p["eps"]),
    "EngramDecodeFwdOp": lambda x, p: _engram_decode(*x, p),
    "GatedDeltaNetBHTDFwdOp": lambda x, p: _delta_train(*x, p["chunk_size"]),
    "GatedDeltaNetBTHDFwdOp": lambda x, p: (lambda o, h, a: (o.transpose(1, 2), h, *[a.transpose(1, 2)] * 2))(
        *_delta_train(*(t.transpose(1, 2) for t in x), p["chunk_size"])[:3]),
    "DeltaNetFwdOp": lambda x, p: _delta_train(x[0], x[1], x[2], None, x[3], p["chunk_size"]),
    "GatedDeltaNetBwdOp": lambda x, p: _delta_grads(x[0], x[1:6], x[6], p["chunk_size"]),
    "DeltaNetBwdOp": lambda x, p: _delta_grads(x[0], [*x[1:4], None, x[4]], x[5], p["chunk_size"]),
    "GLABwdOp": lambda x, p: _gla_grads(*x, p["chunk_size"], p["scale"]),
    "EngramGateConvBwdOp": lambda x, p: _grads_with_saved(x, p["eps"]),
    "FP8LightningIndexerFwdOp": lambda x, p: _indexer(*x, *[None] * (6 - len(x)), p=p),
    "FusedMoEExpertsNopadPersistent3WGFwdOp": lambda x, p: _fused_experts(
        x[1:4], x[4], x[5], x[8] if len(x) > 8 else None, p),
    "FusedMoeFwdOp": lambda x, p: _fused_experts([x[0], x[2], x[3]], *_route(x[1], x[4] if len(x) > 4 else None, p),
                                                 None, p),
    "DropoutFwdOp": lambda x, p: _dropped(x[0], p),
    "DropoutBwdOp": lambda x, p: _dropped(x[0], p),
    "MoePermuteNopadFwdOp": lambda x, p: _permute_nopad(x[0], x[1], x[2] if len(x) > 2 else None,
                                                        p["num_experts_local"]),
}


# Formulas that round to T, the dtype of the call's first floating input (their entries say where):
# _float64_oracle gives them T as params["input_dtype"].
ROUNDS_TO_INPUT_DTYPE = {"RMSNormStaticQuantFwdOp", "FusedAddRMSNormStaticQuantFwdOp", "RMSNormDynamicQuantFwdOp",
                         "FusedAddRMSNormDynamicQuantFwdOp", "FP8LightningIndexerFwdOp",
                         "FusedMoEExpertsNopadPersistent3WGFwdOp", "FusedMoeFwdOp",
                         "GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp", "GemmW4A16FwdOp"}


def _rounded(t, p):
    # a rounding the entry's formula makes to the inputs' dtype (T in its ref_api)
    return t.to(p["input_dtype"]).double()


def _rms_rounded(s, w, p):
    # vLLM's quant kernels' y = T(T(s * rsqrt(mean(s^2) + eps)) * w)
    return _rounded(_rounded(s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + p["eps"]), p) * w, p)


def _quantised(y, scale, p):
    # float8_e4m3fn saturates at 448 (the int8 contract rows do not exist)
    assert p["quant_dtype"] == torch.float8_e4m3fn
    return (y / scale).clamp(-448, 448)


def _per_row_quantised(y, scale_ub, p):
    top = y.abs().amax(-1, keepdim=True)
    top = top.clamp(max=scale_ub) if scale_ub is not None else top
    scales = (top / 448).clamp(min=1 / (448 * 512))
    return _quantised(y, scales, p), scales


def _batch_norm_bwd(dy, x, w, mean, rstd):
    # training-mode batch norm's gradients from the saved mean and rstd, per channel (dim 1)
    c = lambda t: t.view(1, -1, *([1] * (x.dim() - 2)))  # noqa: E731
    dims = [0] + list(range(2, x.dim()))
    xhat = (x - c(mean)) * c(rstd)
    dbias, dweight = dy.sum(dims), (dy * xhat).sum(dims)
    n = x.numel() // x.shape[1]
    return c(w * rstd) * (dy - c(dbias) / n - xhat * c(dweight) / n), dweight, dbias


def _k_blocks(scale, k):
    # a scale [1, 1] (per tensor) or [rows, ceil(K / 128)] (per row and 128-wide block of K) over [rows, K]
    return scale if scale.numel() == 1 else scale.repeat_interleave(128, 1)[:, :k]


def _sparse_decode(q, kv, indices, p):
    # per (b, s, h): the slots of its KV group's index list that are in range (and causal); a repeated
    # index counts once per slot
    b_n, s_n, h_n, d = q.shape
    dv, group = d - p["dim_tail"], h_n // kv.shape[2]
    scale = p["sm_scale"] if p["sm_scale"] is not None else d ** -0.5
    out = q.new_zeros(b_n, s_n, h_n, dv)
    for b in range(b_n):
        for s in range(s_n):
            for h in range(h_n):
                rows = [i for i in indices[b, s, h // group].tolist() if 0 <= i < kv.shape[1] and (
                    not p["is_causal"] or (i + 1) * p["stride_kv"] - 1 <= p["q_start_index_s"] + s)]
                if rows:
                    keys = kv[b, rows, h // group]
                    out[b, s, h] = torch.softmax(keys @ q[b, s, h] * scale, 0) @ keys[:, :dv]
    return out


def _mhc_pre(phi, x, bias, p):
    # per batch row: gates from x phi over the row's RMS, a Sinkhorn-balanced n x n mix of the n streams
    n = p["n_expand"]
    streams = x.unflatten(1, (n, -1))                                            # [batch, n, c]
    hc = x @ phi
    r = x.pow(2).sum(1, keepdim=True).sqrt() / math.sqrt(x.shape[1]) + 1e-4
    pre = torch.sigmoid(p["alpha_pre"] * hc[:, :n] / r + bias[:n])
    post = 2 * torch.sigmoid(p["alpha_post"] * hc[:, n:2 * n] / r + bias[n:2 * n])
    mix = (p["alpha_res"] * hc[:, 2 * n:] / r + bias[2 * n:]).unflatten(1, (n, n))
    mix = torch.exp(mix - mix.amax(2, keepdim=True))
    for _ in range(p["sinkhorn_repeat"]):
        mix = mix / (mix.sum(2, keepdim=True) + p["sinkhorn_eps"])
        mix = mix / (mix.sum(1, keepdim=True) + p["sinkhorn_eps"])
    return (mix @ streams).flatten(1), (pre[:, :, None] * streams).sum(1), post


def _engram_gate(h, k, v, w_h, w_v, eps, saved=None):
    # Engram's gate: alpha from the normed h . normed k (one weight), vhat = alpha v, u = RMS(vhat) w_v.
    # With saved statistics, each is its saved value and its derivative is taken at that value:
    # rsqrt(mean(x^2) + eps)' = -r^3 x / d, sigmoid' = alpha (1 - alpha)
    def rr(x, name):
        if saved is None:
            return torch.rsqrt(x.pow(2).mean(-1) + eps)
        r, sq = saved[name], x.pow(2).sum(-1)
        return r - r.pow(3) / (2 * x.shape[-1]) * (sq - sq.detach())
    rh, rk = rr(h, "rh"), rr(k, "rk")
    s = (h * rh[..., None] * w_h * k * rk[..., None] * w_h).sum(-1) / math.sqrt(h.shape[-1])
    alpha = torch.sigmoid(s) if saved is None else saved["alpha"] * (1 + (1 - saved["alpha"]) * (s - s.detach()))
    vhat = alpha[..., None] * v if saved is None else _as(saved["vhat"], alpha[..., None] * v)
    rv = rr(vhat, "rv")
    return vhat, vhat * rv[..., None] * w_v, alpha, rh, rk, rv


def _engram_gate_conv(h, k, v, w_h, w_v, conv_w, eps, saved=None):
    vhat, u, alpha, rh, rk, rv = _engram_gate(h, k, v, w_h, w_v, eps, saved)
    taps = conv_w.shape[0]
    padded = torch.cat([u.new_zeros(u.shape[0], taps - 1, u.shape[2]), u], 1)
    c = sum(conv_w[j] * padded[:, j:j + u.shape[1]] for j in range(taps))     # tap taps-1 is the current row
    return F.silu(c) + vhat, vhat, alpha, rh, rk, rv


def _engram_decode(e, h, state, w_k, w_v, w_h, w_rv, conv_w, p):
    vhat, u, *_ = _engram_gate(h, e @ w_k, e @ w_v, w_h, w_rv, p["eps"])
    length, taps = p["max_conv_len"], conv_w.shape[0]
    s = torch.cat([state.new_zeros(state.shape[0], length - state.shape[1], state.shape[2]), state], 1)
    c = conv_w[taps - 1] * u + sum(conv_w[j] * s[:, length - (taps - 1 - j) * p["dilation"]] for j in range(taps - 1))
    return F.silu(c) + vhat, torch.cat([s[:, 1:], u[:, None]], 1)


def _as(value, traced):
    # value in the forward, traced's gradient in the backward: a state or statistic read as given
    return value + (traced - traced.detach())


def _delta_run(q, k, v, g, beta, chunk, starts=None):
    # [B, H, S, ...] through the (gated) delta step from a zero state, or with the state entering
    # chunk c read as starts[:, :, c]: (o, the states at chunk starts and the final one)
    state = q.new_zeros(q.shape[0], q.shape[1], q.shape[3], v.shape[3])
    outs, states = [], []
    for t in range(q.shape[2]):
        if t % chunk == 0:
            state = state if starts is None else _as(starts[:, :, t // chunk], state)
            states.append(state)
        decay = torch.exp(g[:, :, t]) if g is not None else 1.0
        o, state = _delta_step(q[:, :, t], k[:, :, t], v[:, :, t], beta[:, :, t], state, decay)
        outs.append(o)
    return torch.stack(outs, 2), torch.stack(states + [state], 2)


def _wy_inverse(k, beta, g, chunk):
    # per chunk: A = (I + strict_lower(diag(beta) (exp(G_i - G_j) k_i . k_j)))^-1, G the prefix sums of g
    kc, bc = k.unflatten(2, (-1, chunk)), beta.unflatten(2, (-1, chunk))
    gc = g.unflatten(2, (-1, chunk)).cumsum(-1) if g is not None else torch.zeros_like(bc)
    m = bc[..., None] * torch.exp(gc[..., :, None] - gc[..., None, :]) * (kc @ kc.transpose(-1, -2))
    return torch.linalg.inv(torch.eye(chunk, dtype=k.dtype, device=k.device) + m.tril(-1))


def _delta_train(q, k, v, g, beta, chunk):
    # the training forward: o, h, aw = au = A; DeltaNet's (no g) adds w = A diag(beta) K, u = A diag(beta) V
    o, h = _delta_run(q, k, v, g, beta, chunk)
    a = _wy_inverse(k, beta, g, chunk)
    rows = a.flatten(2, 3)
    if g is not None:
        return o, h, rows, rows
    scaled = lambda t: beta.unflatten(2, (-1, chunk))[..., None] * t.unflatten(2, (-1, chunk))  # noqa: E731
    return o, h, rows, rows, (a @ scaled(k)).flatten(2, 3), (a @ scaled(v)).flatten(2, 3)


def _delta_grads(dout, inputs, h, chunk):
    # gradients of sum(o * dout) through the token recurrence, each chunk entered with h's state
    leaves = [t if t is None else t.detach().clone().requires_grad_() for t in inputs]  # q, k, v, g?, beta
    o, _ = _delta_run(*leaves, chunk, starts=h)
    return torch.autograd.grad(o, [t for t in leaves if t is not None], dout)


def _gla_grads(q, k, v, g, h, dout, dht, chunk, scale):
    # [B, S, H, ...]: gradients of sum(o * dout) + sum(final_state * dht), chunk c entered with h[:, c]
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v, g)]
    q, k, v, g = leaves
    scale = scale if scale > 0 else q.shape[-1] ** -0.5
    state, outs = h[:, 0], []
    for t in range(q.shape[1]):
        if t % chunk == 0:
            state = _as(h[:, t // chunk], state)
        state = torch.exp(g[:, t])[..., None] * state + torch.einsum("bhk,bhv->bhkv", k[:, t], v[:, t])
        outs.append(scale * torch.einsum("bhkv,bhk->bhv", state, q[:, t]))
    return torch.autograd.grad((torch.stack(outs, 1), state), leaves, (dout, dht))


def _grads_with_saved(x, eps):
    # EngramGateConvBwdOp: y's gradients, the forward's statistics (vhat, alpha, rrms_*) read as saved
    dy, saved = x[0], dict(zip(("vhat", "alpha", "rh", "rk", "rv"), x[7:12]))
    leaves = [t.detach().clone().requires_grad_() for t in x[1:7]]
    y = _engram_gate_conv(*leaves, eps, saved=saved)[0]
    return torch.autograd.grad(y, leaves, dy)


def _indexer(q, k, weights, ks, ke, k_scale, *, p):
    # per (b, s, n, g): sum over the group's heads of relu(q8 . k8) weights[s, h], times k's scale
    if p["input_dtype"] == torch.bfloat16:  # the op's own quantisation, in float32 as it is defined
        q = q.to(torch.float8_e4m3fn).double()
        k_scale = k.float().abs().amax(-1).clamp(min=1e-4) / 448
        k = (k.float() * (1 / k_scale)[..., None]).to(torch.float8_e4m3fn).double()
    k_scale = k_scale.double() if k_scale is not None else torch.ones(k.shape[:3], dtype=torch.float64,
                                                                      device=k.device)
    rep = q.shape[2] // k.shape[2]
    dots = torch.einsum("bshd,bnhd->bsnh", q, k.repeat_interleave(rep, 2)).relu() * weights[None, :, None, :]
    logits = dots.unflatten(3, (k.shape[2], rep)).sum(-1) * k_scale[:, None]
    if p["clean_logits"]:
        n = k.shape[1]
        for s in range(q.shape[1]):
            lo = min(max(int(ks[s]), 0), n)
            hi = min(max(int(ke[s]), lo), n)
            logits[:, s, :lo], logits[:, s, hi:] = float("-inf"), float("-inf")
    return logits


def _route(logits, bias, p):
    # scores by softmax or sigmoid; top_k by score (+ bias), ties to the lower expert; weights the scores
    scores = logits.softmax(-1) if p["scoring_func"] == "softmax" else logits.sigmoid()
    pick = scores + bias if bias is not None else scores
    ids = torch.tensor([sorted(range(scores.shape[1]), key=lambda e: (-float(row[e]), e))[:p["top_k"]]
                        for row in pick], device=logits.device)
    weights = scores.gather(1, ids)
    return (weights / weights.sum(1, keepdim=True) if p["renormalize"] else weights), ids


def _fused_experts(tensors, weights, ids, expert_map, p):
    # each route: act(gate) * up rounded, the down product rounded, weighted sums, scaled, rounded once
    hidden, w_gate_up, w_down = tensors
    act = F.silu if p["activation"] == "silu_and_mul" else F.gelu
    out = torch.zeros_like(hidden)
    for t in range(ids.shape[0]):
        for j in range(ids.shape[1]):
            e = int(ids[t, j]) if expert_map is None else int(expert_map[ids[t, j]])
            if e >= 0:
                gate, up = (w_gate_up[e] @ hidden[t]).chunk(2)
                out[t] += weights[t, j] * _rounded(w_down[e] @ _rounded(act(gate) * up, p), p)
    return out * p["routed_scaling_factor"]


def _dropped(x, p):
    # element i (row-major) times 0 or 1 / float32(1 - p) by word i of the seed's Philox stream
    factor = dropout_factor(x.numel(), p["p"], p["seed"], p["training"]).to(x.device, torch.float64)
    return x * factor.view(x.shape)


def _rotate(x, cos, sin, pairs=False):
    # the first 2 * cos.shape[-1] dims of x rotated: Neox halves, or adjacent pairs; the rest kept
    half = cos.shape[-1]
    rot = 2 * half
    x1, x2 = (x[..., 0:rot:2], x[..., 1:rot:2]) if pairs else (x[..., :half], x[..., half:rot])
    y1, y2 = x1 * cos - x2 * sin, x2 * cos + x1 * sin
    rotated = torch.stack([y1, y2], -1).flatten(-2) if pairs else torch.cat([y1, y2], -1)
    return torch.cat([rotated, x[..., rot:]], -1)


def _cached_rope(positions, q, k, cache, pairs=False):
    # vLLM's layout: cache row p = [cos(p f_i) for i < rot/2, sin(p f_i) for i < rot/2], one per token
    half = cache.shape[-1] // 2
    rows = cache[positions.long()][:, None]                                   # [t, 1, rot]
    turn = lambda t: None if t is None else _rotate(t, rows[..., :half], rows[..., half:], pairs)  # noqa: E731
    return turn(q), turn(k)


def _cached_rope_flat(x, head_size, pairs=False):
    positions, q, k, cache = x[:4]
    offsets = x[4] if len(x) > 4 else None
    rows = positions + offsets if offsets is not None else positions
    heads = lambda t: None if t is None else t.unflatten(1, (-1, head_size))  # noqa: E731
    return [t if t is None else t.flatten(1) for t in _cached_rope(rows, heads(q), heads(k), cache, pairs)]


def _freq_rope(x, layout, freqs, amplitude=1.0):
    # TileOPs' x-form RoPE at the sequence positions with the given frequencies [half]
    angle = _seq_positions(x, layout).double()[..., None] * freqs.to(x.device)
    return _rotate(x, amplitude * angle.cos(), amplitude * angle.sin())


def _llama31_freqs(half, p):
    # Llama 3.1: by wavelength, keep high frequencies, divide low ones by scale_factor, blend between
    f = p["base"] ** (-torch.arange(half, dtype=torch.float64) / half)
    wavelength, orig = 2 * math.pi / f, p["original_max_position"]
    lo, hi = p["low_freq_factor"], p["high_freq_factor"]
    smooth = (orig / wavelength - lo) / (hi - lo)
    blended = (1 - smooth) * f / p["scale_factor"] + smooth * f
    return torch.where(wavelength < orig / hi, f, torch.where(wavelength > orig / lo, f / p["scale_factor"], blended))


def _yarn_freqs(half, p):
    # TileOPs' YaRN: interpolated (scale * base)^(-e), extrapolated base^(-e), a linear ramp over dims
    i = torch.arange(half, dtype=torch.float64)
    base, orig = p["base"], p["original_max_position"]
    dim = lambda r: half * math.log(orig / (2 * math.pi * r)) / (2 * math.log(base))  # noqa: E731
    low, high = max(math.floor(dim(p["beta_fast"])), 0), min(math.ceil(dim(p["beta_slow"])), half - 1)
    high += low == high
    keep = 1 - ((i - low) / (high - low)).clamp(0, 1)
    return (p["scale"] * base) ** (-i / half) * (1 - keep) + base ** (-i / half) * keep


def _longrope_freqs(half, factors, p):
    # LongRoPE: base frequencies over the rescale factors; an amplitude when the context is extended
    r = factors.cpu() if factors is not None else torch.ones(half, dtype=torch.float64)
    f = 1 / (r * p["base"] ** (torch.arange(half, dtype=torch.float64) / half))
    orig = p["original_max_position_embeddings"]
    s = p["max_position_embeddings"] / orig
    return f, math.sqrt(1 + math.log(s) / math.log(orig)) if s > 1 else 1.0


def _varlen_prefill(q, k, v, cu_q, cu_kv, q_scale, k_scale, v_scale, *, p):
    # per request: its query rows against its KV rows, bottom-right aligned, each head group scaled
    outs = []
    for b in range(cu_q.shape[0] - 1):
        rows = [t[int(cu[b]):int(cu[b + 1])].transpose(0, 1) for t, cu in ((q, cu_q), (k, cu_kv), (v, cu_kv))]
        group = q.shape[1] // k.shape[1]
        for i, sc in enumerate((q_scale, k_scale, v_scale)):
            if sc is not None:
                rows[i] = rows[i] * sc[b].repeat_interleave(group if i == 0 else 1)[:, None, None]
        keep = bottom_right(rows[0].shape[1], rows[1].shape[1], p["is_causal"], p["window_size_left"],
                            p["window_size_right"])
        outs.append(_attend(*rows, p["sm_scale"], p["softcap"], keep).transpose(0, 1))
    return torch.cat(outs)


def _paged_prefill(q, k_new, v_new, k_pages, v_pages, k_scale, v_scale, cu_q, cache_len, table, p):
    # per request: (RoPE at n + i) then the n cached keys (times the pool's scale) and the new ones
    outs = []
    for b in range(cache_len.shape[0]):
        n, lo, hi = int(cache_len[b]), int(cu_q[b]), int(cu_q[b + 1])
        qb, kb = q[lo:hi], k_new[lo:hi]
        if p["fuse_rope"]:  # RopeNeoxPositionIdsFwdOp's: its table and its answer in q's dtype
            pos = torch.arange(n, n + hi - lo, device=q.device)[:, None]
            qb, kb = (_rope(t, pos, p["rope_base"], p["rotary_dim"] or q.shape[-1], rounded=p) for t in (qb, kb))
        keys = torch.cat([gather_pages(k_pages, table[b], n, p["page_size"]) * (1 if k_scale is None else k_scale), kb])
        vals = torch.cat([gather_pages(v_pages, table[b], n, p["page_size"]) * (1 if v_scale is None else v_scale),
                          v_new[lo:hi]])
        keep = bottom_right(hi - lo, n + hi - lo, p["is_causal"])
        outs.append(_attend(qb.transpose(0, 1), keys.transpose(0, 1), vals.transpose(0, 1), p["sm_scale"],
                            p["softcap"], keep).transpose(0, 1))
    return torch.cat(outs)


def _gdn_prefill(q, k, v, g, beta):
    # [B, H, S, ...]: GatedDeltaNetDecodeFwdOp's step per token from a zero state: (o, final state)
    o, states = _delta_run(q, k, v, g, beta, q.shape[2])
    return o, states[:, :, -1]


def _topk_in_ranges(score, starts, ends, topk):
    # each (b, s, g) row: positions in [starts, ends) by descending score (NaN first), ties by position
    b_n, s_n, n, g_n = score.shape
    out = torch.full((b_n, s_n, g_n, topk), -1, dtype=torch.int64)
    for b in range(b_n):
        for s in range(s_n):
            lo, hi = min(max(int(starts[b, s]), 0), n), min(max(int(ends[b, s]), 0), n)
            for g in range(g_n):
                vals = score[b, s, :, g].tolist()
                order = sorted(range(lo, hi), key=lambda j: (not math.isnan(vals[j]), -vals[j], j))[:topk]
                out[b, s, g, :len(order)] = torch.tensor(order, dtype=torch.int64)
    return out.to(score.device)


def _align_blocks(ids, num_experts, block):
    # each expert's routes (ascending flat index) padded with numel to whole blocks; -1 past used blocks
    routes, numel = ids.flatten().tolist(), ids.numel()
    slots, owners = [], []
    for e in range(num_experts):
        mine = [f for f, x in enumerate(routes) if x == e]
        padded = -(-len(mine) // block) * block
        slots += mine + [numel] * (padded - len(mine))
        owners += [e] * (padded // block)
    total = numel + (num_experts + 1) * (block - 1)
    as_t = lambda v: torch.tensor(v, dtype=torch.int64, device=ids.device)  # noqa: E731
    return (as_t(slots + [numel] * (total - len(slots))), as_t(owners + [-1] * (-(-total // block) - len(owners))),
            as_t([len(slots)]))


def _permute_nopad(hidden, ids, expert_map, local):
    # route f = t * top_k + k to local expert map[ids[t, k]] (or ids itself); rows by expert, then by f
    routes = ids.flatten().tolist()
    to_local = [expert_map[x].item() if expert_map is not None else x for x in routes]
    sizes = [to_local.count(e) for e in range(local)]
    offsets = [sum(sizes[:e]) for e in range(local)]
    perm, fwd, cursor = hidden[:1].repeat(len(routes), 1), [-1] * len(routes), list(offsets)
    for f, e in enumerate(to_local):
        if e >= 0:
            fwd[f], perm[cursor[e]] = cursor[e], hidden[f // ids.shape[1]]
            cursor[e] += 1
    as_t = lambda v: torch.tensor(v, dtype=torch.int64, device=ids.device)  # noqa: E731
    return perm, as_t(offsets), as_t(sizes), as_t(offsets + [len([e for e in to_local if e >= 0])]), as_t(fwd)


def _da_cumsum(dt, a, bias, p):
    # dt' = clamp(softplus?(dt + bias), dt_min, dt_max) as [B, H, NC, Q]; da_cumsum its prefix sums times a
    d = dt + bias if bias is not None else dt
    d = F.softplus(d) if p["dt_softplus"] else d
    d = d.clamp(p["dt_min"], p["dt_max"]).permute(0, 2, 1).unflatten(2, (-1, p["chunk_len"]))
    return d, (d * a[:, None, None]).cumsum(-1)


def _chunk_state(x, bmat, dt, da, seq_idx):
    # states[c, h] = sum_q exp(min(da[c, -1] - da[c, q], 0)) dt[c, q] x[cQ+q, h] (outer) bmat[cQ+q, g(h)]
    nc, q = da.shape[2], da.shape[3]
    rep = x.shape[2] // bmat.shape[2]
    w = torch.exp((da[..., -1:] - da).clamp(max=0)) * dt                            # [B, H, NC, Q]
    if seq_idx is not None:  # a position counts where its sequence is the chunk's last one, and not -1
        ids = seq_idx.unflatten(1, (nc, q))
        w = w * ((ids == ids[..., -1:]) & (ids[..., -1:] >= 0))[:, None]
    bm = bmat.unflatten(1, (nc, q)).repeat_interleave(rep, 3)                        # [B, NC, Q, H, N]
    return torch.einsum("bhcq,bcqhp,bcqhn->bchpn", w, x.unflatten(1, (nc, q)), bm)


def _w4_weight(packed, scale, zero, p):
    # w[n, k] = T((q[n, k] - zero) * T(s)), nibbles low = even k: the 16-bit weight the entry defines
    q = torch.stack([packed & 15, packed >> 4], -1).flatten(1).double()
    g = torch.arange(q.shape[1], device=q.device) // p["group_size"]
    return _rounded((q - zero.double()[:, g]) * _rounded(scale, p)[:, g], p)


def _seq_positions(x, layout):
    # TileOPs' x-form RoPE: the token at index p of the sequence axis (dim 0 for '1d', 1 for '2d') is at p,
    # shaped to broadcast over the dims after it
    s = x.shape[0] if layout == "1d" else x.shape[1]
    return torch.arange(s, device=x.device).view(s, *([1] * (x.dim() - 2 if layout == "1d" else x.dim() - 3)))


def _rope(x, pos, base, rot, pairs=False, rounded=None):
    # the first `rot` dims rotated by angle pos * base^(-i / half): Neox halves, or adjacent pairs;
    # with rounded (params holding input_dtype), the table and the answer rounded to that dtype
    half = rot // 2
    ang = pos.double()[..., None] * base ** (-torch.arange(half, dtype=torch.float64, device=x.device) / half)
    if rounded is None:
        return _rotate(x, ang.cos(), ang.sin(), pairs)
    return _rounded(_rotate(x, _rounded(ang.cos(), rounded), _rounded(ang.sin(), rounded), pairs), rounded)


def _gla(q, k, v, g, initial, scale):
    # GLADecodeFwdOp's step per token from the initial state (zeros when absent): (o, final_state)
    state = initial if initial is not None else q.new_zeros(q.shape[0], q.shape[2], q.shape[3], v.shape[3])
    scale = scale if scale > 0 else q.shape[-1] ** -0.5
    outs = []
    for t in range(q.shape[1]):
        state = torch.exp(g[:, t])[..., None] * state + torch.einsum("bhk,bhv->bhkv", k[:, t], v[:, t])
        outs.append(scale * torch.einsum("bhkv,bhk->bhv", state, q[:, t]))
    return torch.stack(outs, 1), state


def _chunk_scan(x, cb, da, c, prev, dt):
    # y[l] = exp(da[l]) c[l] . prev + sum_{s <= l} cb[l, s] exp(da[l] - da[s]) dt[s] x[s], per chunk and head
    nc, q = da.shape[2], da.shape[3]
    rep = x.shape[2] // c.shape[2]
    cm = c.unflatten(1, (nc, q)).repeat_interleave(rep, 3)                       # [B, NC, Q, H, N]
    da_c = da.permute(0, 2, 3, 1)                                                # [B, NC, Q, H]
    carried = torch.exp(da_c)[..., None] * torch.einsum("bclhn,bchpn->bclhp", cm, prev)
    decay = torch.exp(da[..., :, None] - da[..., None, :]).permute(0, 2, 1, 3, 4)  # [B, NC, H, Q, Q]
    w = (cb.repeat_interleave(rep, 2) * decay).tril() * dt.permute(0, 2, 1, 3)[:, :, :, None, :]
    inner = torch.einsum("bchls,bcshp->bclhp", w, x.unflatten(1, (nc, q)))
    return (carried + inner).flatten(1, 2)



def _paged_kv(x, b, page_size):
    # request b's keys and values [H_kv, N, D] from the pools x[1], x[2] (lengths x[3], block table x[4])
    return [gather_pages(pool, x[4][b], int(x[3][b]), page_size).transpose(0, 1) for pool in x[1:3]]


def _state_passing(states, da, initial):
    s = initial if initial is not None else states.new_zeros(states[:, 0].shape)
    chunks = []
    for c in range(states.shape[1]):
        chunks.append(s)
        s = torch.exp(da[:, :, c])[..., None] * s + states[:, c]
    return torch.stack(chunks, 1), s


def _grads(f, dy, tensors):
    """torch.autograd.grad(f(*tensors), tensors, dy): a norm backward's ref_api, one gradient a tensor."""
    leaves = [t.detach().clone().requires_grad_() for t in tensors]
    return torch.autograd.grad(f(*leaves), leaves, dy)


def _attend(q, k, v, scale=None, softcap=None, keep=None):
    # q [..., H, S_q, D] over k, v [..., H_kv, S_kv, D]: query head h reads KV head h // (H / H_kv)
    rep = q.shape[-3] // k.shape[-3]
    k, v = k.repeat_interleave(rep, -3), v.repeat_interleave(rep, -3)
    s = q @ k.transpose(-1, -2) * (scale if scale is not None else q.shape[-1] ** -0.5)
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    if keep is not None:
        s = s.masked_fill(~keep.to(s.device), float("-inf"))
    return s.softmax(-1).nan_to_num(0.0) @ v



def _attention_bwd(q, k, v, o, dout, lse, causal):
    # the entries' formula from the given o and base-2 lse: P = exp2(s log2(e) - lse), dv = P^T dout,
    # dS = P (dout v^T - rowsum(dout o)), dq = dS k / sqrt(D), dk = dS^T q / sqrt(D); GQA sums a group
    q, k, v, o, dout = (t.transpose(1, 2) for t in (q, k, v, o, dout))  # [B, H, S, D]
    rep = q.shape[1] // k.shape[1]
    kr, vr = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    scale = q.shape[-1] ** -0.5
    s = q @ kr.transpose(-1, -2) * scale
    p = torch.exp2(s * math.log2(math.e) - lse.double()[..., None])
    if causal:
        p = p.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), 0.0)
    dv = p.transpose(-1, -2) @ dout
    ds = p * (dout @ vr.transpose(-1, -2) - (dout * o).sum(-1, keepdim=True))
    dq, dk = ds @ kr * scale, ds.transpose(-1, -2) @ q * scale
    group = lambda t: t.unflatten(1, (k.shape[1], rep)).sum(2)  # noqa: E731
    return tuple(t.transpose(1, 2) for t in (dq, group(dk), group(dv)))


def _delta_step(q, k, v, beta, state, a):
    # one (gated) delta-rule step: v_new = beta (v - a state^T k), new = a state + k v_new^T, o = new^T q
    a = a[..., None, None] if isinstance(a, torch.Tensor) else a
    v_new = beta[..., None] * (v - torch.einsum("bhkv,bhk->bhv", a * state, k))
    new = a * state + torch.einsum("bhk,bhv->bhkv", k, v_new)
    return torch.einsum("bhkv,bhk->bhv", new, q), new


def _ssd_step(a, dt, x, b_in, c_in, state):
    rep = dt.shape[1] // b_in.shape[1]
    b, c = b_in.repeat_interleave(rep, 1), c_in.repeat_interleave(rep, 1)  # [B, H, N]
    new = torch.exp(dt[..., None] * a) * state + (dt * x)[..., None] * b[:, :, None, :]
    return (new * c[:, :, None, :]).sum(-1)


def _runs_gemm(a, b, sizes, offsets):
    c = a.new_zeros(a.shape[0], b.shape[1])
    for e, (n, off) in enumerate(zip(sizes.tolist(), offsets.tolist())):
        c[off:off + n] = a[off:off + n] @ b[e].T
    return c


def _conv(fn, x, p):
    pad = p["padding_str"] if p["padding_str"] is not None else p["padding"]
    return fn(x[0], x[1], x[2] if len(x) > 2 else None, p["stride"], pad, p["dilation"], p["groups"])


def _float64_oracle(op_class, op, inputs):
    """The entry's ref_api as a float64 oracle of a call: its answer on the call's floating inputs
    widened to float64. Where ref_api is a torch function that takes the op's arguments in schema order
    (tensor inputs, then params) it is called as written; REF_API_CALLS calls the others; None where the
    ref_api is prose."""
    import re
    entry = ENTRIES[op_class]
    params = {p["name"]: getattr(op, p["name"]) for p in entry["params"]}
    wide = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in inputs]
    if op_class in REF_API_CALLS:
        if op_class in ROUNDS_TO_INPUT_DTYPE:
            params["input_dtype"] = next(a.dtype for a in inputs
                                         if isinstance(a, torch.Tensor) and a.is_floating_point())
        return flat(REF_API_CALLS[op_class](wide, params))
    if not re.fullmatch(r"torch(\.\w+)+", entry["ref_api"] or ""):
        return None
    fn = eval(entry["ref_api"], {"torch": torch})  # a dotted name in torch, e.g. torch.nn.functional.silu
    try:
        return flat(fn(*wide, *params.values()))
    except (TypeError, RuntimeError, ValueError, IndexError):
        return None


ORACLES = sorted(c for c in CLASSES if _float64_oracle(c, *CONTRACT[c]("cpu")) is not None)


def test_every_contract_row_has_a_float64_oracle():
    # an entry whose signature drifts from its ref_api drops out, and a new entry needs its formula here
    assert sorted(set(CLASSES) - set(ORACLES)) == []
    assert set(REF_API_CALLS) <= set(ORACLES)


# Oracles whose CUDA rows have not run on a GPU yet (docs/CONTRACT.md §6: a GPU test lands unverified).
UNVERIFIED_ON_GPU = {"RMSNormBwdOp", "LayerNormBwdOp", "SwigluOAIAndMulFwdOp",
                     "GroupedQueryAttentionDecodeWithKVCacheFwdOp", "MultiHeadLatentAttentionDecodeWithKVCacheFwdOp",
                     "GroupedQueryAttentionSlidingWindowFwdOp", "MultiHeadAttentionBwdOp", "GroupedQueryAttentionBwdOp",
                     "BmmFp8KNFwdOp", "BmmFp8NKFwdOp", "BmmFp8FwdOp", "DeltaNetDecodeFwdOp",
                     "GatedDeltaNetDecodeFwdOp", "GLADecodeFwdOp", "SSDDecodeFwdOp", "MHCPostFwdOp",
                     "MoeGroupedGemmNopadFwdOp", "GroupedGemmFwdOp", "MoeGateUpFwdOp", "MoeUnpermuteFwdOp",
                     "SSDStatePassingFwdOp", "CBProducerFwdOp", "MultiHeadAttentionDecodePagedWithKVCacheFwdOp",
                     "GroupedQueryAttentionDecodePagedWithKVCacheFwdOp", "GroupedQueryAttentionSlidingWindowVarlenFwdOp",
                     "RopeNeoxFwdOp", "RopeNonNeoxFwdOp", "RopeNeoxPositionIdsFwdOp", "GLAFwdOp", "SSDChunkScanFwdOp",
                     "DaCumsumFwdOp", "SSDChunkStateFwdOp", "GemmW4A16FwdOp", "RopeNeoxCachedFwdOp",
                     "RopeNonNeoxCachedFwdOp", "RopeNeoxCachedFlatFwdOp", "RopeNonNeoxCachedFlatFwdOp",
                     "RopeLlama31FwdOp", "RopeYarnFwdOp", "RopeLongRopeFwdOp", "GroupedQueryAttentionPrefillFwdOp",
                     "GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp", "GatedDeltaNetPrefillBHTDFwdOp",
                     "GatedDeltaNetPrefillBTHDFwdOp", "TopkSelectorFwdOp", "MoePermuteAlignFwdOp",
                     "MoePermuteNopadFwdOp", "FP8QuantFwdOp", "RMSNormStaticQuantFwdOp",
                     "FusedAddRMSNormStaticQuantFwdOp", "RMSNormDynamicQuantFwdOp", "FusedAddRMSNormDynamicQuantFwdOp",
                     "BatchNormBwdOp", "GemmFp8FwdOp", "DeepSeekSparseAttentionDecodeWithKVCacheFwdOp", "MHCPreFwdOp",
                     "EngramGateConvFwdOp", "EngramDecodeFwdOp", "GatedDeltaNetBHTDFwdOp", "GatedDeltaNetBTHDFwdOp",
                     "DeltaNetFwdOp", "GatedDeltaNetBwdOp", "DeltaNetBwdOp", "GLABwdOp", "EngramGateConvBwdOp",
                     "FP8LightningIndexerFwdOp", "FusedMoEExpertsNopadPersistent3WGFwdOp", "FusedMoeFwdOp",
                     "DropoutFwdOp", "DropoutBwdOp"}


def _oracle_cases():
    gpu = [pytest.mark.gpu]
    return [pytest.param(c, d, id=f"{c}-{d}", marks=[] if d == "cpu" else
                         gpu + ([pytest.mark.unverified_gpu] if c in UNVERIFIED_ON_GPU else []))
            for d in ("cpu", "cuda") for c in ORACLES]


@pytest.mark.parametrize("op_class,device", _oracle_cases())
def test_answers_match_the_ref_api_in_float64(op_class, device):
    # on CUDA this compares what serves the op there (the nvrtc kernels) with torch's float64 answer
    op, inputs = CONTRACT[op_class](device)
    inputs = list(inputs)
    want = _float64_oracle(op_class, op, inputs)
    args = fresh(inputs)
    got = flat(op(*args))
    if not ENTRIES[op_class]["outputs"]:  # an in-place op: its answer is what it wrote, in input order
        got = [a for a, i in zip(args, ENTRIES[op_class]["inputs"]) if i["mutated"] != "no" and a is not None]
    assert want and got
    for g, w in zip(got, want):  # every output the ref_api gives, in the entry's order
        assert g.shape == w.shape, (g.shape, w.shape)
        if g.dtype.itemsize == 1 and g.is_floating_point():
            assert_rounds_alike(g, w)
        elif g.is_floating_point():
            torch.testing.assert_close(g.double(), w.to(g.dtype).double(), equal_nan=True, **ORACLE_TOL[g.dtype])
        else:
            assert torch.equal(g, w.to(g.dtype))
