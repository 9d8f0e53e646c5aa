"""The elementwise grammar: `elementwise:` expressions, shape `any`, broadcast_shapes(), promote()
and Scalar params; each rule broken is an error pointing at the manifest line, and a good entry
emits the broadcast and promotion checks."""
import textwrap

import pytest

from codegen import emit_cpp
from codegen.model import build_ops
from codegen.parse import ManifestError, parse_text

GOOD = """
AddOp:
  family: ew
  ref_api: torch.add
  status: implemented
  elementwise: "a + alpha * b"
  signature:
    inputs:
      a: {dtype: int32 | float32, shape: any, mutated: optional}
      b: {dtype: int32 | float32, shape: any}
    outputs:
      y: {dtype: "promote(a, b)", shape: "broadcast_shapes(a, b)", aliases: a, buffer: out}
    params:
      alpha: {type: Scalar, default: 1}
"""


def ops_of(text):
    return build_ops([parse_text(textwrap.dedent(text), "manifests/t.yaml")])


def error_of(text):
    with pytest.raises(ManifestError) as e:
        ops_of(text)
    return str(e.value)


def test_good_entry_emits_broadcast_promotion_and_in_place_checks():
    (op,) = ops_of(GOOD)
    assert op.elementwise == "a + alpha * b"
    # an in-place branch and an out= branch, never both at once
    assert [b.suffix for b in op.branches] == ["", "_out", "_writes_a"]
    reg = emit_cpp.emit_registration([op])
    assert 's.broadcast = tileops::check::broadcast_shapes(kOp, {"a", "b"}, {a.sym_sizes(), b.sym_sizes()});' in reg
    assert "tileops::check::promote({&a, &b})" in reg
    assert 'tileops::check::require_broadcast_into(kOp, "a", a, s.broadcast);' in reg
    assert 'tileops::check::require_can_cast(kOp, "a", a, tileops::check::promote({&a, &b}));' in reg
    assert "Scalar alpha=1" in emit_cpp.schema(op, op.branches[0])
    assert "tileops::check::scalar_value(alpha)" in reg
    # inputs are read with their strides: no contiguous copy of b
    assert "b.contiguous()" not in reg
    header = emit_cpp.emit_elementwise_header([op])
    assert ('{"AddOp", "ew_add", 0, "a + alpha * b", 2, {"a", "b"}, {false, false}, 1, {"alpha"}, '
            '{IfNone::kRequired}, {false}, -1, 1, {nullptr}, {"a + alpha * b"}, {-1}}') in header


@pytest.mark.parametrize("edit,message", [
    (('elementwise: "a + alpha * b"', 'elementwise: "a + alpha * sqr(b)"'), "elementwise: unknown function 'sqr'"),
    (('elementwise: "a + alpha * b"', 'elementwise: "a + beta * b"'), "'beta' is not an input or param of the entry"),
    (('b: {dtype: int32 | float32, shape: any}', 'b: {dtype: int32 | float32, shape: "[n]"}'),
     "input 'b' of an elementwise entry takes shape 'any'"),
    (('shape: "broadcast_shapes(a, b)"', 'shape: "broadcast_shapes(a)"'),
     "output 'y' of an elementwise entry has shape 'broadcast_shapes(a, b)'"),
    (('shape: "broadcast_shapes(a, b)"', 'shape: "broadcast_shapes(a, c)"'),
     "broadcast_shapes() names unknown input 'c'"),
    (('shape: "broadcast_shapes(a, b)"', 'shape: any'), "shape 'any' is for inputs"),
    (('b: {dtype: int32 | float32, shape: any}', 'b: {dtype: int32 | float32, shape: "broadcast_shapes(a)"}'),
     "broadcast_shapes() gives an output's shape"),
    (('"promote(a, b)"', '"promote(a, c)"'), "dtype 'promote(a, c)' names unknown input 'c'"),
    (('alpha: {type: Scalar, default: 1}', 'alpha: {type: str, default: x}'),
     "param 'alpha' of an elementwise entry is one of Scalar, float, int, bool"),
    (('alpha: {type: Scalar, default: 1}', 'alpha: {type: Scalar, default: [1]}'), "default [1] is not a Scalar"),
    (('"promote(a, b)"', '"same_as(b)"'), "output 'y' aliases 'a', so its dtype must be same_as(a)"),
])
def test_rules(edit, message):
    assert message in error_of(GOOD.replace(*edit))


