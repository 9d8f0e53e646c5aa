"""The grammar's pooling pieces: int[N] params (schema int[N], which torch fills from one int),
the pool(...) and adaptive_pool(...) output shapes, `not given(<param>) or <param> != 0` rules, and one test per rule
they add (each error names file:line, the entry and the rule)."""
import textwrap

import pytest

from codegen import emit_cpp, exprs
from codegen.model import build_ops
from codegen.parse import ManifestError, parse_text

POOL = """
PoolOp:
  family: fam
  ref_api: torch.nn.functional.max_pool2d
  status: implemented
  signature:
    inputs:
      input: {dtype: float32, shape: "[..., C, H, W]"}
    outputs:
      output: {dtype: same_as(input), shape: "pool(input, kernel_size, stride, padding, dilation, ceil_mode)"}
    params:
      kernel_size: {type: "int[2]"}
      stride: {type: "int[2]?", default: null}
      padding: {type: "int[2]", default: [0, 0]}
      dilation: {type: "int[2]", default: [1, 1]}
      ceil_mode: {type: bool, default: false}
      divisor_override: {type: "int?", default: null}
    shape_rules: ["not given(divisor_override) or divisor_override != 0"]
AdaptiveOp:
  family: fam
  ref_api: torch.nn.functional.adaptive_avg_pool2d
  status: implemented
  signature:
    inputs:
      input: {dtype: float32, shape: "[..., C, H, W]"}
    outputs:
      output: {dtype: same_as(input), shape: "adaptive_pool(input, output_size)"}
    params:
      output_size: {type: "int[2]"}
"""


def ops(text=POOL):
    return {op.cls: op for op in build_ops([parse_text(textwrap.dedent(text), "manifests/t.yaml")])}


def error_of(text):
    with pytest.raises(ManifestError) as e:
        ops(text)
    return str(e.value)


def test_fixed_length_lists_are_int_n_in_the_schema():
    op = ops()["PoolOp"]
    assert emit_cpp.schema(op, op.branches[0]) == (
        "fam_pool(Tensor input, int[2] kernel_size, int[2]? stride=None, int[2] padding=[0,0], "
        "int[2] dilation=[1,1], bool ceil_mode=False, int? divisor_override=None, *, str? target=None) -> Tensor")
    p = op.param("kernel_size")
    assert (p.type, p.length) == ("int[]", 2)  # read as any int[] by the grammar, views and Python
    # constants in C++ (IntArrayRef), as the schema says
    assert emit_cpp.param_cpp_type(p) == "c10::IntArrayRef"
    assert emit_cpp.param_cpp_type(op.param("stride")) == "at::OptionalIntArrayRef"
    assert emit_cpp.param_value(p) == "tileops::ParamValue::ints(kernel_size)"


def test_pool_shapes_parse_and_render():
    assert exprs.parse_shape("pool(x, k, s, p, 1, c)") == exprs.Pooled("x", "k", "s", "p", None, "c")
    assert exprs.render(exprs.parse_shape("pool(x, k, s, p, d, c)")) == "pool(x, k, s, p, d, c)"
    assert exprs.parse_shape("adaptive_pool(x, o)") == exprs.AdaptivePooled("x", "o")
    assert exprs.parse_rule("not given(d) or d != 0") == exprs.Or((exprs.Not(exprs.Given("d")),
                                                                    exprs.Cmp("!=", exprs.Name("d"), exprs.Num(0))))


def test_pool_output_comes_from_the_checked_pool_shape():
    op = ops()["PoolOp"]
    check = "\n".join(emit_cpp.emit_check_fn(op)[0])
    assert ('s.pooled_output = tileops::check::pool_shape(kOp, "input", input.sym_sizes(), 2, '
            '{"kernel_size", "stride", "padding", "dilation"}, '
            '{tileops::check::sym_ints(kOp, "kernel_size", kernel_size), '
            '(stride.has_value() ? tileops::check::sym_ints(kOp, "stride", *stride) : c10::SymIntArrayRef()), '
            'tileops::check::sym_ints(kOp, "padding", padding), '
            'tileops::check::sym_ints(kOp, "dilation", dilation)}, ceil_mode);') in check
    # the divisor rule reads the param only when it is given
    assert "!divisor_override.has_value() || (c10::SymInt(divisor_override.value())" in check
    _, env = emit_cpp.emit_check_fn(op)
    body = "\n".join(emit_cpp.emit_branch(op, env, op.branches[0]))
    boundary, meta = body[: body.index("__meta(")], body[body.index("__meta("):]
    assert "tileops::runtime::empty(c10::SymIntArrayRef(s.pooled_output)" in boundary
    assert "at::empty_symint(c10::SymIntArrayRef(s.pooled_output)" in meta


