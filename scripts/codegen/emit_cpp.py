"""Stage 3: emit C++ from the model records (never reads YAML).

Outputs (all in the build folder):
  registration_<k>.cpp  the TORCH_LIBRARY block (k = 0) and its fragments: per operator its def and
                    its impls side by side, plus the generated checks, Meta kernels, boundaries and
                    autograd guards
  op_table.cpp      the op table: classes, operator names, compile_op_names, JSON for Python
  ops.h             op ids, input/output/param indices and typed call views for in-tree targets
"""
from __future__ import annotations

import json
import re

from . import exprs
from .model import DTYPES, NO_DEFAULT, Branch, Op, Output, Param, returned_outputs


def banner(sources) -> str:
    srcs = ", ".join(sorted(set(sources)))
    return f"// Generated from {srcs} by scripts/codegen; do not edit.\n"


def cpp_str(s: str) -> str:
    return json.dumps(s)  # a JSON string literal is a valid C++ string literal for our ASCII text


# ---------------------------------------------------------------------------------------------------
# Types


def param_cpp_type(p: Param) -> str:
    base = {
        "int": "int64_t",
        "float": "double",
        "bool": "bool",
        "str": "c10::string_view",
        "int[]": "c10::SymIntArrayRef",
        "Device": "c10::Device",
        "ScalarType": "c10::ScalarType",
        "Scalar": "const at::Scalar&",
        "SymInt": "c10::SymInt",
    }[p.type]
    if p.nullable and p.type == "Scalar":
        return "const std::optional<at::Scalar>&"
    if p.length:  # int[N]: a constant list, as torch's own int[2] kernel_size
        return "at::OptionalIntArrayRef" if p.nullable else "c10::IntArrayRef"
    if p.nullable:
        return "at::OptionalSymIntArrayRef" if p.type == "int[]" else f"std::optional<{base}>"
    return base


def schema_default(p: Param) -> str:
    v = p.default
    if v is NO_DEFAULT:
        return ""
    if v is None:
        return "=None"
    if isinstance(v, bool):
        return "=True" if v else "=False"
    if isinstance(v, tuple):
        return "=[" + ",".join(str(x) for x in v) + "]"
    if p.type == "str":
        return "=" + repr(v).replace('"', "'")
    if p.type == "ScalarType":
        return "=" + {"float16": "half", "bfloat16": "bfloat16", "float32": "float", "float64": "double"}.get(v, v)
    return f"={v}"


def branch_args(op: Op, branch: Branch):
    """(schema text, C++ type, C++ name) per argument, in schema order (target last)."""
    args, letters = [], iter("abcdefghijklmnopqrstuvwxy")
    for i in op.inputs:
        if i.name in branch.writes:
            ann = f"Tensor({next(letters)}!)" + ("?" if i.optional else "")
        else:
            ann = "Tensor?" if i.optional else "Tensor"
        ctype = "const std::optional<at::Tensor>&" if i.optional else "const at::Tensor&"
        args.append((f"{ann} {i.name}", ctype, i.name))
    if branch.out:
        args.append((f"Tensor(z!) out", "const at::Tensor&", "out"))
    for p in op.params:
        args.append((f"{p.schema_type} {p.name}{schema_default(p)}", param_cpp_type(p), p.name))
    # An optional input that only defaulted arguments follow defaults to None, as in torch's own
    # schemas (clamp.Tensor's `Tensor? min=None`): callers may leave it out.
    for k in range(len(args) - 1, -1, -1):
        text = args[k][0]
        if text.startswith("Tensor? "):
            args[k] = (text + "=None",) + args[k][1:]
        elif "=" not in text:
            break
    return args


def schema(op: Op, branch: Branch) -> str:
    args = branch_args(op, branch)
    text = ", ".join(a[0] for a in args)
    if op.has_boundary:
        text += (", " if text else "") + "*, str? target=None"
    rets = returned_outputs(op, branch)
    ret = "()" if not rets else ("Tensor" if len(rets) == 1 else "(" + ", ".join("Tensor" for _ in rets) + ")")
    return f"{op.operator_name(branch)}({text}) -> {ret}"


def return_type(op: Op, branch: Branch) -> str:
    n = len(returned_outputs(op, branch))
    return "void" if n == 0 else ("at::Tensor" if n == 1 else "std::tuple<" + ", ".join(["at::Tensor"] * n) + ">")


def cpp_params(op: Op, branch: Branch, with_target: bool) -> str:
    parts = [f"{t} {n}" for _, t, n in branch_args(op, branch)]
    if with_target:
        parts.append("std::optional<c10::string_view> target")
    return ", ".join(parts)


def cpp_arg_names(op: Op, branch: Branch, with_target: bool) -> str:
    names = [n for _, _, n in branch_args(op, branch)]
    if with_target:
        names.append("target")
    return ", ".join(names)


def fn_type(op: Op, branch: Branch) -> str:
    types = [t for _, t, _ in branch_args(op, branch)]
    if op.has_boundary:
        types.append("std::optional<c10::string_view>")
    return f"{return_type(op, branch)}({', '.join(types)})"


# ---------------------------------------------------------------------------------------------------
# Expressions over SymInt


class Env:
    def __init__(self, op: Op):
        self.op = op
        self.symbols: dict[str, str] = {}  # bound symbol -> C++ member expression
        self.bound_order: list[str] = []

    def name(self, n: str) -> str:
        if n in self.symbols:
            return self.symbols[n]
        p = self.op.param(n)
        if p is not None and p.type == "int":
            return f"c10::SymInt({n}{'.value()' if p.nullable else ''})"
        raise KeyError(n)

    def sym_list(self, n: str) -> str:
        """A list param as c10::SymIntArrayRef (int[N] params are IntArrayRef in C++)."""
        p = self.op.param(n)
        return f"tileops::check::sym_ints(kOp, {cpp_str(n)}, {n})" if p is not None and p.length else n

    def expr(self, node) -> str:
        if isinstance(node, exprs.Num):
            return f"c10::SymInt(int64_t{{{node.value}}})"
        if isinstance(node, exprs.Name):
            return self.name(node.id)
        if isinstance(node, exprs.Call) and node.fn == "select":
            flag, yes, no = node.args
            return f"({flag.id} ? {self.expr(yes)} : {self.expr(no)})"
        if isinstance(node, exprs.Call) and node.fn in exprs.INT_FUNCTIONS:
            return f"tileops::check::sym_{node.fn}({self.expr(node.args[0])})"
        if isinstance(node, exprs.Call):
            arg = node.args[0].id
            return {
                "len": f"c10::SymInt(static_cast<int64_t>({arg}.size()))",
                "prod": f"tileops::check::sym_prod({self.sym_list(arg)})",
                "ndim": f"c10::SymInt({arg}.dim())",
                "numel": f"{arg}.sym_numel()",
                "elem_size": f"c10::SymInt(static_cast<int64_t>({arg}.element_size()))",
            }[node.fn]
        if isinstance(node, exprs.Bin):
            op = "/" if node.op == "//" else node.op
            return f"({self.expr(node.lhs)} {op} {self.expr(node.rhs)})"
        raise TypeError(node)


def present(op: Op, name: str) -> str:
    i = op.input(name)
    return f"tileops::check::present({name})" if i.optional else "true"


def tensor_ref(op: Op, name: str) -> str:
    i = op.input(name)
    if i.optional and op.given_cases:
        # an absent optional input of an elementwise entry stands in as its first input: neutral to the
        # broadcast shape and the promoted dtype (the expression of the call's case does not read it)
        return f"(tileops::check::present({name}) ? *{name} : {op.inputs[0].name})"
    return f"(*{name})" if i.optional else name


def first_required_input(op: Op):
    return next((i for i in op.inputs if not i.optional), None)


# ---------------------------------------------------------------------------------------------------
# Checks (shared by the Meta kernel and the boundary, SymInt-aware)


def emit_shapes_struct(op: Op, env: Env) -> list[str]:
    lines = [f"struct {op.base_name}__Shapes {{"]
    if any(isinstance(o.shape, exprs.Broadcast) for o in op.outputs):
        lines.append("  c10::SymDimVector broadcast;  // broadcast_shapes() of the inputs")
    if any(isinstance(i.shape, exprs.ShapeList) and any(isinstance(d, exprs.Ellipsis_) for d in i.shape.dims)
           for i in op.inputs):
        lines.append("  c10::SymIntArrayRef ellipsis;  // the dims matched by '...'")
        lines.append("  bool ellipsis_bound = false;")
    for inp in op.inputs:
        if isinstance(inp.shape, exprs.ShapeList):
            for d in inp.shape.dims:
                if not isinstance(d, (exprs.Ellipsis_, exprs.Splice)):
                    for n in sorted(exprs.names_in(d)):
                        if op.param(n) is None and n not in env.symbols:
                            env.symbols[n] = f"s.sym_{n}"
                            lines.append(f"  c10::SymInt sym_{n};")
    for key in _reductions(op):
        lines.append(f"  uint64_t {_mask_name(key)} = 0;  // bit d: dim d of '{key[0]}' is reduced")
    for o in _pooled(op):
        lines.append(f"  c10::SymDimVector pooled_{o.name};  // {exprs.render(o.shape)}")
    lines.append("};")
    return lines


def _reductions(op: Op) -> list:
    """The distinct (input, dim param, listed) of the op's reduced output shapes, in output order."""
    keys = []
    for o in op.outputs:
        if isinstance(o.shape, exprs.Reduced):
            key = (o.shape.input, o.shape.dim, o.shape.listed)
            if key not in keys:
                keys.append(key)
    return keys


def _pooled(op: Op) -> list:
    return [o for o in op.outputs if isinstance(o.shape, (exprs.Pooled, exprs.AdaptivePooled, exprs.Convolved))]


