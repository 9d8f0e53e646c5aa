"""The generator on golden manifests: operator names, side-effect branches, schemas, boundaries,
and one test per grammar rule (each error names file:line, the entry and the rule)."""
import os
import textwrap

import pytest

from codegen import emit_cpp
from codegen.__main__ import load_ops, write_if_changed
from codegen.model import build_ops, operator_base_name, snake
from codegen.parse import ManifestError, parse_text

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def golden():
    return {op.cls: op for op in load_ops([os.path.join(HERE, "golden", "branches.yaml")], HERE)}


def schemas(op):
    return [emit_cpp.schema(op, b) for b in op.branches]


def test_operator_names():
    assert snake("RMSNormFwd") == "rms_norm_fwd"
    assert snake("FusedAddRMSNormFwd") == "fused_add_rms_norm_fwd"
    assert snake("QKNormRopeFwd") == "qk_norm_rope_fwd"
    assert operator_base_name("RMSNormFwdOp", "norm") == "norm_rms_norm_fwd"
    assert operator_base_name("SoftmaxFwdOp", "softmax") == "softmax_fwd"  # family written once
    assert operator_base_name("GeluAndMulFwdOp", "activation") == "activation_gelu_and_mul_fwd"


def test_written_input_branch(golden):
    assert schemas(golden["FusedAddRMSNormFwdOp"]) == [
        "norm_fused_add_rms_norm_fwd(Tensor x, Tensor residual, Tensor? weight=None, float eps=1e-06, *, "
        "str? target=None) -> (Tensor, Tensor)",
        "norm_fused_add_rms_norm_fwd_writes_residual(Tensor x, Tensor(a!) residual, Tensor? weight=None, "
        "float eps=1e-06, *, str? target=None) -> Tensor",
    ]


def test_out_buffer_branch(golden):
    assert schemas(golden["SiluAndMulFwdOp"]) == [
        "activation_silu_and_mul_fwd(Tensor x, *, str? target=None) -> Tensor",
        "activation_silu_and_mul_fwd_out(Tensor x, Tensor(z!) out, *, str? target=None) -> ()",
    ]


def test_always_written_inputs_sorted_suffixes(golden):
    assert golden["RopeNeoxCachedFwdOp"].operator_names == ("position_rope_neox_cached_fwd_writes_k_writes_q",)
    assert schemas(golden["RopeNeoxCachedFwdOp"])[0].startswith(
        "position_rope_neox_cached_fwd_writes_k_writes_q(Tensor positions, Tensor(a!) q, Tensor(b!) k, ")


def test_optional_output_branch(golden):
    assert golden["SoftmaxFwdOp"].operator_names == ("softmax_fwd", "softmax_fwd_without_lse")
    assert schemas(golden["SoftmaxFwdOp"])[1].endswith("int dim=-1, *, str? target=None) -> Tensor")


def test_boundary_rule(golden):
    assert golden["SoftmaxFwdOp"].has_boundary
    assert not golden["AlibiFwdOp"].has_boundary  # no call-time tensor inputs
    assert not golden["QKNormRopeFwdOp"].has_boundary  # composite
    assert emit_cpp.schema(golden["AlibiFwdOp"], golden["AlibiFwdOp"].branches[0]) == \
        "position_alibi_fwd(int num_heads, Device device) -> Tensor"  # no target kwarg without a boundary


def test_spec_only_entries_have_no_compile_op_names(golden):
    assert all(op.compile_op_names == () for op in golden.values())


def test_generated_registration_has_def_and_impls_side_by_side():
    # elementwise.yaml too: the norm family's composites are made of its ops
    ops = load_ops([os.path.join(HERE, "..", "..", "manifests", f) for f in ("norm.yaml", "elementwise.yaml")],
                   os.path.join(HERE, "..", ".."))
    text = emit_cpp.emit_registration(ops)
    assert text.startswith("// Generated from manifests/elementwise.yaml, manifests/norm.yaml by scripts/codegen; "
                           "do not edit.")
    d = text.index('m.def("norm_rms_norm_fwd(')
    end = text.index("m.def(", d + 1) if "m.def(" in text[d + 1:] else len(text)
    for key in ("Meta", "CUDA", "CompositeExplicitAutograd", "Autograd"):
        assert d < text.index(f"c10::DispatchKey::{key}", d) < end
    # The Meta kernel allocates with torch.empty semantics, never empty_like.
    assert "empty_like" not in text


