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
    assert '{"AddOp", "ew_add", 0, "a + alpha * b", 2, {"a", "b"}, {false, false}, 1, {"alpha"}}' in header


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