def _list_arg(op: Op, name: str) -> str:
    """An int[N] or int[N]? param as a SymIntArrayRef (None: empty)."""
    if op.param(name).nullable:
        return f"({name}.has_value() ? tileops::check::sym_ints(kOp, {cpp_str(name)}, *{name}) : c10::SymIntArrayRef())"
    return f"tileops::check::sym_ints(kOp, {cpp_str(name)}, {name})"


def emit_pooled_shapes(op: Op) -> list[str]:
    """pool(...) / adaptive_pool(...) / conv(...): torch's output size, refusing what torch refuses
    (docs/MANIFEST.md)."""
    out = []
    for o in _pooled(op):
        sh = o.shape
        t = tensor_ref(op, sh.input)
        if isinstance(sh, exprs.Convolved):
            pad_str = (f"{cpp_str(sh.padding_str)}, {sh.padding_str}" if sh.padding_str
                       else "nullptr, std::nullopt")
            out.append(f"s.pooled_{o.name} = tileops::check::conv_shape(kOp, {cpp_str(sh.input)}, {t}.sym_sizes(), "
                       f"{cpp_str(sh.weight)}, {tensor_ref(op, sh.weight)}.sym_sizes(), {op.param(sh.stride).length}, "
                       f"{{{cpp_str(sh.stride)}, {cpp_str(sh.padding)}, {cpp_str(sh.dilation)}}}, "
                       f"{{{_list_arg(op, sh.stride)}, {_list_arg(op, sh.padding)}, {_list_arg(op, sh.dilation)}}}, "
                       f"{pad_str});")
            continue
        if isinstance(sh, exprs.AdaptivePooled):
            out.append(f"s.pooled_{o.name} = tileops::check::adaptive_pool_shape(kOp, {cpp_str(sh.input)}, "
                       f"{t}.sym_sizes(), {op.param(sh.output_size).length}, {cpp_str(sh.output_size)}, "
                       f"{_list_arg(op, sh.output_size)});")
            continue
        dil = sh.dilation
        out.append(f"s.pooled_{o.name} = tileops::check::pool_shape(kOp, {cpp_str(sh.input)}, {t}.sym_sizes(), "
                   f"{op.param(sh.kernel).length}, {{{cpp_str(sh.kernel)}, {cpp_str(sh.stride)}, {cpp_str(sh.padding)}, "
                   f"{cpp_str(dil) if dil else 'nullptr'}}}, {{{_list_arg(op, sh.kernel)}, {_list_arg(op, sh.stride)}, "
                   f"{_list_arg(op, sh.padding)}, {_list_arg(op, dil) if dil else 'c10::SymIntArrayRef()'}}}, "
                   f"{sh.ceil_mode});")
    return out


def _mask_name(key) -> str:
    return f"reduce_{key[0]}_{key[1]}" + ("_listed" if key[2] else "")


def emit_reduce_masks(op: Op) -> list[str]:
    """The reduced dims, checked like torch's (in range, none repeated), as a bit mask per reduction."""
    out = []
    for key in _reductions(op):
        t = tensor_ref(op, key[0])
        out.append(f"s.{_mask_name(key)} = tileops::check::reduce_mask(kOp, {cpp_str(key[1])}, {t}.dim(), {key[1]}, "
                   f"{'true' if key[2] else 'false'});")
    return out


def emit_where(op: Op, env: Env, names: set[str], bound_now: set[str]) -> str:
    """A C++ expression describing the values of the names a spec mentions, for error messages."""
    parts = []
    for n in sorted(names):
        p = op.param(n)
        if p is not None:
            parts.append(f"tileops::check::describe({cpp_str(n)}, {env.sym_list(n)})")
        elif n in bound_now:
            parts.append(f"tileops::check::describe({cpp_str(n)}, {env.symbols[n]})")
    return " + ".join(parts) if parts else "std::string()"


def emit_input_shape(op: Op, env: Env, inp, bound: set[str]) -> list[str]:
    t = tensor_ref(op, inp.name)
    if isinstance(inp.shape, exprs.AnyShape):
        return []
    if isinstance(inp.shape, exprs.Along):
        a = inp.shape
        return [f"tileops::check::require_along(kOp, {cpp_str(inp.name)}, {t}, {cpp_str(a.input)}, "
                f"{tensor_ref(op, a.input)}, {a.dim});"]
    if isinstance(inp.shape, exprs.SameAs):
        other = tensor_ref(op, inp.shape.input)
        return [f"if ({present(op, inp.shape.input)} && {t}.sym_sizes() != {other}.sym_sizes())",
                f"  tileops::check::fail_same_shape(kOp, {cpp_str(inp.name)}, {t}, {cpp_str(inp.shape.input)}, {other});"]
    dims = inp.shape.dims
    spec = cpp_str(inp.shape_text)
    names = set()
    for d in dims:
        if isinstance(d, exprs.Splice):
            names.add(d.param)
        elif not isinstance(d, exprs.Ellipsis_):
            names |= exprs.names_in(d)
    has_ell = any(isinstance(d, exprs.Ellipsis_) for d in dims)
    n_fixed = sum(1 for d in dims if not isinstance(d, (exprs.Ellipsis_, exprs.Splice)))
    fixed = " + ".join([str(n_fixed)] + [f"static_cast<int64_t>({d.param}.size())" for d in dims
                                          if isinstance(d, exprs.Splice)])
    out = ["{", f"  const c10::SymIntArrayRef sz = {t}.sym_sizes();",
           f"  const int64_t fixed = {fixed};",
           f"  auto where = [&]() {{ return {emit_where(op, env, names, bound)}; }};",
           f"  if (static_cast<int64_t>(sz.size()) {'<' if has_ell else '!='} fixed)",
           f"    tileops::check::fail_shape(kOp, {cpp_str(inp.name)}, {spec}, where(), sz);",
           "  size_t k = 0;"]
    for d in dims:
        if isinstance(d, exprs.Ellipsis_):  # the first or the last dim: the dims the others leave
            out += ["  const size_t n_ell = sz.size() - fixed;",
                    "  if (!s.ellipsis_bound) { s.ellipsis = sz.slice(k, n_ell); s.ellipsis_bound = true; }",
                    "  else if (s.ellipsis != sz.slice(k, n_ell))",
                    f"    tileops::check::fail_shape(kOp, {cpp_str(inp.name)}, {spec}, where() + "
                    f"tileops::check::describe(\"...\", s.ellipsis), sz);",
                    "  k += n_ell;"]
        elif isinstance(d, exprs.Splice):
            out += [f"  for (size_t i = 0; i < {d.param}.size(); ++i)",
                    f"    if (sz[k + i] != {d.param}[i]) tileops::check::fail_shape(kOp, {cpp_str(inp.name)}, {spec}, where(), sz);",
                    f"  k += {d.param}.size();"]
        else:
            unbound = [n for n in exprs.names_in(d) if n in env.symbols and n not in bound]
            if isinstance(d, exprs.Name) and unbound:
                out.append(f"  {env.symbols[d.id]} = sz[k];")
                bound.add(d.id)
            elif (isinstance(d, exprs.Bin) and d.op == "*" and isinstance(d.lhs, exprs.Num)
                  and isinstance(d.rhs, exprs.Name) and unbound == [d.rhs.id]):
                c = d.lhs.value
                out += [f"  if (sz[k] % {c} != 0) tileops::check::fail_shape(kOp, {cpp_str(inp.name)}, {spec}, where(), sz);",
                        f"  {env.symbols[d.rhs.id]} = sz[k] / {c};"]
                bound.add(d.rhs.id)
            elif unbound:
                raise ValueError(f"{op.path}:{inp.line}: {op.cls}: input '{inp.name}': cannot solve dim "
                                 f"'{exprs.render(d)}' for {unbound}; bind them with a bare name first")
            else:
                out.append(f"  if (sz[k] != {env.expr(d)}) tileops::check::fail_shape(kOp, {cpp_str(inp.name)}, "
                           f"{spec}, where(), sz);")
        if not isinstance(d, (exprs.Ellipsis_, exprs.Splice)):
            out.append("  k += 1;")
    out.append("}")
    return out


def emit_dtype_check(op: Op, name: str, rule, t: str) -> list[str]:
    if rule.kind == "union":
        allowed = ", ".join(DTYPES[n] for n in rule.names)
        return [f"tileops::check::require_dtype(kOp, {cpp_str(name)}, {t}, {{{allowed}}}, {cpp_str(rule.text)});"]
    if rule.kind == "same_as":
        ref = rule.ref
        guard = f"if ({present(op, ref)}) " if op.input(ref).optional else ""
        return [f"{guard}tileops::check::require_same_dtype(kOp, {cpp_str(name)}, {t}, "
                f"{cpp_str(ref)}, {tensor_ref(op, ref)});"]
    return []  # promote_int_to_float describes outputs


def _condition(op: Op, env: Env, c) -> str:
    if isinstance(c, exprs.Not):
        return f"!{_condition(op, env, c.cond)}"
    if isinstance(c, exprs.Given):  # a nullable param or an optional input
        return f"{c.param}.has_value()" if op.param(c.param) is not None else f"tileops::check::present({c.param})"
    if isinstance(c, exprs.Flag):
        return c.param
    if isinstance(c, exprs.StrIs):
        return f"({c.param} {c.op} {cpp_str(c.value)})"
    if any(p.name in exprs.names_in(c) and p.type == "float" for p in op.params):  # after `not given(p) or`
        return f"({_float_expr(c.lhs, op)} {c.op} {_float_expr(c.rhs, op)})"
    return f"({env.expr(c.lhs)} {c.op} {env.expr(c.rhs)})"


def _float_expr(node, op: Op) -> str:
    """A rule's side over numbers and float / int params, in double (a nullable one known given)."""
    if isinstance(node, exprs.Num):
        return f"{node.value}.0"
    if isinstance(node, exprs.Name):
        return f"(*{node.id})" if op.param(node.id).nullable else f"static_cast<double>({node.id})"
    return f"({_float_expr(node.lhs, op)} {node.op} {_float_expr(node.rhs, op)})"


