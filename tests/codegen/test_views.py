"""Typed call views (tileops_generated/ops.h): one getter per manifest argument with the C++ type of
its manifest type, and in-tree targets read calls only through them, never by position."""
import os
import re
import textwrap

from codegen import emit_cpp
from codegen.model import build_ops
from codegen.parse import parse_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FAMILY = textwrap.dedent("""
    AFwdOp:
      family: fam
      ref_api: torch.a
      status: implemented
      signature:
        inputs:
          x: {dtype: float32, shape: "[n]"}
          w: {dtype: same_as(x), shape: "[n]", optional: true}
        outputs:
          y: {dtype: same_as(x), shape: same_as(x)}
        params:
          eps: {type: "float?", default: null}
          dims: {type: "int[]", default: [0]}
          mode: {type: str, default: none, choices: [none, tanh]}
          flag: {type: bool, default: false}
          count: {type: int, default: 1}
    BFwdOp:
      family: fam
      ref_api: torch.b
      status: implemented
      signature:
        inputs:
          x: {dtype: float32, shape: "[n]"}
          w: {dtype: same_as(x), shape: "[n]"}
        outputs:
          y: {dtype: same_as(x), shape: same_as(x)}
        params:
          eps: {type: float, default: 0.5}
""")


def header():
    return emit_cpp.emit_ops_header(build_ops([parse_text(FAMILY, "fam.yaml")]))


def block(text, start, end="\n}\n"):
    i = text.index(start)
    return text[i:text.index(end, i)]


def test_each_argument_has_a_getter_of_its_manifest_type():
    a = block(header(), "namespace fam_a_fwd {")
    assert "const at::Tensor& x() const { return call_.inputs[In::x]; }" in a
    assert "const at::Tensor* w() const" in a and "t.defined() ? &t : nullptr" in a  # optional input
    assert "const at::Tensor& y() const { return call_.outputs[Out::y]; }" in a
    assert "std::optional<double> eps() const" in a
    assert "c10::IntArrayRef dims() const { return call_.params[Param::dims].as_ints(); }" in a
    assert "std::string_view mode() const { return call_.params[Param::mode].as_str(); }" in a
    assert "bool flag() const { return call_.params[Param::flag].as_bool(); }" in a
    assert "int64_t count() const { return call_.params[Param::count].as_int(); }" in a
    b = block(header(), "namespace fam_b_fwd {")
    assert "const at::Tensor& w() const" in b and "double eps() const { return call_.params[Param::eps].as_real(); }" in b


def test_family_view_keeps_only_arguments_alike_in_every_op():
    fam = block(header(), "namespace fam {")
    assert "const at::Tensor& x() const { return call_.inputs[0]; }" in fam
    assert "const at::Tensor& y() const { return call_.outputs[0]; }" in fam
    assert " w() " not in fam  # optional in one op, required in the other
    assert " eps() " not in fam  # float? in one op, float in the other


SOURCES = [os.path.join(ROOT, "src", d) for d in ("targets/nvrtc", "targets/reference", "composite")]
POSITIONAL = re.compile(r"\b(inputs|outputs|params)\s*\[|\bSlots\b")


# The elementwise engine (both targets) and nvrtc's dim-reduction engine serve every op of their
# manifest section through one argument layout read in manifest order.
ENGINES = {"targets/nvrtc/elementwise/elementwise.cpp", "targets/reference/elementwise.cpp",
           "targets/nvrtc/reduction/reduce.cpp"}


def test_targets_read_calls_through_views_only():
    hits = []
    for top in SOURCES:
        for dirpath, _, files in os.walk(top):
            for name in files:
                if not name.endswith((".cpp", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                if os.path.relpath(path, os.path.join(ROOT, "src")) in ENGINES:
                    continue
                with open(path, encoding="utf-8") as f:
                    for n, line in enumerate(f, 1):
                        if POSITIONAL.search(line):
                            hits.append(f"{os.path.relpath(path, ROOT)}:{n}: {line.strip()}")
    assert not hits, "read OpCall through tileops::ops::<op>::View, not by position:\n" + "\n".join(hits)
