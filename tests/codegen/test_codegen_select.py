"""select(<bool param>, <expr>, <expr>) in shapes and rules (GemmFwdOp's transpose flags): the C++
it becomes, and the manifest errors it adds (file:line, the entry, the rule)."""
import textwrap

import pytest

from codegen import emit_cpp, exprs
from codegen.model import build_ops
from codegen.parse import ManifestError, parse_text

GEMM = """
MmOp:
  family: fam
  ref_api: torch.matmul
  status: implemented
  signature:
    inputs:
      a: {dtype: float32, shape: "[a0, a1]"}
      b: {dtype: float32, shape: "[b0, b1]"}
    outputs:
      d: {dtype: same_as(a), shape: "[select(trans_a, a1, a0), select(trans_b, b0, b1)]"}
    params:
      trans_a: {type: bool, default: false}
      trans_b: {type: bool, default: true}
      n: {type: int, default: 1}
    shape_rules: ["select(trans_a, a0, a1) == select(trans_b, b1, b0)"]
"""


def ops(text=GEMM):
    return {op.cls: op for op in build_ops([parse_text(textwrap.dedent(text), "manifests/t.yaml")])}


def error_of(text):
    with pytest.raises(ManifestError) as e:
        ops(text)
    return str(e.value)


def test_select_parses_renders_and_names_its_flag():
    node = exprs.parse_expr("select(t, a0 + 1, a1)")
    assert exprs.render(node) == "select(t, a0 + 1, a1)"
    assert exprs.select_flags(node) == {"t"} and exprs.names_in(node) == {"t", "a0", "a1"}


def test_select_becomes_a_conditional_in_the_check_and_the_output_shape():
    op = ops()["MmOp"]
    check = "\n".join(emit_cpp.emit_check_fn(op)[0])
    assert "const c10::SymInt lhs = (trans_a ? s.sym_a0 : s.sym_a1);" in check
    assert "const c10::SymInt rhs = (trans_b ? s.sym_b1 : s.sym_b0);" in check
    assert 'tileops::check::describe_param("trans_a", trans_a)' in check  # the flags' values in the message
    _, env = emit_cpp.emit_check_fn(op)
    body = "\n".join(emit_cpp.emit_branch(op, env, op.branches[0]))
    assert "push_back((trans_a ? s.sym_a1 : s.sym_a0));" in body


@pytest.mark.parametrize("bad,why", [
    ('"[select(n, a1, a0), b1]"', "select() takes a bool param"),          # an int param as the flag
    ('"[select(trans_a, a1), b1]"', "select() takes a bool param"),        # two arguments
    ('"[select(nope, a1, a0), b1]"', "select() takes a bool param"),       # not a param at all
])
def test_select_needs_a_bool_param_and_two_values(bad, why):
    text = GEMM.replace('"[select(trans_a, a1, a0), select(trans_b, b0, b1)]"', bad)
    msg = error_of(text)
    assert "manifests/t.yaml:" in msg and "MmOp" in msg and why in msg, msg


def test_select_in_a_rule_is_checked_too():
    text = GEMM.replace("select(trans_a, a0, a1) ==", "select(n, a0, a1) ==")
    assert "select() takes a bool param" in error_of(text)