def emit_rule(op: Op, env: Env, rule) -> list[str]:
    if not isinstance(rule.node, exprs.Cmp):  # given(p), a bool param [or ...]: holds when one condition does
        conds = rule.node.conds if isinstance(rule.node, exprs.Or) else (rule.node,)
        parts = [_condition(op, env, c) for c in conds]
        used = exprs.names_in(rule.node)
        # What the rule reads, in signature order: inputs (there or not), params, then dims of the shapes.
        described = [(i.name, f"tileops::check::describe_input({cpp_str(i.name)}, {i.name})")
                     for i in op.inputs if i.name in used]
        described += [(p.name, f"tileops::check::describe_param({cpp_str(p.name)}, {p.name})")
                      for p in op.params if p.name in used]
        described += [(n, f"tileops::check::describe_param({cpp_str(n)}, {env.symbols[n]})")
                      for n in sorted(used & set(env.symbols))]
        names = [n for n, _ in described]
        where = ' + ", " + '.join(d for _, d in described) or "std::string()"
        fail = "fail_param_rule" if all(op.param(n) is not None for n in names) else "fail_argument_rule"
        return [f"if (!({' || '.join(parts)})) tileops::check::{fail}(kOp, {cpp_str(', '.join(names))}, "
                f"{cpp_str(rule.text)}, {where});"]
    used = exprs.names_in(rule.node)
    if any(p.name in used and p.type == "float" for p in op.params):  # compared in double: NaN breaks it
        names = [p.name for p in op.params if p.name in used]
        where = ' + ", " + '.join(f"tileops::check::describe_param({cpp_str(n)}, {n})" for n in names)
        return [f"if (!({_float_expr(rule.node.lhs, op)} {rule.node.op} {_float_expr(rule.node.rhs, op)})) "
                f"tileops::check::fail_param_rule(kOp, {cpp_str(', '.join(names))}, {cpp_str(rule.text)}, {where});"]
    lhs, rhs = env.expr(rule.node.lhs), env.expr(rule.node.rhs)
    # The values of the int params and the dims of the shapes the rule names, after its two sides.
    values = [f"tileops::check::describe_param({cpp_str(p.name)}, {p.name})" for p in op.params
              if p.name in used and p.type in ("int", "bool") and not p.nullable]  # bool: a select() flag
    values += [f"tileops::check::describe_param({cpp_str(n)}, {env.symbols[n]})" for n in sorted(used & set(env.symbols))]
    where = ' + ", " + '.join(values) or "std::string()"
    return ["{", f"  const c10::SymInt lhs = {lhs};", f"  const c10::SymInt rhs = {rhs};",
            f"  if (!(lhs {rule.node.op} rhs)) tileops::check::fail_rule(kOp, {cpp_str(rule.text)}, lhs, rhs, {where});",
            "}"]


def emit_check_fn(op: Op) -> tuple[list[str], Env]:
    env = Env(op)
    lines = emit_shapes_struct(op, env)
    dummy = Branch((), False, ())
    params = ", ".join(f"{t} {n}" for _, t, n in branch_args(op, dummy))
    lines.append(f"[[maybe_unused]] static {op.base_name}__Shapes {op.base_name}__check("
                 f"{', '.join(['const char* kOp'] + ([params] if params else []))}) {{")
    lines.append(f"  {op.base_name}__Shapes s;")
    body = []
    # Param-only rules first: their message is clearer than a shape mismatch they cause.
    symbol_rules = []
    for r in op.rules:
        if exprs.names_in(r.node) & set(env.symbols):
            symbol_rules.append(r)
        else:
            body += emit_rule(op, env, r)
    for p in op.params:
        if p.choices:
            vals = ", ".join(cpp_str(c) if p.type == "str" else DTYPES[c] if p.type == "ScalarType" else str(c)
                             for c in p.choices)
            desc = cpp_str(" | ".join(str(c) for c in p.choices))
            guard = f"if ({p.name}.has_value()) " if p.nullable else ""
            v = f"*{p.name}" if p.nullable else p.name
            body.append(f"{guard}tileops::check::require_choice(kOp, {cpp_str(p.name)}, {v}, {{{vals}}}, {desc});")
    first = first_required_input(op)
    for i in op.inputs:
        t = tensor_ref(op, i.name)
        check = [f"tileops::check::require_strided(kOp, {cpp_str(i.name)}, {t});"]
        if first is not None and i is not first:
            check.append(f"tileops::check::require_same_device(kOp, {cpp_str(i.name)}, {t}, "
                         f"{cpp_str(first.name)}, {first.name});")
        check += emit_dtype_check(op, i.name, i.dtype, t)
        if i.optional:
            body.append(f"if ({present(op, i.name)}) {{")
            body += ["  " + c for c in check]
            body.append("}")
        else:
            body += check
    if op.dtype_combos:
        # Every combo names the same inputs (the model checks it): report the caller's dtypes of those.
        names = [n for n, _ in op.dtype_combos[0]]

        def dtype_of(n):  # an absent optional input reports Undefined and matches any combo
            t = f"{tensor_ref(op, n)}.scalar_type()"
            return f"({present(op, n)} ? {t} : c10::ScalarType::Undefined)" if op.input(n).optional else t

        conds = []
        for combo in op.dtype_combos:
            conds.append(" && ".join(
                f"(!{present(op, n)} || {tensor_ref(op, n)}.scalar_type() == {DTYPES[d]})" if op.input(n).optional
                else f"{dtype_of(n)} == {DTYPES[d]}" for n, d in combo))
        allowed = ", ".join("(" + ", ".join(d for _, d in combo) + ")" for combo in op.dtype_combos)
        got = ", ".join(dtype_of(n) for n in names)
        body.append(f"if (!(({') || ('.join(conds)}))) tileops::check::fail_dtype_combo(kOp, "
                    f"{cpp_str(', '.join(names))}, {cpp_str(allowed)}, {{{got}}});")
    for o in op.outputs:  # promote(...) / dtype_or(...) in <union>: the result type must be one of those
        cases = o.dtype.cases if o.dtype.kind == "select" else ((None, o.dtype),)
        for v, r in cases:
            if r.kind in ("promote", "promote_float", "dtype_or") and r.names:
                allowed = ", ".join(DTYPES[n] for n in r.names)
                check = (f"tileops::check::require_result_dtype(kOp, {cpp_str(o.name)}, {_rule_expr(op, r)}, "
                         f"{{{allowed}}}, {cpp_str(r.text)});")
                body.append(f"if ({_select_cond(op, o.dtype.ref, v)}) {check}" if o.dtype.kind == "select" else check)
    bound: set[str] = set()
    for i in op.inputs:
        shape_lines = emit_input_shape(op, env, i, bound)
        if i.optional:
            body.append(f"if ({present(op, i.name)}) {{")
            body += ["  " + c for c in shape_lines]
            body.append("}")
        else:
            body += shape_lines
    for r in symbol_rules:
        body += emit_rule(op, env, r)
    body += emit_reduce_masks(op)
    body += emit_pooled_shapes(op)
    bcast = next((o.shape for o in op.outputs if isinstance(o.shape, exprs.Broadcast)), None)
    if bcast is not None:
        names = ", ".join(cpp_str(n) for n in bcast.inputs)
        shapes = ", ".join(f"{tensor_ref(op, n)}.sym_sizes()" for n in bcast.inputs)
        body.append(f"s.broadcast = tileops::check::broadcast_shapes(kOp, {{{names}}}, {{{shapes}}});")
    lines += ["  " + b for b in body]
    lines += ["  return s;", "}"]
    return lines, env


# ---------------------------------------------------------------------------------------------------
# Outputs


def emit_shape(op: Op, env: Env, o: Output, var: str) -> tuple[list[str], str]:
    """Lines building an output's shape from the manifest, and the C++ expression for it."""
    if isinstance(o.shape, exprs.SameAs):
        return [], f"{tensor_ref(op, o.shape.input)}.sym_sizes()"
    if isinstance(o.shape, exprs.Reduced):
        r = o.shape
        keep = r.keepdim or "false"
        return ([f"const auto {var}_shape = tileops::check::reduced_shape({tensor_ref(op, r.input)}.sym_sizes(), "
                 f"s.{_mask_name((r.input, r.dim, r.listed))}, {keep});"], f"{var}_shape")
    if isinstance(o.shape, exprs.Broadcast):
        return [], "c10::SymIntArrayRef(s.broadcast)"
    if isinstance(o.shape, (exprs.Pooled, exprs.AdaptivePooled, exprs.Convolved)):
        return [], f"c10::SymIntArrayRef(s.pooled_{o.name})"
    lines = [f"c10::SmallVector<c10::SymInt, 8> {var}_shape;"]
    for d in o.shape.dims:
        if isinstance(d, exprs.Ellipsis_):
            lines.append(f"{var}_shape.append(s.ellipsis.begin(), s.ellipsis.end());")
        elif isinstance(d, exprs.Splice):
            lines.append(f"{var}_shape.append({d.param}.begin(), {d.param}.end());")
        else:
            lines.append(f"{var}_shape.push_back({env.expr(d)});")
    return lines, f"{var}_shape"


def emit_output_alloc(op: Op, env: Env, o: Output, var: str, options: str, meta: bool) -> list[str]:
    if o.dtype.kind == "union" and len(o.dtype.names) != 1:
        raise ValueError(f"{op.path}:{o.line}: {op.cls}: output '{o.name}' needs one dtype or same_as(input)")
    lines, shape = emit_shape(op, env, o, var)
    # torch.empty with the manifest's shape/dtype: contiguous, never empty_like (docs/CONTRACT.md §4);
    # a boundary allocates CUDA outputs without a second trip through the dispatcher.
    alloc = "at::empty_symint" if meta else "tileops::runtime::empty"
    lines.append(f"{var} = {alloc}({shape}, {options}.dtype({_dtype_expr(op, o)}));")
    return lines