def test_write_if_changed(tmp_path):
    p = str(tmp_path / "a" / "gen.cpp")
    assert write_if_changed(p, "x") is True
    mtime = os.stat(p).st_mtime_ns
    assert write_if_changed(p, "x") is False
    assert os.stat(p).st_mtime_ns == mtime


GOOD = """
AOp:
  family: fam
  ref_api: torch.a
  status: implemented
  signature:
    inputs:
      x: {dtype: float16, shape: "[..., n]"}
    outputs:
      y: {dtype: same_as(x), shape: same_as(x)}
"""


def error_of(text):
    with pytest.raises(ManifestError) as e:
        build_ops([parse_text(textwrap.dedent(text), "manifests/t.yaml")])
    return str(e.value)


def test_good_manifest_parses():
    (op,) = build_ops([parse_text(GOOD, "manifests/t.yaml")])
    assert op.base_name == "fam_a" and op.has_boundary


@pytest.mark.parametrize("edit,message", [
    (("family: fam", "family: fam\n  family: fam2"), "manifests/t.yaml:4: duplicate key 'family' (first at line 3)"),
    (("status: implemented", "status: done"), "manifests/t.yaml:5: AOp: status must be one of spec-only, implemented"),
    (("  family: fam\n", ""), "AOp: an entry is missing required key 'family'"),
    (("ref_api: torch.a", "ref_api: torch.a\n  colour: red"), "AOp: unknown key 'colour' in an entry"),
    (("dtype: float16,", "dtype: float17,"), "manifests/t.yaml:8: AOp: input 'x': unknown dtype 'float17'"),
    (("same_as(x)", "same_as(z)"), "output 'y': dtype 'same_as(z)' names unknown input 'z'"),
    (('"[..., n]"', '"[..., n"'), "input 'x': shape does not parse"),
    (("outputs:", "shape_rules: ['n >> 2']\n    outputs:"), "shape rule does not parse"),
    (("outputs:", "shape_rules: ['m >= 2']\n    outputs:"), "'m' is not an int param or a dim bound by an input shape"),
    (("outputs:", "params:\n      eps: {type: float, default: yes}\n    outputs:"), "param 'eps': default True is not a float"),
    (("outputs:", "params:\n      eps: {type: double}\n    outputs:"), "param 'eps': unknown type 'double'"),
    # torch's schema parser refuses "float hi=inf" while the library loads (the process aborts)
    (("outputs:", "params:\n      hi: {type: float, default: .inf}\n    outputs:"),
     "param 'hi': default inf is not finite; make the param 'float?'"),
    (("outputs:", "params:\n      a: {type: int, default: 1}\n      b: {type: int}\n    outputs:"),
     "param 'b' has no default but follows a param that has one"),
    (("shape: same_as(x)}", "shape: same_as(x), aliases: x}"), "output 'y': aliases 'x' must name a mutated input"),
    # GOOD's y is same_as(x), not a reduction of x: reading x's broadcast dims once would be wrong
    (('shape: "[..., n]"}', 'shape: "[..., n]", reduced_once: true}'),
     "input 'x': reduced_once takes a required, unwritten input that every output reduces over the same dims"),
    (("shape: same_as(x)}", 'shape: "[..., m]"}'), "output 'y': shape names ['m'] that no input shape binds"),
    (("status: implemented", "status: implemented\n  composition: [BOp]"), "composition names unknown op class 'BOp'"),
    (("AOp:", "Aop:"), "op class names are CamelCase and end with 'Op'"),
    (("y: {dtype", "target: {dtype"), "output name 'target' is reserved by the generated schema"),
])
def test_each_rule_fires(edit, message):
    old, new = edit
    assert old in GOOD
    assert message in error_of(GOOD.replace(old, new, 1))


FLOAT_PARAM = "params:\n      p: {type: float, default: 0.5}\n    shape_rules: [%s]\n    outputs:"


@pytest.mark.parametrize("rule", ["'p // 2 <= 1'", "'p <= n'", "'0 <= p or p <= 1'", "'ndim(x) * p <= 1'"])
def test_a_float_rule_compares_numbers_and_params_alone(rule):
    message = "a rule over a float param compares it with numbers, float params or int params by + - *"
    assert message in error_of(GOOD.replace("outputs:", FLOAT_PARAM % rule, 1))