def test_pool_without_dilation_and_adaptive_pool():
    text = POOL.replace("pool(input, kernel_size, stride, padding, dilation, ceil_mode)",
                        "pool(input, kernel_size, stride, padding, 1, ceil_mode)")
    check = "\n".join(emit_cpp.emit_check_fn(ops(text)["PoolOp"])[0])
    assert '{"kernel_size", "stride", "padding", nullptr}' in check
    assert 'tileops::check::sym_ints(kOp, "padding", padding), c10::SymIntArrayRef()}' in check
    check = "\n".join(emit_cpp.emit_check_fn(ops()["AdaptiveOp"])[0])
    assert ('s.pooled_output = tileops::check::adaptive_pool_shape(kOp, "input", input.sym_sizes(), 2, '
            '"output_size", tileops::check::sym_ints(kOp, "output_size", output_size));') in check


@pytest.mark.parametrize("edit,message", [
    (('{type: "int[2]"}\n      stride', '{type: "int[0]"}\n      stride'), "param 'kernel_size': unknown type 'int[0]'"),
    (("default: [0, 0]", "default: [0, 0, 0]"), "param 'padding': default [0, 0, 0] must have 2 elements (int[2])"),
    (('dilation: {type: "int[2]", default: [1, 1]}',
      'dilation: {type: "int[3]", default: [1, 1, 1]}'),
     "'dilation' is int[3] but the others are int[2]; one spatial rank"),
    (('kernel_size: {type: "int[2]"}',
      'kernel_size: {type: "int[]"}'),
     "'kernel_size' must be an int[N] param (N: the spatial rank)"),
    (('padding: {type: "int[2]", default: [0, 0]}', 'padding: {type: "int[2]?", default: null}'),
     "'padding' must be an int[N] param"),
    (("ceil_mode: {type: bool, default: false}", "ceil_mode: {type: int, default: 0}"),
     "'ceil_mode' must be a bool param"),
    (("pool(input, kernel_size, stride, padding, dilation, ceil_mode)", "pool(input, kernel_size)"),
     "a pooled shape is pool(<input>, <kernel_size>, <stride>, <padding>, <dilation> | 1, <ceil_mode>)"),
    (("pool(input, kernel_size, stride, padding, dilation, ceil_mode)",
      "pool(other, kernel_size, stride, padding, dilation, ceil_mode)"), "'other' must be an input with a list of dims"),
    (("adaptive_pool(input, output_size)", "adaptive_pool(input, 2)"), "adaptive_pool(<input>, <output_size>)"),
    (('output_size: {type: "int[2]"}', 'output_size: {type: "int"}'), "'output_size' must be an int[N] param"),
    (("not given(divisor_override)", "not given(ceil_mode)"),
     "given() takes a nullable param or an optional input, not 'ceil_mode'"),
])
def test_pool_grammar_errors(edit, message):
    text = POOL.replace(*edit)
    assert text != POOL, edit
    msg = error_of(text)
    assert msg.startswith("manifests/t.yaml:") and message in msg, msg


def test_a_pooled_shape_describes_outputs_only():
    text = POOL.replace('input: {dtype: float32, shape: "[..., C, H, W]"}\n    outputs:\n      output: {dtype: same_as(input), '
                        'shape: "pool',
                        'input: {dtype: float32, shape: "adaptive_pool(input, output_size)"}\n    outputs:\n      '
                        'output: {dtype: same_as(input), shape: "pool', 1)
    assert text != POOL
    assert "a pooled shape describes outputs" in error_of(text)