def emit_out_check(op: Op, o: Output, var: str) -> list[str]:
    return [f"tileops::check::require_out(kOp, out, {var});"]


# ---------------------------------------------------------------------------------------------------
# Boundary, Meta, autograd guard per branch


def emit_overlap_guards(op: Op, branch: Branch) -> list[str]:
    """A written tensor (written input or out) may neither overlap itself nor any other argument."""
    args = [(i.name, tensor_ref(op, i.name), i.optional) for i in op.inputs] + ([("out", "out", False)] if branch.out else [])
    written = set(branch.writes) | ({"out"} if branch.out else set())
    body = []
    for name, t, opt in args:
        if name in written:
            check = f"tileops::check::require_no_internal_overlap(kOp, {cpp_str(name)}, {t});"
            body.append(f"if ({present(op, name)}) {check}" if opt else check)
    for k, (a, ta, a_opt) in enumerate(args):
        for b, tb, b_opt in args[k + 1:]:
            if a not in written and b not in written:
                continue
            (w, tw), (r, tr) = ((a, ta), (b, tb)) if a in written else ((b, tb), (a, ta))
            check = f"tileops::check::require_no_overlap(kOp, {cpp_str(w)}, {tw}, {cpp_str(r)}, {tr});"
            absent = [present(op, n) for n, opt in ((a, a_opt), (b, b_opt)) if opt]  # an optional written input too
            body.append(f"if ({' && '.join(absent)}) {check}" if absent else check)
    return body


def _named(body: list[str]) -> list[str]:
    """A body whose every refusal names the op: errors from torch or the allocator get kOp prefixed."""
    return (["  try {"] + ["    " + b for b in body]
            + ["  } catch (...) {", "    tileops::check::rethrow_naming(kOp);", "  }"])


def param_value(p: Param) -> str:
    n = p.name
    if p.length:
        return (f"({n}.has_value() ? tileops::ParamValue::ints(*{n}) : tileops::ParamValue())" if p.nullable
                else f"tileops::ParamValue::ints({n})")
    if p.type == "int[]":
        if p.nullable:
            return f"({n}.has_value() ? tileops::ParamValue::ints(C10_AS_INTARRAYREF_SLOW(*{n})) : tileops::ParamValue())"
        return f"tileops::ParamValue::ints(C10_AS_INTARRAYREF_SLOW({n}))"
    if p.type == "Scalar":  # Int, Real or Bool, as the caller's number is
        return (f"({n}.has_value() ? tileops::check::scalar_value(*{n}) : tileops::ParamValue())" if p.nullable
                else f"tileops::check::scalar_value({n})")
    if p.type == "SymInt":  # a boundary's value: a real call's, concrete (factories take no SymInt)
        return f"tileops::ParamValue::integer({n}.guard_int(__FILE__, __LINE__))"
    ctor = {"int": "integer", "float": "real", "bool": "boolean", "str": "string", "Device": "device",
            "ScalarType": "dtype"}[p.type]
    if p.nullable:
        return f"({n}.has_value() ? tileops::ParamValue::{ctor}(*{n}) : tileops::ParamValue())"
    return f"tileops::ParamValue::{ctor}({n})"


def read_once(op: Op, i) -> str:
    """A `reduced_once` input as the kernel reads it: its broadcast reduced dims as one element."""
    r = next(o.shape for o in op.outputs if isinstance(o.shape, exprs.Reduced))
    return f"tileops::check::broadcast_reduced_once({i.name}, s.{_mask_name((r.input, r.dim, r.listed))})"


def emit_branch(op: Op, env: Env, branch: Branch) -> list[str]:
    name = op.operator_name(branch)
    rets = returned_outputs(op, branch)
    ret_t = return_type(op, branch)
    first = first_required_input(op)
    check_args = ", ".join(n for _, _, n in branch_args(op, Branch((), False, ())))
    lines = [f"// ---- tileops::{name}  ({op.cls}, {op.path}:{op.line})"]

    def guards() -> list[str]:
        """Refusals on real tensors, before any copy, allocation or compute."""
        body = emit_write_checks(op, branch)
        if branch.out:
            o = next(o for o in op.outputs if o.buffer)
            shape_lines, shape = emit_shape(op, env, o, f"expected_{o.name}")
            body += shape_lines
            body.append(f"tileops::check::require_out_like(kOp, out, {first.name}, {shape}, {_dtype_expr(op, o)});")
        body += emit_overlap_guards(op, branch)
        for i in op.inputs:
            if op.elementwise and i.name not in branch.writes:
                continue  # read in place, never copied
            t = read_once(op, i) if i.reduced_once else tensor_ref(op, i.name)
            check = f"tileops::check::require_copy_fits(kOp, {cpp_str(i.name)}, {t});"
            body.append(f"if ({present(op, i.name)}) {check}" if i.optional else check)
        for o in op.outputs:
            if (o.aliases and o.aliases in branch.writes) or o.name in branch.without or (o.buffer and branch.out):
                continue
            shape_lines, shape = emit_shape(op, env, o, f"limit_{o.name}")
            body += shape_lines
            what = cpp_str("output '" + o.name + "'")
            body.append(f"tileops::check::require_alloc_fits(kOp, {what}, {shape}, {_dtype_expr(op, o)});")
        return body

    def allocate(meta: bool) -> list[str]:
        body = []
        for idx, o in enumerate(op.outputs):
            var = f"o_{o.name}"
            body.append(f"at::Tensor {var};")
            if o.aliases and o.aliases in branch.writes:
                if not meta:
                    body.append(f"{var} = w_{o.aliases};")
                continue
            if o.name in branch.without:
                continue
            if o.buffer and branch.out:
                shape_lines, shape = emit_shape(op, env, o, f"expected_{o.name}")
                if meta:  # the boundary checked it among its guards
                    body += shape_lines
                    body.append(f"tileops::check::require_out_like(kOp, out, {first.name}, {shape}, "
                                f"{_dtype_expr(op, o)});")
                else:
                    body.append(f"{var} = out.is_contiguous() ? out : tileops::runtime::empty(out.sym_sizes(), "
                                "out.options());")
                continue
            body += emit_output_alloc(op, env, o, var, f"{first.name}.options()", meta)
        return body

    # Boundary (CUDA and CompositeExplicitAutograd): checks -> contiguous -> target -> kernel -> launch.
    lines.append(f"static {ret_t} {name}__boundary({cpp_params(op, branch, True)}) {{")
    lines.append(f"  static constexpr const char* kOp = {cpp_str('tileops::' + name)};")
    lines.append(f"  [[maybe_unused]] const auto s = {op.base_name}__check(kOp, {check_args});")
    body = guards()
    for w in branch.writes:
        t = tensor_ref(op, w)
        absent = f"!{present(op, w)} ? at::Tensor() : " if op.input(w).optional else ""  # e.g. RoPE's key=None
        body.append(f"at::Tensor w_{w} = {absent}{t}.is_contiguous() ? {t} : {t}.contiguous();")
    body += allocate(meta=False)
    ins = []
    for i in op.inputs:
        if i.name in branch.writes:
            ins.append(f"w_{i.name}")
        elif i.optional and op.elementwise:  # any strides; absent: undefined (the engine picks the case)
            ins.append(f"tileops::check::present({i.name}) ? *{i.name} : at::Tensor()")
        elif i.optional:
            ins.append(f"tileops::check::present({i.name}) ? {i.name}->contiguous() : at::Tensor()")
        elif op.elementwise and isinstance(i.shape, exprs.Along):
            # viewed with the dims it broadcasts along, so the engine's broadcasting reads it
            ins.append(f"tileops::check::along_view({i.name}, {i.shape.input}.dim(), {i.shape.dim})")
        elif op.elementwise:
            ins.append(i.name)  # any strides: the elementwise engine reads them as they are
        elif i.reduced_once:  # a broadcast (stride-0) reduced dim read as one element, never copied out
            ins.append(f"{read_once(op, i)}.contiguous()")
        else:
            ins.append(f"{i.name}.contiguous()")
    body.append(f"const std::array<at::Tensor, {len(ins)}> ins{{{', '.join(ins)}}};")
    body.append(f"const std::array<at::Tensor, {len(op.outputs)}> outs{{{', '.join('o_' + o.name for o in op.outputs)}}};")
    body.append(f"const std::array<tileops::ParamValue, {max(1, len(op.params))}> params{{"
                f"{', '.join(param_value(p) for p in op.params) or 'tileops::ParamValue()'}}};")
    # Nothing to compute when every output is empty; an op that only writes inputs looks at those.
    results = ["o_" + o.name for o in op.outputs] or [f"w_{w}" for w in branch.writes]
    body.append(f"if (!tileops::check::all_empty(std::array<at::Tensor, {len(results)}>{{{', '.join(results)}}})) {{")
    body.append(f"  const tileops::OpCall call{{tileops::ops::{op.base_name}::kId, kOp, {first.name}.device(), "
                f"ins, outs, c10::ArrayRef<tileops::ParamValue>(params.data(), size_t{{{len(op.params)}}})}};")
    body.append("  tileops::runtime::invoke(call, target);")
    body.append("}")
    for w in branch.writes:
        t = tensor_ref(op, w)
        guard = f"{present(op, w)} && " if op.input(w).optional else ""
        body.append(f"if ({guard}!w_{w}.is_same({t})) {t}.copy_(w_{w});  // a non-contiguous written input is written back")
    for o in op.outputs:
        if o.buffer and branch.out:
            body.append(f"if (!o_{o.name}.is_same(out)) out.copy_(o_{o.name});")
    body.append(_return_stmt(rets))
    lines += _named(body)
    lines.append("}")

    # Meta (fake): shapes, dtypes and contiguous strides from the manifest; never builds a kernel.
    lines.append(f"static {ret_t} {name}__meta({cpp_params(op, branch, True)}) {{")
    lines.append(f"  static constexpr const char* kOp = {cpp_str('tileops::' + name)};")
    lines.append(f"  [[maybe_unused]] const auto s = {op.base_name}__check(kOp, {check_args});")
    mbody = emit_write_checks(op, branch) + allocate(meta=True)
    mbody.append(_return_stmt(rets))
    lines += ["  " + b for b in mbody]
    lines.append("}")

    # Autograd guard: no silent graph drop (docs/CONTRACT.md §4): refuse grad-requiring inputs, else go below.
    # A paired branch (manifest autograd:) runs its autograd Function instead when the switch is on.
    tensors = []
    for i in op.inputs:
        tensors.append(f"tileops::check::present({i.name}) ? &*{i.name} : nullptr" if i.optional else f"&{i.name}")
    tensor_list = "{" + ", ".join(tensors) + "}"
    paired = op.pairing is not None and branch == op.pairing.branch()
    lines.append(f"static {ret_t} {name}__autograd({cpp_params(op, branch, True)}) {{")
    hint = ""
    if paired:
        lines.append(f"  if (tileops::autograd_pairing() && tileops::runtime::wants_grad({tensor_list})) {{")
        call = f"{name}__Pair::apply({cpp_arg_names(op, branch, True)})"
        if len(rets) == 1:
            lines.append(f"    return {call};")
        else:
            lines.append(f"    const auto r = {call};")
            lines.append("    return std::make_tuple(" + ", ".join(f"r[{k}]" for k in range(len(rets))) + ");")
        lines.append("  }")
        hint = (f"; or switch on its autograd pairing with tileops::{op.pairing.backward.base_name}: "
                "tileops.enable_autograd(True), tileops::set_autograd_pairing(true) or TILEOPS_AUTOGRAD=1")
    elif op.pairing is not None:
        hint = (f"; its autograd pairing covers tileops::{op.operator_name(op.pairing.branch())} only "
                "(no in-place, out= or dropped-output branch)")
    if branch.out:
        with_out = "{" + ", ".join(tensors + ["&out"]) + "}"
        lines.append(f"  tileops::runtime::refuse_out_grad({cpp_str('tileops::' + name)}, {with_out});")
    lines.append(f"  tileops::runtime::refuse_grad({cpp_str('tileops::' + name)}, {tensor_list}"
                 + (f", {cpp_str(hint)}" if hint else "") + ");")
    lines.append("  at::AutoDispatchBelowADInplaceOrView guard;")
    lines.append(f"  static const auto handle = c10::Dispatcher::singleton().findSchemaOrThrow("
                 f"{cpp_str('tileops::' + name)}, \"\").typed<{fn_type(op, branch)}>();")
    call = f"handle.call({cpp_arg_names(op, branch, True)})"
    written = [(tensor_ref(op, w), present(op, w)) for w in branch.writes] + ([("out", "true")] if branch.out else [])
    bumps = [f"  tileops::runtime::bump_version({t});" if there == "true" else
             f"  if ({there}) tileops::runtime::bump_version({t});" for t, there in written]
    if ret_t == "void":
        lines += [f"  {call};"] + bumps
    else:
        lines += [f"  auto result = {call};"] + bumps + ["  return result;"]
    lines.append("}")
    return lines