def test_a_float_rule_is_checked_in_double():
    (op,) = build_ops([parse_text(GOOD.replace("outputs:", FLOAT_PARAM % "'0 <= p', 'p * 2 <= 1'", 1),
                                  "manifests/t.yaml")])
    env = emit_cpp.Env(op)
    first, second = (emit_cpp.emit_rule(op, env, r) for r in op.rules)
    assert first == ['if (!(0.0 <= static_cast<double>(p))) tileops::check::fail_param_rule(kOp, "p", "0 <= p", '
                     'tileops::check::describe_param("p", p));']
    assert "(static_cast<double>(p) * 2.0) <= 1.0" in second[0]


NULLABLE_FLOAT = "params:\n      cap: {type: 'float?', default: null}\n    shape_rules: [%s]\n    outputs:"


@pytest.mark.parametrize("rule", ["'cap > 0'", "'cap > 0 or not given(cap)'", "'not given(cap) or cap > n'"])
def test_a_nullable_float_is_compared_only_after_not_given(rule):
    message = "a nullable float param is compared after 'not given(<it>) or'"
    assert message in error_of(GOOD.replace("outputs:", NULLABLE_FLOAT % rule, 1))


def test_a_nullable_float_rule_reads_the_given_value_in_double():
    (op,) = build_ops([parse_text(GOOD.replace("outputs:", NULLABLE_FLOAT % "'not given(cap) or cap * 2 > 1'", 1),
                                  "manifests/t.yaml")])
    (line,) = emit_cpp.emit_rule(op, emit_cpp.Env(op), op.rules[0])
    assert line.startswith("if (!(!cap.has_value() || (((*cap) * 2.0) > 1.0))) tileops::check::fail_param_rule(kOp, \"cap\"")


SYMINT_PARAM = "params:\n      seed: %s\n    outputs:"


def test_a_symint_param_is_symbolic_in_the_schema_and_the_calls_value_in_the_view():
    (op,) = build_ops([parse_text(GOOD.replace("outputs:", SYMINT_PARAM % "{type: SymInt, default: 0}", 1),
                                  "manifests/t.yaml")])
    (seed,) = op.params
    assert emit_cpp.branch_args(op, op.branches[0])[-1] == ("SymInt seed=0", "c10::SymInt", "seed")
    assert emit_cpp.param_value(seed) == "tileops::ParamValue::integer(seed.guard_int(__FILE__, __LINE__))"
    assert emit_cpp.view_param_getter(seed, "p_[0]") == "  int64_t seed() const { return p_[0].as_int(); }"
    assert emit_cpp._load_param(seed, "seed", "iv") == ["const c10::SymInt seed(iv.toSymInt());"]


@pytest.mark.parametrize("spec,message", [
    ("{type: 'SymInt?', default: null}", "param 'seed': SymInt takes no None"),
    ("{type: SymInt, default: 0}\n    shape_rules: ['seed >= 0']", "'seed' is not an int param"),
    ("{type: SymInt, choices: [0, 1]}", "param 'seed': SymInt takes no choices"),
    ("{type: SymInt, default: 0.5}", "param 'seed': default 0.5 is not a SymInt"),
])
def test_a_symint_param_is_read_by_the_kernel_alone(spec, message):
    assert message in error_of(GOOD.replace("outputs:", SYMINT_PARAM % spec, 1))


def test_an_op_without_tensor_inputs_takes_no_symint():
    text = GOOD.replace('inputs:\n      x: {dtype: float16, shape: "[..., n]"}\n',
                        "inputs: {}\n    params:\n      n: {type: int}\n      device: {type: Device}\n"
                        "      seed: {type: SymInt, default: 0}\n").replace("same_as(x), shape: same_as(x)", 'float16, shape: "[n]"')
    assert "an op without tensor inputs takes no SymInt param" in error_of(text)


def test_two_buffer_outputs_are_refused():
    text = GOOD.replace("y: {dtype: same_as(x), shape: same_as(x)}",
                        "y: {dtype: same_as(x), shape: same_as(x), buffer: out}\n"
                        "      z: {dtype: same_as(x), shape: same_as(x), buffer: out}")
    assert "at most one output may be 'buffer: out'" in error_of(text)


def test_same_class_twice_across_files():
    with pytest.raises(ManifestError, match="op class defined twice"):
        build_ops([parse_text(GOOD, "manifests/a.yaml"), parse_text(GOOD, "manifests/b.yaml")])


# ---- dtype_combos and promote_int_to_float ---------------------------------------------------------

