"""Generated typed callers (tileops_generated/callers.h): tileops::call::<operator>(...) per registered
operator, its C++ types those of the schema, and the hand-written composites call sub-ops only through
them (no dispatcher signature typed by hand)."""
import os
import re
import textwrap

from codegen import emit_cpp
from codegen.model import build_ops
from codegen.parse import parse_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ENTRIES = textwrap.dedent("""
    NrmFwdOp:
      family: fam
      ref_api: torch.nrm
      status: implemented
      signature:
        inputs:
          x: {dtype: float32, shape: "[..., n]"}
          w: {dtype: same_as(x), shape: "[n]", optional: true}
        outputs:
          y: {dtype: same_as(x), shape: same_as(x)}
        params:
          ns: {type: "int[]"}
          eps: {type: "float?", default: null}
    GhostFwdOp:
      family: fam
      ref_api: torch.ghost
      status: spec-only
      signature:
        inputs:
          x: {dtype: float32, shape: "[n]"}
        outputs:
          y: {dtype: same_as(x), shape: same_as(x)}
    """)


def test_each_registered_operator_gets_a_typed_caller_with_an_optional_target():
    ops = build_ops([parse_text(ENTRIES, "manifests/fam.yaml")])
    text = emit_cpp.emit_callers_header(ops)
    assert ("inline at::Tensor fam_nrm_fwd(const at::Tensor& x, const std::optional<at::Tensor>& w, "
            "c10::SymIntArrayRef ns, std::optional<double> eps, std::optional<c10::string_view> target = std::nullopt)"
            in text)
    nrm = next(o for o in ops if o.cls == "NrmFwdOp")
    typed = emit_cpp.fn_type(nrm, nrm.branches[0])
    assert f'findSchemaOrThrow("tileops::fam_nrm_fwd", "").typed<{typed}>()' in text
    assert "return handle.call(x, w, ns, eps, target);" in text
    assert "ghost" not in text  # a spec-only entry registers no operator


def test_composites_call_sub_ops_through_the_generated_callers_only():
    hits = []
    folder = os.path.join(ROOT, "src", "composite")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if re.search(r"findSchemaOrThrow|\.typed<", line):
                    hits.append(f"src/composite/{name}:{n}: {line.strip()}")
    assert not hits, "call sub-ops as tileops::call::<operator>(...):\n" + "\n".join(hits)
