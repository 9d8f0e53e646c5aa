"""The grammar's convolution piece: the conv(...) output shape, the generated conv_shape call, and one
test per rule it adds (each error names file:line, the entry and the rule)."""
import textwrap

import pytest

from codegen import emit_cpp, exprs
from codegen.model import build_ops
from codegen.parse import ManifestError, parse_text

CONV = """
ConvOp:
  family: fam
  ref_api: torch.nn.functional.conv2d
  status: implemented
  signature:
    inputs:
      input: {dtype: float32, shape: "[..., C_in, H, W]"}
      weight: {dtype: same_as(input), shape: "[C_out, C_in_g, kH, kW]"}
      bias: {dtype: same_as(input), shape: "[C_out]", optional: true}
    outputs:
      output: {dtype: same_as(input), shape: "conv(input, weight, stride, padding, dilation, padding_str)"}
    params:
      stride: {type: "int[2]", default: [1, 1]}
      padding: {type: "int[2]", default: [0, 0]}
      dilation: {type: "int[2]", default: [1, 1]}
      groups: {type: int, default: 1}
      padding_str: {type: "str?", default: null, choices: [valid, same]}
    shape_rules: ["C_in == C_in_g * groups"]
"""


def ops(text=CONV):
    return {op.cls: op for op in build_ops([parse_text(textwrap.dedent(text), "manifests/t.yaml")])}


def error_of(text):
    with pytest.raises(ManifestError) as e:
        ops(text)
    return str(e.value)


def test_conv_shapes_parse_and_render():
    assert exprs.parse_shape("conv(x, w, s, p, d)") == exprs.Convolved("x", "w", "s", "p", "d", None)
    assert exprs.parse_shape("conv(x, w, s, p, d, m)") == exprs.Convolved("x", "w", "s", "p", "d", "m")
    assert exprs.render(exprs.parse_shape("conv(x, w, s, p, d, m)")) == "conv(x, w, s, p, d, m)"
    assert exprs.render(exprs.parse_shape("conv(x,w,s,p,d)")) == "conv(x, w, s, p, d)"


def test_the_schema_and_the_checked_conv_shape():
    op = ops()["ConvOp"]
    assert emit_cpp.schema(op, op.branches[0]) == (
        "fam_conv(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=[1,1], int[2] padding=[0,0], "
        "int[2] dilation=[1,1], int groups=1, str? padding_str=None, *, str? target=None) -> Tensor")
    check = "\n".join(emit_cpp.emit_check_fn(op)[0])
    assert ('s.pooled_output = tileops::check::conv_shape(kOp, "input", input.sym_sizes(), "weight", '
            'weight.sym_sizes(), 2, {"stride", "padding", "dilation"}, '
            '{tileops::check::sym_ints(kOp, "stride", stride), tileops::check::sym_ints(kOp, "padding", padding), '
            'tileops::check::sym_ints(kOp, "dilation", dilation)}, "padding_str", padding_str);') in check
    # the channel rule reads dims, so it runs before the shape (it was bound by the input checks)
    assert check.index('"C_in == C_in_g * groups"') < check.index("conv_shape(")
    _, env = emit_cpp.emit_check_fn(op)
    body = "\n".join(emit_cpp.emit_branch(op, env, op.branches[0]))
    boundary, meta = body[: body.index("__meta(")], body[body.index("__meta("):]
    assert "tileops::runtime::empty(c10::SymIntArrayRef(s.pooled_output)" in boundary
    assert "at::empty_symint(c10::SymIntArrayRef(s.pooled_output)" in meta


def test_conv_without_padding_str():
    text = CONV.replace("dilation, padding_str)", "dilation)")
    check = "\n".join(emit_cpp.emit_check_fn(ops(text)["ConvOp"])[0])
    assert 'tileops::check::sym_ints(kOp, "dilation", dilation)}, nullptr, std::nullopt);' in check


@pytest.mark.parametrize("edit,message", [
    (("conv(input, weight, stride, padding, dilation, padding_str)", "conv(input, weight, stride)"),
     "a convolved shape is conv(<input>, <weight>, <stride>, <padding>, <dilation>[, <padding_str>])"),
    (("conv(input, weight, stride, padding, dilation, padding_str)", "conv(input, weight, stride, padding, 1)"),
     "a convolved shape is conv("),
    (("conv(input, weight,", "conv(other, weight,"), "'other' must be an input with a list of dims"),
    (("conv(input, weight,", "conv(input, bias,"), "'bias' must be a required input of 4 dims"),
    (('weight: {dtype: same_as(input), shape: "[C_out, C_in_g, kH, kW]"}',
      'weight: {dtype: same_as(input), shape: "[C_out, C_in_g, kW]"}'), "'weight' must be a required input of 4 dims"),
    (('stride: {type: "int[2]", default: [1, 1]}', 'stride: {type: "int[]", default: [1, 1]}'),
     "'stride' must be an int[N] param (N: the spatial rank)"),
    (('padding: {type: "int[2]", default: [0, 0]}', 'padding: {type: "int[2]?", default: null}'),
     "'padding' must be an int[N] param"),
    (('dilation: {type: "int[2]", default: [1, 1]}', 'dilation: {type: "int[3]", default: [1, 1, 1]}'),
     "'dilation' is int[3] but the others are int[2]; one spatial rank"),
    (("padding_str: {type: \"str?\", default: null, choices: [valid, same]}",
      "padding_str: {type: \"str\", default: same, choices: [valid, same]}"),
     "'padding_str' must be a str? param with choices among valid, same"),
    (("choices: [valid, same]", "choices: [valid, full]"), "'padding_str' must be a str? param with choices"),
])
def test_conv_grammar_errors(edit, message):
    text = CONV.replace(*edit)
    assert text != CONV, edit
    msg = error_of(text)
    assert msg.startswith("manifests/t.yaml:") and message in msg, msg


def test_a_convolved_shape_describes_outputs_only():
    text = CONV.replace('bias: {dtype: same_as(input), shape: "[C_out]", optional: true}',
                        'bias: {dtype: same_as(input), shape: "conv(input, weight, stride, padding, dilation)", '
                        'optional: true}')
    assert text != CONV
    assert "a convolved shape describes outputs" in error_of(text)