COMBOS = """
COp:
  family: fam
  ref_api: torch.c
  status: implemented
  signature:
    inputs:
      q: {dtype: float16 | bfloat16 | float32, shape: "[n]"}
      k: {dtype: same_as(q), shape: "[n]"}
      cache: {dtype: float16 | bfloat16 | float32, shape: "[n]"}
    outputs:
      y: {dtype: same_as(q), shape: same_as(q)}
    dtype_combos:
      - {q: float16, cache: float16}
      - {q: float16, cache: float32}
      - {q: float32, cache: float32}
"""


def test_dtype_combos_parse_in_signature_order_and_emit_one_check():
    (op,) = build_ops([parse_text(COMBOS.replace("{q: float16, cache: float32}", "{cache: float32, q: float16}"),
                                  "manifests/t.yaml")])
    assert op.dtype_combos == ((("q", "float16"), ("cache", "float16")), (("q", "float16"), ("cache", "float32")),
                               (("q", "float32"), ("cache", "float32")))
    lines, _ = emit_cpp.emit_check_fn(op)
    text = "\n".join(lines)
    assert text.count("fail_dtype_combo") == 1
    assert 'fail_dtype_combo(kOp, "q, cache", "(float16, float16), (float16, float32), (float32, float32)", ' in text


def test_dtype_combos_with_an_optional_input_match_when_it_is_absent():
    text = COMBOS.replace('cache: {dtype: float16 | bfloat16 | float32, shape: "[n]"}',
                          'cache: {dtype: float16 | bfloat16 | float32, shape: "[n]", optional: true}')
    (op,) = build_ops([parse_text(text, "manifests/t.yaml")])
    line = next(l for l in emit_cpp.emit_check_fn(op)[0] if "fail_dtype_combo" in l)
    assert "(q.scalar_type() == at::kHalf && (!tileops::check::present(cache) || (*cache).scalar_type() == at::kHalf))" \
        in line
    assert line.endswith("{q.scalar_type(), (tileops::check::present(cache) ? (*cache).scalar_type() : "
                         "c10::ScalarType::Undefined)});")


@pytest.mark.parametrize("edit,message", [
    (("{q: float16, cache: float16}", "{q: float16, cahce: float16}"),
     "manifests/t.yaml:14: COp: dtype combo #1 names unknown input 'cahce'; inputs: q, k, cache"),
    (("{q: float16, cache: float16}", "{q: float17, cache: float16}"),
     "COp: dtype combo #1: unknown dtype 'float17' for input 'q'; known: float16, bfloat16, float32, float64"),
    (("{q: float16, cache: float16}", "{q: float16, cache: int8}"),
     "COp: dtype combo #1: cache=int8 is outside input 'cache''s dtype 'float16 | bfloat16 | float32'"),
    (("{q: float16, cache: float16}", "{q: float16, k: float16}"),
     "COp: dtype combo #1 names input 'k', whose dtype is 'same_as(q)'; name the input it follows instead"),
    (("{q: float32, cache: float32}", "{q: float32}"),
     "COp: dtype combo #3 names inputs (q) but combo #1 names (q, cache); every combo lists the same inputs"),
    (("{q: float32, cache: float32}", "{q: float16, cache: float16}"), "COp: dtype combo #3 repeats an earlier combo"),
    (("- {q: float32, cache: float32}", "- float32"), "COp: dtype combo #3: each dtype combo maps input names"),
    (("    dtype_combos:\n", "    dtype_combos: {q: float16}\n"), "COp: dtype_combos is a list of {input: dtype} mappings"),
])
def test_bad_dtype_combos_are_refused_clearly(edit, message):
    old, new = edit
    assert old in COMBOS
    text = COMBOS.replace(old, new, 1)
    if "dtype_combos: {" in text:  # the list items would now be a syntax error: drop them
        text = text[:text.index("dtype_combos:")] + "dtype_combos: {q: float16}\n"
    assert message in error_of(text)