CLAMP = """
ClampOp:
  family: ew
  ref_api: torch.clamp
  status: implemented
  elementwise: "clamp(x, lo, hi)"
  signature:
    inputs:
      x: {dtype: int32 | float32, shape: any}
    outputs:
      y: {dtype: same_as(x), shape: same_as(x), buffer: out}
    params:
      lo: {type: "Scalar?", default: null, none: "-inf"}
      hi: {type: "Scalar?", default: null, none: "inf"}
    shape_rules: ["given(lo) or given(hi)"]
"""


def test_nullable_params_say_what_none_stands_for_and_rules_read_given():
    (op,) = ops_of(CLAMP)
    assert [p.none for p in op.params] == ["-inf", "inf"]
    assert "Scalar? lo=None, Scalar? hi=None" in emit_cpp.schema(op, op.branches[0])
    reg = emit_cpp.emit_registration([op])
    assert ('if (!(lo.has_value() || hi.has_value())) tileops::check::fail_param_rule(kOp, "lo, hi", '
            '"given(lo) or given(hi)", tileops::check::describe_param("lo", lo) + ", " + '
            'tileops::check::describe_param("hi", hi));') in reg
    assert "{IfNone::kNegInf, IfNone::kInf}" in emit_cpp.emit_elementwise_header([op])


DIV = """
DivOp:
  family: ew
  ref_api: torch.div
  status: implemented
  elementwise:
    mode:
      None: "a / b"
      floor: "floor_divide(a, b)"
  signature:
    inputs:
      a: {dtype: bool | int32 | float32, shape: any, mutated: optional}
      b: {dtype: bool | int32 | float32, shape: any}
    outputs:
      y:
        dtype:
          mode: {None: "promote_float(a, b)", floor: "promote(a, b) in int32 | float32"}
        shape: "broadcast_shapes(a, b)"
        aliases: a
        buffer: out
    params:
      mode: {type: "str?", default: null, choices: [floor]}
"""


def test_a_str_param_chooses_the_expression_and_the_output_dtype():
    (op,) = ops_of(DIV)
    assert op.select == "mode" and op.select_cases == ((None, "a / b"), ("floor", "floor_divide(a, b)"))
    reg = emit_cpp.emit_registration([op])
    both = ("(!mode.has_value() ? tileops::check::promote_int_to_float(tileops::check::promote({&a, &b})) : "
            "tileops::check::promote({&a, &b}))")
    # the boundary allocates through the runtime (CUDA outputs skip a dispatch), the Meta kernel through ATen
    assert f"tileops::runtime::empty(c10::SymIntArrayRef(s.broadcast), a.options().dtype({both}));" in reg
    assert f"at::empty_symint(c10::SymIntArrayRef(s.broadcast), a.options().dtype({both}));" in reg
    assert f'tileops::check::require_can_cast(kOp, "a", a, {both});' in reg
    assert ('if ((mode.has_value() && *mode == "floor")) tileops::check::require_result_dtype(kOp, "y", '
            'tileops::check::promote({&a, &b}), {at::kInt, at::kFloat}, "promote(a, b) in int32 | float32");') in reg
    header = emit_cpp.emit_elementwise_header([op])
    assert '0, 2, {nullptr, "floor"}, {"a / b", "floor_divide(a, b)"}, {-1, -1}}' in header


PRELU = """
PreluOp:
  family: ew
  ref_api: torch.nn.functional.prelu
  status: implemented
  elementwise: "x > C(0) ? x : w * x"
  signature:
    inputs:
      x: {dtype: float32, shape: any}
      w: {dtype: same_as(x), shape: "along(x, 1)"}
    outputs:
      y: {dtype: same_as(x), shape: same_as(x)}
"""


def test_an_input_along_a_dim_is_checked_and_viewed_for_the_engine():
    (op,) = ops_of(PRELU)
    reg = emit_cpp.emit_registration([op])
    assert 'tileops::check::require_along(kOp, "w", w, "x", x, 1);' in reg
    assert "ins{x, tileops::check::along_view(w, x.dim(), 1)}" in reg