# ---------------------------------------------------------------------------------------------------
# Autograd pairing: a torch::autograd::Function per paired forward (model.Pairing says what goes where)


def _handle(op: Op, branch: Branch) -> str:
    name = op.operator_name(branch)
    return (f"static const auto handle = c10::Dispatcher::singleton().findSchemaOrThrow("
            f"{cpp_str('tileops::' + name)}, \"\").typed<{fn_type(op, branch)}>();")


def _save_param(p: Param, value: str) -> str:
    v = "std::string(*{0})" if p.type == "str" else "*{0}"
    if not p.nullable:
        return f"c10::IValue({'std::string(' + value + ')' if p.type == 'str' else value})"
    return f"({value}.has_value() ? c10::IValue({v.format(value)}) : c10::IValue())"


def _load_param(p: Param, var: str, iv: str) -> list[str]:
    if p.length:
        if not p.nullable:
            return [f"const std::vector<int64_t> {var}__v = {iv}.toIntVector();", f"const c10::IntArrayRef {var}({var}__v);"]
        return [f"std::vector<int64_t> {var}__v;", f"at::OptionalIntArrayRef {var};",
                f"if (!{iv}.isNone()) {{ {var}__v = {iv}.toIntVector(); {var} = c10::IntArrayRef({var}__v); }}"]
    if p.type == "int[]":
        if not p.nullable:
            return [f"const std::vector<c10::SymInt> {var}__v = {iv}.toSymIntVector();",
                    f"const c10::SymIntArrayRef {var}({var}__v);"]
        return [f"std::vector<c10::SymInt> {var}__v;", f"at::OptionalSymIntArrayRef {var};",
                f"if (!{iv}.isNone()) {{ {var}__v = {iv}.toSymIntVector(); {var} = c10::SymIntArrayRef({var}__v); }}"]
    if p.type == "SymInt":
        return [f"const c10::SymInt {var}({iv}.toSymInt());"]
    get = {"int": "toInt()", "float": "toDouble()", "bool": "toBool()", "str": "toStringRef()",
           "Device": "toDevice()", "ScalarType": "toScalarType()"}[p.type]
    base = {"int": "int64_t", "float": "double", "bool": "bool", "str": "c10::string_view", "Device": "c10::Device",
            "ScalarType": "c10::ScalarType"}[p.type]
    if not p.nullable:
        return [f"const {base} {var}({iv}.{get});"]
    return [f"const std::optional<{base}> {var} = {iv}.isNone() ? std::nullopt : std::optional<{base}>({iv}.{get});"]


def emit_pairing(op: Op) -> list[str]:
    """forward: redispatch below autograd to the forward op, save what the backward op reads;
    backward: call the backward op's branch that computes just the gradients asked for."""
    pr = op.pairing
    bwd, fb = pr.backward, pr.branch()
    name = op.operator_name(fb)
    rets = returned_outputs(op, fb)
    S = f"{name}__Pair"
    out = [f"// Autograd pairing ({op.path}:{op.autograd_line}): tileops::{name} -> tileops::{bwd.base_name}",
           f"struct {S} : public torch::autograd::Function<{S}> {{",
           f"  static {'at::Tensor' if len(rets) == 1 else 'torch::autograd::variable_list'} forward("
           f"torch::autograd::AutogradContext* ag_ctx, {cpp_params(op, fb, True)}) {{",
           "    at::AutoDispatchBelowADInplaceOrView guard;",
           "    " + _handle(op, fb),
           f"    auto ag_result = handle.call({cpp_arg_names(op, fb, True)});"]
    if len(rets) == 1:
        out.append(f"    at::Tensor o_{rets[0].name} = ag_result;")
    else:
        out += [f"    at::Tensor o_{o.name} = std::get<{k}>(ag_result);" for k, o in enumerate(rets)]
    if op.autograd_no_grad:  # saved statistics: autograd neither tracks them nor passes their gradients
        out.append(f"    ag_ctx->mark_non_differentiable({{{', '.join('o_' + n for n in op.autograd_no_grad)}}});")
    saves = []
    for (kind, src), b in zip(pr.sources, bwd.inputs):
        if kind == "input":
            saves.append(f"{src}.value_or(at::Tensor())" if op.input(src).optional else src)
        elif kind == "output":
            saves.append(f"o_{src}")
    out.append(f"    ag_ctx->save_for_backward({{{', '.join(saves)}}});")
    # needs_input_grad counts present tensors only: remember each input's edge (-1: absent).
    out.append("    std::vector<int64_t> ag_edges;")
    out.append("    int64_t ag_e = 0;")
    out += [f"    ag_edges.push_back({present(op, i.name)} ? ag_e++ : -1);" for i in op.inputs]
    out.append('    ag_ctx->saved_data["__edges"] = c10::IValue(ag_edges);')
    for p in bwd.params:
        out.append(f"    ag_ctx->saved_data[{cpp_str(p.name)}] = {_save_param(op.param(p.name), p.name)};")
    out.append('    ag_ctx->saved_data["__target"] = target.has_value() ? c10::IValue(std::string(*target)) '
               ": c10::IValue();")
    out.append(f"    return {'o_' + rets[0].name if len(rets) == 1 else '{' + ', '.join('o_' + o.name for o in rets) + '}'};")
    out.append("  }")

    out += ["  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ag_ctx, "
            "torch::autograd::variable_list ag_grads) {",
            "    const torch::autograd::variable_list ag_saved = ag_ctx->get_saved_variables();",
            '    const std::vector<int64_t> ag_edges = ag_ctx->saved_data.at("__edges").toIntVector();',
            "    [[maybe_unused]] auto ag_needs = [&](size_t i) {",
            "      return ag_edges[i] >= 0 && ag_ctx->needs_input_grad(static_cast<size_t>(ag_edges[i]));",
            "    };"]
    k = 0
    ret_names = [o.name for o in rets]
    for (kind, src), b in zip(pr.sources, bwd.inputs):
        value = f"ag_grads[{ret_names.index(src)}]" if kind == "grad" else f"ag_saved[{k}]"
        k += kind != "grad"
        if b.optional:
            out.append(f"    const std::optional<at::Tensor> {b.name} = {value}.defined() ? "
                       f"std::optional<at::Tensor>({value}) : std::nullopt;")
        else:
            out.append(f"    const at::Tensor {b.name} = {value};")
    for p in bwd.params:
        out += ["    " + x for x in _load_param(p, p.name, f"ag_ctx->saved_data.at({cpp_str(p.name)})")]
    out += ['    const c10::IValue& ag_target = ag_ctx->saved_data.at("__target");',
            "    const std::optional<c10::string_view> target = ag_target.isNone() ? std::nullopt : "
            "std::optional<c10::string_view>(ag_target.toStringRef());"]
    fwd_pos = {i.name: n for n, i in enumerate(op.inputs)}
    optional_grads = [o.name for o in bwd.outputs if o.optional]
    for o in bwd.outputs:
        out.append(f"    at::Tensor g_{o.name};")
    for g in optional_grads:
        out.append(f"    const bool need_{g} = ag_needs({fwd_pos[g[1:]]});")
    first = True
    for bb in bwd.branches:
        if bb.writes or bb.out:
            continue
        cond = " && ".join(f"!need_{g}" if g in bb.without else f"need_{g}" for g in optional_grads) or "true"
        out.append(f"    {'if' if first else '} else if'} ({cond}) {{")
        first = False
        out.append("      " + _handle(bwd, bb))
        brets = returned_outputs(bwd, bb)
        call = f"handle.call({cpp_arg_names(bwd, bb, True)})"
        if len(brets) == 1:
            out.append(f"      g_{brets[0].name} = {call};")
        else:
            out.append(f"      std::tie({', '.join('g_' + o.name for o in brets)}) = {call};")
    out.append("    }")
    n_args = len(branch_args(op, fb)) + 1  # + target
    out.append(f"    torch::autograd::variable_list ag_out({n_args});  // one per forward argument")
    for fi, g in zip(pr.grads, (o.name for o in bwd.outputs)):
        out.append(f"    if (ag_edges[{fwd_pos[fi]}] >= 0) ag_out[{fwd_pos[fi]}] = g_{g};")
    out += ["    return ag_out;", "  }", "};"]
    return out