@pytest.mark.parametrize("edit,message", [
    (("dtype: float16,", "dtype: float16 | int32,"), None),  # a good one: integer x promotes
    (("promote_int_to_float(x)", "promote_int_to_float(z)"),
     "output 'y': dtype 'promote_int_to_float(z)' names unknown input 'z'"),
    (("x: {dtype: float16,", "x: {dtype: promote_int_to_float(x),"),
     "input 'x': dtype 'promote_int_to_float(x)' names unknown input 'x'"),
    (('x: {dtype: float16, shape: "[..., n]"}', 'x: {dtype: float16, shape: "[..., n]"}\n'
      '      w: {dtype: promote_int_to_float(x), shape: "[n]"}'),
     "input 'w': promote_int_to_float() gives an output's dtype; an input takes a union or same_as()"),
    (('shape: "[..., n]"}', 'shape: "[..., n]", mutated: optional}'),
     "output 'y' aliases 'x', so its dtype must be same_as(x) (or same_as the input x's dtype follows), "
     "got 'promote_int_to_float(x)'"),
])
def test_promote_int_to_float_rules(edit, message):
    text = GOOD.replace("y: {dtype: same_as(x), shape: same_as(x)}", "y: {dtype: promote_int_to_float(x), shape: same_as(x)}")
    old, new = edit
    assert old in text
    text = text.replace(old, new, 1)
    if "mutated" in text:
        text = text.replace("shape: same_as(x)}", "shape: same_as(x), aliases: x}")
    if message is None:
        (op,) = build_ops([parse_text(text, "manifests/t.yaml")])
        assert op.outputs[0].dtype.kind == "promote_int_to_float"
        assert "tileops::check::promote_int_to_float(x.scalar_type())" in emit_cpp._dtype_expr(op, op.outputs[0])
    else:
        assert message in error_of(text)


def test_aliasing_an_input_through_a_same_as_chain_is_fine():
    # As FusedAddRMSNormFwdOp's residual_out: same_as(x), aliasing residual, whose dtype is same_as(x).
    text = GOOD.replace('x: {dtype: float16, shape: "[..., n]"}',
                        'x: {dtype: float16, shape: "[..., n]"}\n'
                        '      r: {dtype: same_as(x), shape: same_as(x), mutated: optional}')
    text = text.replace("shape: same_as(x)}\n", "shape: same_as(x), aliases: r}\n")
    (op,) = build_ops([parse_text(text, "manifests/t.yaml")])
    assert op.outputs[0].aliases == "r"


# ---- reduce() shapes and dtype_or -------------------------------------------------------------------

REDUCE = """
ROp:
  family: fam
  ref_api: torch.sum
  status: implemented
  signature:
    inputs:
      x: {dtype: float16 | float32, shape: "[...]"}
    outputs:
      y: {dtype: "dtype_or(dtype, x)", shape: "reduce(x, dim, keepdim)"}
    params:
      dim: {type: "int[]?", default: null}
      keepdim: {type: bool, default: false}
      dtype: {type: "ScalarType?", default: null}
"""


def test_reduced_shape_and_dtype_or_emit_a_checked_mask():
    (op,) = build_ops([parse_text(REDUCE, "manifests/t.yaml")])
    assert emit_cpp.schema(op, op.branches[0]) == (
        "fam_r(Tensor x, SymInt[]? dim=None, bool keepdim=False, ScalarType? dtype=None, *, str? target=None) -> Tensor")
    check = "\n".join(emit_cpp.emit_check_fn(op)[0])
    assert 's.reduce_x_dim = tileops::check::reduce_mask(kOp, "dim", x.dim(), dim, false);' in check
    lines, shape = emit_cpp.emit_shape(op, None, op.outputs[0], "o")
    assert lines == ["const auto o_shape = tileops::check::reduced_shape(x.sym_sizes(), s.reduce_x_dim, keepdim);"]
    assert emit_cpp._dtype_expr(op, op.outputs[0]) == "dtype.value_or(x.scalar_type())"
    listed = REDUCE.replace('"reduce(x, dim, keepdim)"', '"reduce_listed(x, dim)"')
    (op,) = build_ops([parse_text(listed, "manifests/t.yaml")])
    assert "reduce_mask(kOp, \"dim\", x.dim(), dim, true)" in "\n".join(emit_cpp.emit_check_fn(op)[0])
    assert "s.reduce_x_dim_listed, false)" in emit_cpp.emit_shape(op, None, op.outputs[0], "o")[0][0]