@pytest.mark.parametrize("text,edit,message", [
    (CLAMP, ('none: "-inf"', 'none: "zero?"'), "none: says what None stands for"),
    (CLAMP, (', none: "inf"', ''), "param 'hi' is nullable: say what None stands for"),
    (CLAMP, ("given(lo) or given(hi)", "given(lo) or given(x)"), "given() takes a nullable param or an optional input, not 'x'"),
    (CLAMP, ("given(lo) or given(hi)", "given(lo) or"), "shape rule does not parse"),
    (DIV, ('floor: "floor_divide(a, b)"', 'trunc: "a / b"'), "the cases of 'mode' must be exactly None, floor"),
    (DIV, (", choices: [floor]", ""), "'mode' must be a str param with choices"),
    (DIV, ("in int32 | float32", "in int33"), "unknown dtype 'int33'"),
    (DIV, ('None: "a / b"', 'None: "a / mode"'), "'mode' is not an input or param of the entry"),
    (PRELU, ('"along(x, 1)"', '"along(w, 1)"'), "along(w, 1) must name an earlier input of shape 'any'"),
    (PRELU, ('"along(x, 1)"', '"along(x)"'), "along() takes an input name and a dim"),
])
def test_new_grammar_rules(text, edit, message):
    assert message in error_of(text.replace(*edit))


BOUNDS = """
BoundsOp:
  family: ew
  ref_api: torch.clamp
  status: implemented
  elementwise:
    given:
      "lo, hi": "minimum(maximum(x, lo), hi)"
      "lo": "maximum(x, lo)"
      "hi": "minimum(x, hi)"
  signature:
    inputs:
      x: {dtype: int32 | float32, shape: any}
      lo: {dtype: int32 | float32, shape: any, optional: true}
      hi: {dtype: int32 | float32, shape: any, optional: true}
    outputs:
      y: {dtype: "promote(x, lo, hi)", shape: "broadcast_shapes(x, lo, hi)", buffer: out}
    shape_rules: ["given(lo) or given(hi)"]
"""


def test_the_optional_inputs_given_choose_the_expression():
    (op,) = ops_of(BOUNDS)
    assert op.given_cases == ((("lo", "hi"), "minimum(maximum(x, lo), hi)"), (("lo",), "maximum(x, lo)"),
                              (("hi",), "minimum(x, hi)"))
    assert "Tensor? lo=None, Tensor? hi=None" in emit_cpp.schema(op, op.branches[0])
    reg = emit_cpp.emit_registration([op])
    # an absent bound stands in as x for the shape and the dtype, and reaches the target undefined
    assert "(tileops::check::present(lo) ? *lo : x).sym_sizes()" in reg
    assert "tileops::check::promote({&x, &(tileops::check::present(lo) ? *lo : x), " in reg
    assert "tileops::check::present(hi) ? *hi : at::Tensor()" in reg
    header = emit_cpp.emit_elementwise_header([op])
    assert '{"minimum(maximum(x, lo), hi)", "maximum(x, lo)", "minimum(x, hi)"}, {7, 3, 5}}' in header
    exprs = emit_cpp.emit_elementwise_exprs([op])
    assert "struct ew_bounds__1 {" in exprs and "return cast<TO>(maximum(x, lo));" in exprs


@pytest.mark.parametrize("edit,message", [
    (('"lo": "maximum(x, lo)"', '"lo": "maximum(x, hi)"'), "elementwise: 'hi' is not an input or param of the entry"),
    (('"lo": "maximum(x, lo)"', '"lo, lo": "maximum(x, lo)"'), "elementwise given 'lo, lo': names optional inputs"),
    (('"lo": "maximum(x, lo)"', '"x": "maximum(x, lo)"'), "elementwise given 'x': names optional inputs"),
    (('"lo": "maximum(x, lo)"', '"hi, lo": "maximum(x, lo)"'), "elementwise given 'hi, lo': this set of inputs has a case already"),
    (('x: {dtype: int32 | float32, shape: any}', 'x: {dtype: int32 | float32, shape: any, optional: true}'),
     "input 'x' of an elementwise entry takes shape 'any' (or along(<input>, <dim>)) and is not optional"),
])
def test_given_rules(edit, message):
    assert edit[0] in BOUNDS
    assert message in error_of(BOUNDS.replace(*edit))


def test_optional_inputs_need_a_choice_by_the_inputs_given():
    text = BOUNDS.replace('''  elementwise:
    given:
      "lo, hi": "minimum(maximum(x, lo), hi)"
      "lo": "maximum(x, lo)"
      "hi": "minimum(x, hi)"''', '''  elementwise: "minimum(maximum(x, lo), hi)"''')
    assert "input 'lo' of an elementwise entry takes shape 'any'" in error_of(text)
