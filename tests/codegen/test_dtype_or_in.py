"""The grammar addition `dtype_or(<ScalarType? param>, <input>) in <union>` (docs/MANIFEST.md): the param's
dtype when given, else the input's, refused (TypeError) outside the union, as `promote(...) in <union>`."""
import textwrap

import pytest

from codegen import emit_cpp
from codegen.model import build_ops
from codegen.parse import ManifestError, parse_text

FP8_OUT = """
AOp:
  family: fam
  ref_api: none
  status: implemented
  signature:
    inputs:
      q: {dtype: float16 | bfloat16 | float8_e4m3fn, shape: "[n]"}
    outputs:
      o: {dtype: "dtype_or(dtype, q) in float16 | bfloat16", shape: "[n]"}
    params:
      dtype: {type: "ScalarType?", default: null, choices: [float16, bfloat16]}
"""


def test_dtype_or_in_a_union_checks_the_result_before_any_allocation():
    (op,) = build_ops([parse_text(FP8_OUT, "manifests/t.yaml")])
    rule = op.outputs[0].dtype
    assert (rule.kind, rule.ref, rule.fallback, rule.names) == ("dtype_or", "dtype", "q", ("float16", "bfloat16"))
    assert emit_cpp._dtype_expr(op, op.outputs[0]) == "dtype.value_or(q.scalar_type())"
    check = "\n".join(emit_cpp.emit_check_fn(op)[0])
    assert ('tileops::check::require_result_dtype(kOp, "o", dtype.value_or(q.scalar_type()), '
            '{at::kHalf, at::kBFloat16}, "dtype_or(dtype, q) in float16 | bfloat16");') in check


def test_dtype_or_without_a_union_checks_nothing_more():
    (op,) = build_ops([parse_text(FP8_OUT.replace(" in float16 | bfloat16", ""), "manifests/t.yaml")])
    assert op.outputs[0].dtype.names == ()
    assert "require_result_dtype" not in "\n".join(emit_cpp.emit_check_fn(op)[0])


def test_dtype_or_in_an_unknown_dtype_is_refused():
    with pytest.raises(ManifestError, match=r"unknown dtype 'float17' in 'dtype_or\(dtype, q\) in float16 \| float17'"):
        build_ops([parse_text(textwrap.dedent(FP8_OUT.replace("| bfloat16\"", "| float17\"")), "manifests/t.yaml")])