def test_dtype_or_promote_int_to_long_widens_integer_inputs():
    text = REDUCE.replace('"dtype_or(dtype, x)"', '"dtype_or(dtype, promote_int_to_long(x))"')
    (op,) = build_ops([parse_text(text, "manifests/t.yaml")])
    rule = op.outputs[0].dtype
    assert (rule.kind, rule.ref, rule.fallback, rule.widen_int) == ("dtype_or", "dtype", "x", True)
    assert emit_cpp._dtype_expr(op, op.outputs[0]) == \
        "dtype.value_or(tileops::check::promote_int_to_long(x.scalar_type()))"
    assert "promote_int_to_long(z)" in error_of(text.replace("promote_int_to_long(x)", "promote_int_to_long(z)"))


GRAD = """
GOp:
  family: fam
  ref_api: none
  status: implemented
  signature:
    inputs:
      dy: {dtype: bfloat16 | float32, shape: "[...]"}
      weight: {dtype: bfloat16 | float32, shape: "[...]", optional: true}
    outputs:
      dweight: {dtype: "dtype_or(weight, dy)", shape: same_as(dy)}
"""


def test_dtype_or_an_optional_input_takes_its_dtype_when_given():
    (op,) = build_ops([parse_text(GRAD, "manifests/t.yaml")])
    assert emit_cpp._dtype_expr(op, op.outputs[0]) == \
        "(tileops::check::present(weight) ? weight->scalar_type() : dy.scalar_type())"
    required = GRAD.replace(', optional: true}', '}')
    assert "takes a ScalarType? param (or an optional input)" in error_of(required)
    assert "takes a ScalarType? param (or an optional input)" in error_of(
        GRAD.replace('"dtype_or(weight, dy)"', '"dtype_or(weight, promote_int_to_long(dy))"'))


@pytest.mark.parametrize("edit,message", [
    (('"reduce(x, dim, keepdim)"', '"reduce(z, dim, keepdim)"'), "output 'y': reduce(z, dim, keepdim) names no input 'z'"),
    (('"reduce(x, dim, keepdim)"', '"reduce(x, keepdim, keepdim)"'),
     "'keepdim' must be an int, int?, int[] or int[]? param naming the reduced dims"),
    (('"reduce(x, dim, keepdim)"', '"reduce(x, dim, dim)"'), "'dim' must be a bool param"),
    (('"reduce(x, dim, keepdim)"', '"reduce(x)"'), "a reduced shape is reduce(<input>, <dim param>"),
    (('shape: "[...]"}', 'shape: "reduce(x, dim)"}'), "input 'x': a reduced shape describes outputs"),
    (('"dtype_or(dtype, x)"', '"dtype_or(dtype, dtype)"'),
     "dtype_or(<param>, <input>) takes a ScalarType? param (or an optional input) and a tensor input, got "
     "'dtype_or(dtype, dtype)'"),
    (('"dtype_or(dtype, x)"', '"dtype_or(dtype, w)"'), "dtype 'dtype_or(dtype, w)' takes a ScalarType? param and an input"),
    (('"dtype_or(dtype, x)"', '"dtype_or(dtype, promote_int_to_float(x))"'), "unknown dtype 'dtype_or(dtype"),
])
def test_bad_reduce_shapes_and_dtype_or_are_refused_clearly(edit, message):
    old, new = edit
    assert old in REDUCE
    assert message in error_of(REDUCE.replace(old, new, 1))


def test_registration_parts_define_every_operator_once_and_the_library_once():
    ops = load_ops([os.path.join(HERE, "..", "..", "manifests", f) for f in ("norm.yaml", "elementwise.yaml")],
                   os.path.join(HERE, "..", ".."))
    whole = emit_cpp.emit_registration(ops)
    parts = emit_cpp.emit_registration_parts(ops, 8)
    assert len(parts) == 8
    assert parts[0].count("TORCH_LIBRARY(tileops, m) {") == 1
    assert all("TORCH_LIBRARY_FRAGMENT(tileops, m) {" in p and "TORCH_LIBRARY(tileops" not in p for p in parts[1:])
    defs = [line for p in parts for line in p.splitlines() if line.startswith("  m.def(")]
    assert sorted(defs) == sorted(line for line in whole.splitlines() if line.startswith("  m.def("))
    assert len(set(defs)) == len(defs)
    # whole ops in manifest order, about the same amount of C++ a part (the longest part sets the build
    # time): an even count of operators left one part with twice the code of another
    sizes = [len(p.splitlines()) for p in parts]
    assert max(sizes) <= 1.25 * min(sizes), sizes
    for name in ("norm_rms_norm_fwd", "norm_rms_norm_fwd_out"):
        (home,) = [p for p in parts if f'm.def("{name}(' in p]
        assert f"{name}__boundary(" in home and f"{name}__meta(" in home
    assert emit_cpp.emit_registration_parts(ops, 1)[0] == whole