def emit_composite(op: Op, branch: Branch) -> list[str]:
    """A composite op: the generated checks, then the hand-written body in src/composite/."""
    name = op.operator_name(branch)
    check_args = ", ".join(n for _, _, n in branch_args(op, Branch((), False, ())))
    lines = [f"// ---- tileops::{name}  ({op.cls}, {op.path}:{op.line}; composed of {', '.join(op.composition)})",
            f"static {return_type(op, branch)} {name}__composite({cpp_params(op, branch, False)}) {{",
            f"  static constexpr const char* kOp = {cpp_str('tileops::' + name)};",
            f"  {op.base_name}__check(kOp{', ' + check_args if check_args else ''});"]
    body = []
    guards = emit_overlap_guards(op, branch)
    if guards:  # real tensors only: a trace (fake, functional or symbolic tensors) has no memory to compare
        real = " && ".join(f"tileops::check::is_real({tensor_ref(op, i.name)})" for i in op.inputs if not i.optional)
        body += [f"if ({real}) {{"] + ["  " + g for g in guards] + ["}"]
    body.append(f"return tileops::composite::{name}({cpp_arg_names(op, branch, False)});")
    return lines + _named(body) + ["}"]


def emit_factory(op: Op, env: Env, branch: Branch) -> list[str]:
    """An op without tensor inputs: outputs on its Device param, served by that device's target."""
    name = op.operator_name(branch)
    dev = next(p for p in op.params if p.type == "Device").name
    check_args = ", ".join(n for _, _, n in branch_args(op, Branch((), False, ())))
    lines = [f"// ---- tileops::{name}  ({op.cls}, {op.path}:{op.line}; no tensor inputs)",
             f"static {return_type(op, branch)} {name}__factory({cpp_params(op, branch, False)}) {{",
             f"  static constexpr const char* kOp = {cpp_str('tileops::' + name)};",
             f"  [[maybe_unused]] const auto s = {op.base_name}__check(kOp{', ' + check_args if check_args else ''});"]
    body = [f"tileops::check::require_device_available(kOp, {cpp_str(dev)}, {dev});"]
    for o in op.outputs:
        shape_lines, shape = emit_shape(op, env, o, f"limit_{o.name}")
        body.append(f"if (!{dev}.is_meta()) {{  // meta allocates nothing")
        body += ["  " + x for x in shape_lines]
        what = cpp_str("output '" + o.name + "'")
        body.append(f"  tileops::check::require_alloc_fits(kOp, {what}, {shape}, {_dtype_expr(op, o)});")
        body.append("}")
    for o in op.outputs:
        body.append(f"at::Tensor o_{o.name};")
        body += emit_output_alloc(op, env, o, f"o_{o.name}", f"at::TensorOptions().device({dev})", meta=False)
    body.append(f"const std::array<at::Tensor, {len(op.outputs)}> outs{{{', '.join('o_' + o.name for o in op.outputs)}}};")
    body.append(f"const std::array<tileops::ParamValue, {max(1, len(op.params))}> params{{"
                f"{', '.join(param_value(p) for p in op.params) or 'tileops::ParamValue()'}}};")
    body.append(f"if (!{dev}.is_meta() && !tileops::check::all_empty(outs)) {{  // meta: shapes only")
    body.append(f"  const tileops::OpCall call{{tileops::ops::{op.base_name}::kId, kOp, o_{op.outputs[0].name}.device(), "
                f"{{}}, outs, c10::ArrayRef<tileops::ParamValue>(params.data(), size_t{{{len(op.params)}}})}};")
    body.append("  tileops::runtime::invoke(call, std::nullopt);")
    body.append("}")
    body.append(_return_stmt(returned_outputs(op, branch)))
    lines += _named(body)
    lines.append("}")
    return lines


def emit_composite_header(ops) -> str:
    """Declarations the hand-written composite bodies (src/composite/<op>.cpp) must define."""
    out = [banner(o.path for o in ops), "#pragma once", "", "#include <ATen/core/Tensor.h>", "",
           "namespace tileops::composite {", ""]
    for op in ops:
        if op.status == "implemented" and op.composition:
            for b in op.branches:
                out.append(f"// {op.cls} ({op.path}:{op.line}), composed of {', '.join(op.composition)}")
                out.append(f"{return_type(op, b)} {op.operator_name(b)}({cpp_params(op, b, False)});")
    out += ["", "}  // namespace tileops::composite"]
    return "\n".join(out) + "\n"


def emit_callers_header(ops) -> str:
    """Typed callers of every registered operator through the dispatcher, for C++ inside the library
    (the composite bodies): tileops::call::<operator>(args...), the schema's types written once, here."""
    out = [banner(o.path for o in ops), "#pragma once", "", "#include <ATen/core/Tensor.h>",
           "#include <ATen/core/dispatch/Dispatcher.h>", "", "#include <optional>", "#include <tuple>", "",
           "namespace tileops::call {", ""]
    for op in ops:
        if op.status != "implemented":
            continue
        for b in op.branches:
            params = cpp_params(op, b, False)
            if op.has_boundary:
                params += (", " if params else "") + "std::optional<c10::string_view> target = std::nullopt"
            out += [f"// {op.cls} ({op.path}:{op.line})",
                    f"inline {return_type(op, b)} {op.operator_name(b)}({params}) {{",
                    f"  {_handle(op, b)}",
                    f"  return handle.call({cpp_arg_names(op, b, op.has_boundary)});",
                    "}"]
    out += ["", "}  // namespace tileops::call"]
    return "\n".join(out) + "\n"


def _dtype_expr(op: Op, o: Output) -> str:
    return _rule_expr(op, o.dtype)


def _select_cond(op: Op, param: str, value) -> str:
    """C++ condition: the str param `param` has this value (None: not given)."""
    p = op.param(param)
    if value is None:
        return f"!{param}.has_value()"
    return f"({param}.has_value() && *{param} == {cpp_str(value)})" if p.nullable else f"{param} == {cpp_str(value)}"


def _rule_expr(op: Op, rule) -> str:
    if rule.kind == "select":  # the case of the param's value; the last one needs no test
        expr = _rule_expr(op, rule.cases[-1][1])
        for v, r in reversed(rule.cases[:-1]):
            expr = f"({_select_cond(op, rule.ref, v)} ? {_rule_expr(op, r)} : {expr})"
        return expr
    if rule.kind == "dtype_or":
        fallback = f"{tensor_ref(op, rule.fallback)}.scalar_type()"
        if rule.widen_int:
            fallback = f"tileops::check::promote_int_to_long({fallback})"
        if op.input(rule.ref) is not None:  # an optional input: its dtype when given
            return f"(tileops::check::present({rule.ref}) ? {rule.ref}->scalar_type() : {fallback})"
        return f"{rule.ref}.value_or({fallback})"
    if rule.kind == "same_as" and op.input(rule.ref) is None:  # a ScalarType param
        p = op.param(rule.ref)
        return f"{p.name}.value()" if p.nullable else p.name
    if rule.kind == "same_as":
        return f"{tensor_ref(op, rule.ref)}.scalar_type()"
    if rule.kind == "promote_int_to_float":
        return f"tileops::check::promote_int_to_float({tensor_ref(op, rule.ref)}.scalar_type())"
    if rule.kind in ("promote", "promote_float"):
        promoted = f"tileops::check::promote({{{', '.join('&' + tensor_ref(op, n) for n in rule.refs)}}})"
        return f"tileops::check::promote_int_to_float({promoted})" if rule.kind == "promote_float" else promoted
    return DTYPES[rule.names[0]]


def emit_write_checks(op: Op, branch: Branch) -> list[str]:
    """An output written into an input (in place): the result must fit that input's shape and dtype."""
    body = []
    for o in op.outputs:
        if not (o.aliases and o.aliases in branch.writes):
            continue
        t = tensor_ref(op, o.aliases)
        if isinstance(o.shape, exprs.Broadcast):
            body.append(f"tileops::check::require_broadcast_into(kOp, {cpp_str(o.aliases)}, {t}, s.broadcast);")
        if o.dtype.kind in ("promote", "promote_float", "select"):
            body.append(f"tileops::check::require_can_cast(kOp, {cpp_str(o.aliases)}, {t}, {_dtype_expr(op, o)});")
    return body


