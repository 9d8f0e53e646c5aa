"""Shape rules over a str param's value (`layout != '1d' or ndim(x) == 2`): parsed, refused unless the
param is a str with that choice, and emitted as a comparison of the param."""
import textwrap

import pytest

from codegen import emit_cpp, exprs
from codegen.model import build_ops
from codegen.parse import ManifestError, parse_text

ENTRY = textwrap.dedent("""
    RotFwdOp:
      family: fam
      ref_api: torch.rot
      status: implemented
      signature:
        inputs:
          x: {dtype: float32, shape: "[..., d]"}
        outputs:
          y: {dtype: same_as(x), shape: same_as(x)}
        params:
          layout: {type: str, default: "1d", choices: ["1d", "2d"]}
          flag: {type: bool, default: false}
        shape_rules:
          - "layout != '1d' or ndim(x) == 2"
    """)


def test_a_str_comparison_parses_and_renders():
    node = exprs.parse_rule("layout != '1d' or ndim(x) == 2")
    assert node.conds[0] == exprs.StrIs("layout", "!=", "1d")
    assert exprs.render(node) == "layout != '1d' or ndim(x) == 2"
    assert exprs.names_in(node) == {"layout", "x"}


def test_the_rule_is_emitted_as_a_comparison_of_the_param():
    (op,) = build_ops([parse_text(ENTRY, "manifests/fam.yaml")])
    text = emit_cpp.emit_registration_parts([op], 1)[0]
    assert '(layout != "1d")' in text
    assert "layout != '1d' or ndim(x) == 2" in text  # the rule as the refusal quotes it


@pytest.mark.parametrize("rule", ["flag != '1d' or ndim(x) == 2", "layout == '3d' or ndim(x) == 4",
                                  "ghost == '1d' or ndim(x) == 2"])
def test_only_a_str_param_and_one_of_its_choices(rule):
    with pytest.raises(ManifestError, match="compares a str param"):
        build_ops([parse_text(ENTRY.replace("layout != '1d' or ndim(x) == 2", rule), "manifests/fam.yaml")])