# ---- '...' as the last dim; rules over optional inputs and bool params ------------------------------

SPATIAL = """
SOp:
  family: fam
  ref_api: torch.nn.functional.instance_norm
  status: implemented
  signature:
    inputs:
      x: {dtype: float16, shape: "[n, c, ...]"}
      rm: {dtype: float32, shape: "[c]", optional: true}
      w: {dtype: same_as(x), shape: "[c]", optional: true}
    outputs:
      y: {dtype: same_as(x), shape: same_as(x)}
    params:
      groups: {type: int, default: 1}
      stats: {type: bool, default: true}
    shape_rules:
      - "not given(rm) or not stats"
      - "stats or given(rm)"
      - "groups >= 1"
      - "c % groups == 0"
"""


def test_trailing_ellipsis_binds_the_leading_dims_and_matches_the_rest():
    (op,) = build_ops([parse_text(SPATIAL, "manifests/t.yaml")])
    check = "\n".join(emit_cpp.emit_check_fn(op)[0])
    # n and c bound from the first two dims; '...' takes whatever the fixed dims leave, after them.
    assert "s.sym_n = sz[k];" in check and "s.sym_c = sz[k];" in check
    assert "if (static_cast<int64_t>(sz.size()) < fixed)" in check
    assert "const size_t n_ell = sz.size() - fixed;" in check and "s.ellipsis = sz.slice(k, n_ell);" in check
    assert check.index("s.sym_c = sz[k];") < check.index("s.ellipsis = sz.slice(k, n_ell);")
    lines, shape = emit_cpp.emit_shape(op, emit_cpp.Env(op), op.outputs[0], "o")
    assert (lines, shape) == ([], "x.sym_sizes()")


def test_rules_over_optional_inputs_and_bool_params():
    (op,) = build_ops([parse_text(SPATIAL, "manifests/t.yaml")])
    check = "\n".join(emit_cpp.emit_check_fn(op)[0])
    assert ('if (!(!tileops::check::present(rm) || !stats)) tileops::check::fail_argument_rule(kOp, "rm, stats", '
            '"not given(rm) or not stats", tileops::check::describe_input("rm", rm) + ", " + '
            'tileops::check::describe_param("stats", stats));') in check
    assert "if (!(stats || tileops::check::present(rm))) tileops::check::fail_argument_rule(" in check
    # A rule over params only keeps the params' wording; one over a dim of a shape runs after the shapes.
    assert check.index("fail_rule(kOp, \"groups >= 1\"") < check.index("s.sym_c = sz[k];") < \
        check.index("\"c % groups == 0\"")
    # A broken comparison names the values of what it reads besides its two sides.
    assert ('fail_rule(kOp, "c % groups == 0", lhs, rhs, tileops::check::describe_param("groups", groups) + ", " + '
            'tileops::check::describe_param("c", s.sym_c));') in check


@pytest.mark.parametrize("old,new,message", [
    ('"[n, c, ...]"', '"[n, ..., c]"', "input 'x': shape does not parse: '...' must be the first or the last dim"),
    ('"not given(rm) or not stats"', '"given(x)"', "given() takes a nullable param or an optional input, not 'x'"),
    ('"stats or given(rm)"', '"groups or given(rm)"', "'groups' alone is a condition only when it is a bool param"),
    ('"stats or given(rm)"', '"not groups >= 1"', "'not' negates given(<name>) or a bool param"),
    ('"stats or given(rm)"', '"stats rm"', "a rule compares two expressions"),
])
def test_bad_conditions_and_ellipses_are_refused_clearly(old, new, message):
    assert old in SPATIAL
    assert message in error_of(SPATIAL.replace(old, new, 1))


# ---- sharding: (docs/MANIFEST.md) ------------------------------------------------------------------
def _with_sharding(text, line):
    return text.replace("  status: implemented\n", f"  status: implemented\n  sharding: {line}\n", 1)


def test_sharding_is_read_and_defaults_to_replicate():
    (plain,) = build_ops([parse_text(GOOD, "manifests/t.yaml")])
    assert plain.sharding == ("replicate", ())
    (op,) = build_ops([parse_text(_with_sharding(GOOD, '{free: ["...", n]}'), "manifests/t.yaml")])
    assert op.sharding == ("free", (("free", ("...", "n")), ("partial", ())))
    (r,) = build_ops([parse_text(textwrap.dedent(_with_sharding(REDUCE, "{reduce: dim}")), "manifests/t.yaml")])
    assert r.sharding == ("reduce", (("reduce", "dim"),))