def _return_stmt(rets) -> str:
    if not rets:
        return "return;"
    if len(rets) == 1:
        return f"return o_{rets[0].name};"
    return "return std::make_tuple(" + ", ".join(f"o_{o.name}" for o in rets) + ");"


def emit_registration(ops) -> str:
    """Every implemented op's checks, boundary/Meta/autograd/composite functions and registration, in
    one translation unit (emit_registration_parts splits the same text for a parallel build)."""
    return _registration_unit(ops, [o for o in ops if o.status == "implemented"], primary=True)


def emit_registration_parts(ops, parts: int) -> list[str]:
    """The registration cut into `parts` translation units of about the same amount of C++ (whole ops,
    in manifest order; an op with autograd emits several times the code of a factory): the first holds
    TORCH_LIBRARY, the others TORCH_LIBRARY_FRAGMENT. One unit was the longest compile of the build by
    far; the parts compile side by side, so the longest part sets the time."""
    impl = [o for o in ops if o.status == "implemented"]
    weight = [len(_op_functions(o)) for o in impl]
    total = sum(weight)
    groups, done = [[] for _ in range(parts)], 0
    for op, w in zip(impl, weight):
        groups[min(parts - 1, (2 * done + w) * parts // max(2 * total, 1))].append(op)
        done += w
    return [_registration_unit(ops, g, primary=(k == 0)) for k, g in enumerate(groups)]


def _op_functions(op) -> list[str]:
    """One op's checks and its boundary/Meta/autograd/composite/factory functions."""
    check_lines, env = emit_check_fn(op)
    out = check_lines + [""]
    if op.pairing is not None:
        out += emit_pairing(op) + [""]
    for b in op.branches:
        if op.has_boundary:
            out += emit_branch(op, env, b) + [""]
        elif op.composition:
            out += emit_composite(op, b) + [""]
        else:
            out += emit_factory(op, env, b) + [""]
    return out


def _registration_unit(ops, impl, primary: bool) -> str:
    out = [banner(o.path for o in ops),
           # per-operator headers (the target builds with TORCH_ASSERT_ONLY_METHOD_OPERATORS): outputs
           # come from at::empty alone
           "#include <ATen/core/Tensor.h>", "#include <ATen/ops/empty.h>",
           "#include <ATen/core/dispatch/Dispatcher.h>", "#include <torch/library.h>",
           "#include <torch/csrc/autograd/custom_function.h>",
           "", '#include "boundary/checks.h"', '#include "boundary/runtime.h"', '#include "tileops/autograd.h"',
           '#include "tileops/op_call.h"',
           '#include "tileops_generated/composite.h"', '#include "tileops_generated/ops.h"', "",
           "namespace tileops::gen {", "namespace {", ""]
    for op in impl:
        out += _op_functions(op)
    out += ["}  // namespace", "}  // namespace tileops::gen", "",
            "// Each operator's def and its impls side by side.",
            "TORCH_LIBRARY(tileops, m) {" if primary else "TORCH_LIBRARY_FRAGMENT(tileops, m) {"]
    for op in impl:
        for b in op.branches:
            name = op.operator_name(b)
            out.append(f"  // {op.cls} ({op.path}:{op.line})")
            out.append(f"  m.def({cpp_str(schema(op, b))}, {{at::Tag::pt2_compliant_tag}});")
            if op.has_boundary:
                impls = (("Meta", "meta"), ("CUDA", "boundary"), ("CompositeExplicitAutograd", "boundary"),
                         ("Autograd", "autograd"))
            elif op.composition:
                # Traced through: each sub-op with a boundary becomes its own node.
                impls = (("CompositeImplicitAutograd", "composite"),)
            else:
                # No tensor inputs: dispatches on nothing, serves every device (meta included).
                impls = (("CompositeExplicitAutograd", "factory"),)
            for key, fn in impls:
                out.append(f"  m.impl({cpp_str(name)}, torch::dispatch(c10::DispatchKey::{key}, "
                           f"TORCH_FN(tileops::gen::{name}__{fn})));")
    out.append("}")
    return "\n".join(out) + "\n"


# C++ type and ParamValue read of each manifest param type, as a view returns it.
VIEW_PARAM = {
    "int": ("int64_t", "as_int"),
    "SymInt": ("int64_t", "as_int"),  # the call's value
    "float": ("double", "as_real"),
    "bool": ("bool", "as_bool"),
    "str": ("std::string_view", "as_str"),
    "int[]": ("c10::IntArrayRef", "as_ints"),
    "Device": ("c10::Device", "as_device"),
    "ScalarType": ("c10::ScalarType", "as_dtype"),
}


def view_param_getter(p: Param, slot: str) -> str:
    if p.type == "Scalar":  # int, float or bool as the caller gave it: the reader picks the kind
        return f"  const ParamValue& {p.name}() const {{ return {slot}; }}"
    t, read = VIEW_PARAM[p.type]
    if p.nullable:
        return (f"  std::optional<{t}> {p.name}() const {{ const ParamValue& v = {slot}; "
                f"return v.is_none() ? std::nullopt : std::optional<{t}>(v.{read}()); }}")
    return f"  {t} {p.name}() const {{ return {slot}.{read}(); }}"


def view_tensor_getter(name: str, slot: str, optional: bool, why: str) -> str:
    if optional:
        return (f"  const at::Tensor* {name}() const {{ const at::Tensor& t = {slot}; "
                f"return t.defined() ? &t : nullptr; }}  // nullptr {why}")
    return f"  const at::Tensor& {name}() const {{ return {slot}; }}"


def view_class(inputs, outputs, params) -> list[str]:
    """inputs/outputs/params: (slot expression, record) pairs. Getters copy nothing."""
    out = ["class View {", " public:",
           "  explicit View(const OpCall& call) : call_(call) {}",
           "  const OpCall& call() const { return call_; }"]
    out += [view_tensor_getter(i.name, slot, i.optional, "when absent") for slot, i in inputs]
    out += [view_tensor_getter(o.name, slot, o.optional, "when the branch drops it") for slot, o in outputs]
    out += [view_param_getter(p, slot) for slot, p in params]
    out += [" private:", "  const OpCall& call_;", "};"]
    return out


def emit_view(op: Op) -> list[str]:
    return (["// What a target reads from one call of this op, by name: View v(call); v.x(), v.eps()..."] +
            view_class([(f"call_.inputs[In::{i.name}]", i) for i in op.inputs],
                       [(f"call_.outputs[Out::{o.name}]", o) for o in op.outputs],
                       [(f"call_.params[Param::{p.name}]", p) for p in op.params]))


def family_views(ops) -> dict[str, tuple]:
    """Per family of several ops: the arguments all of them hold at the same place, alike (one kernel
    class serving several ops reads them through family::<name>::View)."""
    fams: dict[str, list] = {}
    for op in ops:
        fams.setdefault(op.family, []).append(op)
    common = {}
    for fam, members in sorted(fams.items()):
        if len(members) < 2:
            continue
        shared = []
        for where in ("inputs", "outputs", "params"):
            first = getattr(members[0], where)
            same = [(f"call_.{where}[{k}]", x) for k, x in enumerate(first)
                    if all(len(getattr(m, where)) > k and _alike(getattr(m, where)[k], x) for m in members)]
            shared.append(same)
        if any(shared):
            common[fam] = (members, shared)
    return common


def _alike(a, b) -> bool:
    if isinstance(a, Param):
        return a.name == b.name and a.type == b.type and a.nullable == b.nullable
    return a.name == b.name and a.optional == b.optional


def emit_ops_header(ops) -> str:
    impl = [o for o in ops if o.status == "implemented"]
    out = [banner(o.path for o in ops), "#pragma once", "", "#include <ATen/core/Tensor.h>",
           "#include <c10/core/Device.h>", "#include <c10/core/ScalarType.h>", "#include <c10/util/ArrayRef.h>", "",
           "#include <cstdint>", "#include <optional>", "#include <string_view>", "",
           '#include "tileops/op_call.h"', "", "namespace tileops::ops {", "",
           f"constexpr int kNumOps = {len(impl)};", ""]
    for op in impl:
        out.append(f"// {op.cls} ({op.path}:{op.line})")
        out.append(f"namespace {op.base_name} {{")
        out.append(f"constexpr int kId = {op.op_id};")
        out.append(f"constexpr const char* kName = {cpp_str('tileops::' + op.base_name)};")
        for kind, items in (("In", op.inputs), ("Out", op.outputs), ("Param", op.params)):
            enum = ", ".join(f"{x.name} = {k}" for k, x in enumerate(items))
            out.append(f"enum {kind} : int {{ {enum} }};" if items else f"enum {kind} : int {{}};")
        out += emit_view(op)
        out.append("}")
        out.append("")
    out.append("// Per family of several ops: the arguments all of them hold at the same place.")
    out.append("namespace family {")
    for fam, (members, (ins, outs, params)) in family_views(impl).items():
        out.append(f"// {', '.join(m.cls for m in members)}")
        out.append(f"namespace {fam} {{")
        out += view_class(ins, outs, params)
        out.append("}")
    out.append("}  // namespace family")
    out.append("")
    out.append("}  // namespace tileops::ops")
    return "\n".join(out) + "\n"


def op_json(op: Op) -> dict:
    def default(p):
        return None if p.default is NO_DEFAULT else (list(p.default) if isinstance(p.default, tuple) else p.default)
    return {
        "class": op.cls, "family": op.family, "name": op.base_name, "ref_api": op.ref_api,
        "status": op.status, "has_boundary": op.has_boundary, "manifest": f"{op.path}:{op.line}",
        "autograd_backward": op.autograd,
        "elementwise": op.elementwise,
        "compile_op_names": list(op.compile_op_names),
        "operators": [{"name": op.operator_name(b), "writes": list(b.writes), "out": b.out,
                       "without": list(b.without), "schema": schema(op, b)} for b in op.branches],
        "inputs": [{"name": i.name, "optional": i.optional, "mutated": i.mutated, "dtype": i.dtype.text,
                    "shape": i.shape_text} for i in op.inputs],
        "outputs": [{"name": o.name, "buffer": o.buffer, "optional": o.optional, "aliases": o.aliases,
                     "shape": o.shape_text} for o in op.outputs],
        "sharding": {"kind": op.sharding[0], **{k: list(v) if isinstance(v, tuple) else v
                                                 for k, v in op.sharding[1]}},
        "params": [{"name": p.name, "type": p.type, "length": p.length, "nullable": p.nullable,
                    "has_default": p.default is not NO_DEFAULT,
                    "default": default(p)} for p in op.params],
        "workloads": list(op.workloads),
    }


def emit_op_table(ops) -> str:
    impl = [o for o in ops if o.status == "implemented"]
    out = [banner(o.path for o in ops), '#include "tileops/ops.h"', "", "namespace tileops {", "namespace {"]
    for op in impl:
        ops_arr = ", ".join(cpp_str("tileops::" + n) for n in op.operator_names)
        con = ", ".join(cpp_str(n) for n in op.compile_op_names) or "nullptr"
        out.append(f"const char* const k{op.cls}_operators[] = {{{ops_arr}}};")
        out.append(f"const char* const k{op.cls}_compile[] = {{{con}}};")
    out.append("const OpInfo kOps[] = {")
    for op in impl:
        out.append(f"    {{{cpp_str(op.cls)}, {cpp_str(op.family)}, {cpp_str(op.base_name)}, {cpp_str(op.ref_api)}, "
                   f"{cpp_str(f'{op.path}:{op.line}')}, {str(op.has_boundary).lower()}, k{op.cls}_operators, "
                   f"{len(op.operator_names)}, k{op.cls}_compile, {len(op.compile_op_names)}}},")
    out.append("};")
    table = json.dumps([op_json(o) for o in ops], sort_keys=True)
    # Raw string literal: the JSON never contains the delimiter.
    out.append(f'const char kJson[] = R"tileops_json({table})tileops_json";')
    out += ["}  // namespace", "",
            "c10::ArrayRef<OpInfo> op_table() { return c10::ArrayRef<OpInfo>(kOps, sizeof(kOps) / sizeof(kOps[0])); }",
            "const char* op_table_json() { return kJson; }", "", "}  // namespace tileops"]
    return "\n".join(out) + "\n"


# Functions whose for16 forms a 16-bit result (expm1, softplus) or 16-bit operands (floor_divide,
# remainder) take (src/kernels/elementwise/elementwise.cuh, TILEOPS_EW_16BIT_*).
FOR16_RESULTS = ("expm1", "softplus")
FOR16_OPERANDS = ("floor_divide", "remainder")


def ew_expr_name(o, case: int) -> str:
    """The functor of an elementwise entry's expression case in elementwise/exprs.cuh."""
    return f"{o.base_name}__{case}"


def emit_elementwise_exprs(ops) -> str:
    """elementwise/exprs.cuh: per `elementwise:` entry and case, a functor whose value() is the manifest's
    expression over the inputs (as the compute type, or a fixed input's own) and params (as C)."""
    ew = [o for o in ops if o.status == "implemented" and o.elementwise]
    out = ["// Generated from manifests/*.yaml by scripts/codegen; do not edit.",
           "// The elementwise engine's expressions (src/kernels/elementwise/op.cuh instantiates them).",
           "#pragma once", '#include "elementwise/op.cuh"', "", "namespace tileops {", "namespace ew {",
           "namespace expr {", ""]
    for o in ew:
        values = [p.name for p in o.params if p.name != o.select]
        for case, (_, text) in enumerate(o.given_cases or o.select_cases or ((None, o.elementwise),)):
            tparams = ", ".join(f"class V{k}" for k in range(len(o.inputs)))
            args = ", ".join(f"V{k} v{k}" for k in range(len(o.inputs)))
            uses = lambda names: any(re.search(rf"\b{n}\s*\(", text) for n in names)  # noqa: E731
            # each input as what the expression reads it as (X<k>: the compute type or a fixed input's own)
            body = [f"    [[maybe_unused]] const X{k} {i.name} = cast<X{k}>(v{k});" for k, i in enumerate(o.inputs)]
            body += [f"    [[maybe_unused]] const C {name} = s[{j}];" for j, name in enumerate(values)]
            body.append("    [[maybe_unused]] auto rounded = [](C v) { return cast<C>(cast<TO>(v)); };")
            ret = f"return cast<TO>({text});"
            results, operands = uses(FOR16_RESULTS), uses(FOR16_OPERANDS)
            if results or operands:
                both = " ".join(x for x, on in (("TILEOPS_EW_16BIT_RESULTS", results),
                                                ("TILEOPS_EW_16BIT_OPERANDS", operands)) if on)
                if results and operands:
                    body += [f"    if constexpr (R16 && O16) {{ {both} {ret} }}",
                             f"    else if constexpr (R16) {{ TILEOPS_EW_16BIT_RESULTS {ret} }}",
                             f"    else if constexpr (O16) {{ TILEOPS_EW_16BIT_OPERANDS {ret} }}",
                             f"    else {{ {ret} }}"]
                else:
                    flag = "R16" if results else "O16"
                    body += [f"    if constexpr ({flag}) {{ {both} {ret} }}", f"    else {{ {ret} }}"]
            else:
                body.append(f"    {ret}")
            out += [f"// {o.cls}: {text}",
                    f"struct {ew_expr_name(o, case)} {{",
                    f"  template <class C, class TO, bool R16, bool O16, class X0, class X1, class X2, class X3, {tparams}>",
                    f"  static __device__ __forceinline__ TO value([[maybe_unused]] const C* s, {args}) {{",
                    *body, "  }", "};", ""]
    out += ["}  // namespace expr", "}  // namespace ew", "}  // namespace tileops"]
    return "\n".join(out) + "\n"


def emit_elementwise_header(ops) -> str:
    """The elementwise engine's table: per `elementwise:` entry, its expression(s) and operand names."""
    from .model import NONE_VALUES
    ew = [o for o in ops if o.status == "implemented" and o.elementwise]
    out = [banner(o.path for o in ops), "#pragma once", "", "namespace tileops::elementwise {", "",
           "constexpr int kMaxInputs = 4, kMaxParams = 4, kMaxCases = 4;", "",
           "// What None stands for in a nullable param (manifest `none:`).",
           "enum class IfNone : int { kRequired = 0, kNegInf, kInf, kMin, kMax, kZero };", "",
           "struct EwOp {",
           "  const char* cls;                    // op class",
           "  const char* stem;                   // operator base name",
           "  int op_id;",
           "  const char* expr;                   // the manifest's `elementwise:` expression (the first case's)",
           "  int n_in;",
           "  const char* in_names[kMaxInputs];",
           "  bool in_fixed[kMaxInputs];          // one fixed dtype (e.g. a bool mask): loaded as is, not promoted",
           "  int n_params;",
           "  const char* param_names[kMaxParams];  // Scalar/float/int/bool params, as values of the compute type",
           "  IfNone param_none[kMaxParams];      // a nullable param: the value the engine puts for None",
           "  bool param_float[kMaxParams];       // a float param: converted for an integer compute type too",
           "  int select;                         // the str param choosing the expression, or -1",
           "  int n_cases;",
           "  const char* case_values[kMaxCases];  // the select param's value per case (nullptr: None)",
           "  const char* case_exprs[kMaxCases];",
           "  int case_given[kMaxCases];          // a choice by the optional inputs given: bit k, input k (else -1)",
           "};", "",
           f"constexpr int kNumOps = {len(ew)};",
           "constexpr EwOp kOps[] = {"]
    none_code = {None: "IfNone::kRequired", "-inf": "IfNone::kNegInf", "inf": "IfNone::kInf", "min": "IfNone::kMin",
                 "max": "IfNone::kMax", "zero": "IfNone::kZero"}
    assert set(none_code) - {None} == set(NONE_VALUES)
    for o in ew:
        ins = ", ".join(cpp_str(i.name) for i in o.inputs)
        fixed = ", ".join("true" if i.dtype.kind == "union" and len(i.dtype.names) == 1 else "false" for i in o.inputs)
        ps = ", ".join(cpp_str(p.name) for p in o.params) or "nullptr"
        nones = ", ".join(none_code[p.none] for p in o.params) or "IfNone::kRequired"
        floats = ", ".join("true" if p.type == "float" else "false" for p in o.params) or "false"
        select = next((k for k, p in enumerate(o.params) if p.name == o.select), -1)
        cases = o.select_cases or ((None, o.elementwise),)
        values = ", ".join("nullptr" if v is None else cpp_str(v) for v, _ in cases)
        given = ", ".join(["-1"] * len(cases))
        if o.given_cases:
            cases, values = o.given_cases, ", ".join("nullptr" for _ in o.given_cases)
            names = [i.name for i in o.inputs]
            masks = [sum(1 << k for k, n in enumerate(names) if not o.inputs[k].optional or n in g) for g, _ in cases]
            given = ", ".join(str(m) for m in masks)
        exprs_ = ", ".join(cpp_str(e) for _, e in cases)
        out.append(f"    {{{cpp_str(o.cls)}, {cpp_str(o.base_name)}, {o.op_id}, {cpp_str(o.elementwise)}, "
                   f"{len(o.inputs)}, {{{ins}}}, {{{fixed}}}, {len(o.params)}, {{{ps}}}, {{{nones}}}, {{{floats}}}, "
                   f"{select}, {len(cases)}, {{{values}}}, {{{exprs_}}}, {{{given}}}}},")
    if not ew:
        out.append("    {nullptr, nullptr, -1, nullptr, 0, {}, {}, 0, {}, {}, {}, -1, 0, {}, {}, {}},")
    out += ["};", "", "}  // namespace tileops::elementwise"]
    return "\n".join(out) + "\n"