@pytest.mark.parametrize("line, message", [
    ("{free: [m]}", "sharding.free: 'm' is no dim of an input's shape"),
    ("{free: [n|m]}", "sharding.free: 'm' is no dim of an input's shape"),
    ("{free: [n], partial: [z]}", "sharding.partial: 'z' is not an output"),
    ("{except: n}", "sharding.except names a param of type int or SymInt, got 'n'"),
    ("{free: [n], except: n}", "sharding names exactly one of free:, except:, reduce:, matmul:"),
    ("{matmul: [ta, tb]}", "sharding.matmul names the two bool params that transpose a and b"),
    ("{gather: [n]}", "unknown key 'gather' in sharding"),
    ("everything", "sharding is `replicate` or a map"),
])
def test_sharding_mistakes_are_refused(line, message):
    assert message in error_of(_with_sharding(GOOD, line))


MATMUL = """
MOp:
  family: fam
  ref_api: torch.mm
  status: implemented
  signature:
    inputs:
      a: {dtype: float16, shape: "[a0, a1]"}
      b: {dtype: float16, shape: "[b0, b1]"}
    outputs:
      d: {dtype: float16, shape: "[select(ta, a1, a0), select(tb, b0, b1)]"}
    params:
      ta: {type: bool, default: false}
      tb: {type: bool, default: false}
    shape_rules: ["select(ta, a0, a1) == select(tb, b1, b0)"]
"""


def test_matmul_sharding_names_the_two_transpose_flags():
    (m,) = build_ops([parse_text(textwrap.dedent(_with_sharding(MATMUL, "{matmul: [ta, tb]}")), "manifests/t.yaml")])
    assert m.sharding == ("matmul", (("matmul", ("ta", "tb")),))
    assert "sharding.matmul names the two bool params" in error_of(_with_sharding(MATMUL, "{matmul: [ta]}"))
    assert "sharding.matmul takes no partial:" in error_of(_with_sharding(MATMUL, "{matmul: [ta, tb], partial: [d]}"))


def test_reduce_sharding_names_a_dim_param():
    assert "sharding.reduce names a param of type" in error_of(_with_sharding(REDUCE, "{reduce: keepdim}"))


def test_reduce_sharding_combines_by_sum_max_or_min_only():
    (r,) = build_ops([parse_text(textwrap.dedent(_with_sharding(REDUCE, "{reduce: dim, combine: max}")),
                                 "manifests/t.yaml")])
    assert r.sharding == ("reduce", (("reduce", "dim"), ("combine", "max")))
    assert "sharding.combine goes with reduce: and is one of sum, max, min" in \
        error_of(_with_sharding(REDUCE, "{reduce: dim, combine: avg}"))
    assert "sharding.combine goes with reduce:" in error_of(_with_sharding(GOOD, "{free: [n], combine: sum}"))



def test_is_pow2_and_ilog2_emit_guarded_checks():
    text = GOOD.replace("outputs:", "shape_rules: ['is_pow2(n) == 1']\n    outputs:", 1)
    out = emit_cpp.emit_registration(build_ops([parse_text(text, "manifests/t.yaml")]))
    assert "const c10::SymInt lhs = tileops::check::sym_is_pow2(s.sym_n);" in out
    assert '"is_pow2(n) == 1"' in out  # the rule's text, for the refusal

@pytest.mark.parametrize("rule,message", [
    ("'is_pow2(n, n) == 1'", "is_pow2() takes one int expression"),
    ("'ilog2(m) >= 1'", "'m' is not an int param or a dim bound by an input shape"),
])
def test_is_pow2_and_ilog2_mistakes_are_refused(rule, message):
    assert message in error_of(GOOD.replace("outputs:", f"shape_rules: [{rule}]\n    outputs:", 1))


def test_complex_dtypes_parse():
    (op,) = build_ops([parse_text(GOOD.replace("dtype: float16,", "dtype: complex64 | complex128,", 1),
                                  "manifests/t.yaml")])
    assert set(op.inputs[0].dtype.names) == {"complex64", "complex128"}
    assert "at::kComplexFloat" in emit_cpp.emit_registration([op])
