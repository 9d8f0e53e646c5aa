"""The manifests' workloads resolved into complete operator calls (the offline warm-up's table):
shapes a workload leaves out follow from the signature, and what cannot is an error naming it."""
import glob
import os
import textwrap

import pytest

from codegen import emit_workloads
from codegen.__main__ import load_ops
from codegen.model import build_ops
from codegen.parse import ManifestError, parse_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def calls():
    ops = load_ops(glob.glob(os.path.join(ROOT, "manifests", "*.yaml")), ROOT)
    return emit_workloads.workload_calls(ops)


def find(calls, operator, workload, dtype="bfloat16"):
    (c,) = [c for c in calls if c["operator"] == operator and c["workload"] == workload and c["dtype"] == dtype]
    return c["args"]


def test_every_implemented_op_with_workloads_has_calls(calls):
    ops = load_ops(glob.glob(os.path.join(ROOT, "manifests", "*.yaml")), ROOT)
    expected = {op.cls for op in ops if op.status == "implemented" and op.workloads}
    assert "QKNormRopeFwdOp" in expected  # a composite: its call plans the sub-ops it makes
    assert {c["op_class"] for c in calls} == expected


def test_optional_inputs_and_list_params_follow_from_the_workload(calls):
    x, weight, ns, eps = find(calls, "norm_rms_norm_fwd", "llama-70b-prefill")
    assert x == {"shape": [2048, 8192], "dtype": "bfloat16"}
    assert weight == {"shape": [8192], "dtype": "bfloat16"}  # [*normalized_shape]
    assert ns == {"value": [8192]} and eps == {"value": None}  # the manifest's default
    # fp16 workload: every input of x's dtype follows it.
    assert find(calls, "norm_rms_norm_fwd", "llama-8b-prefill", "float16")[1]["dtype"] == "float16"


def test_required_inputs_follow_from_bound_dims(calls):
    positions, q, k, cache = find(calls, "position_rope_neox_cached_fwd_writes_k_writes_q", "llama-8b-prefill")
    assert positions == {"shape": [8192], "dtype": "int64"}  # [t], t from q; its only dtype
    assert k["shape"] == [8192, 8, 128] and cache["shape"] == [8192, 128]


def test_branches_without_out_each_get_a_call(calls):
    ops = {c["operator"] for c in calls if c["op_class"] == "FusedAddRMSNormFwdOp"}
    assert ops == {"norm_fused_add_rms_norm_fwd", "norm_fused_add_rms_norm_fwd_writes_residual"}
    assert not any(c["operator"].endswith("_out") for c in calls)


def test_factory_ops_get_the_device_and_param_defaults(calls):
    args = find(calls, "position_sinusoidal_fwd", "bert-512", None)
    assert args == [{"value": 512}, {"value": 768}, {"device": True}, {"value": 10000.0}, {"dtype": "float32"}]


ENTRY = """
AOp:
  family: fam
  ref_api: torch.a
  status: implemented
  signature:
    inputs:
      x: {dtype: float16, shape: "[..., *normalized_shape]"}
      table: {dtype: float16, shape: "[rows, cols]"}
    outputs:
      y: {dtype: same_as(x), shape: same_as(x)}
    params:
      normalized_shape: {type: "int[]"}
  workloads:
    - {name: w, x: [8, 64], table: [4, 64], dtypes: [float16], params: {normalized_shape: [64]}}
"""


def resolve_error(text):
    (op,) = build_ops([parse_text(textwrap.dedent(text), "manifests/t.yaml")])
    with pytest.raises(ManifestError) as e:
        emit_workloads.resolve(op, op.workloads[0])
    return str(e.value)


def test_good_workload_resolves():
    (op,) = build_ops([parse_text(textwrap.dedent(ENTRY), "manifests/t.yaml")])
    (call,) = emit_workloads.resolve(op, op.workloads[0])
    assert call["args"][2] == {"value": [64]}


@pytest.mark.parametrize("old,new,message", [
    (", params: {normalized_shape: [64]}", "",
     "workload 'w': input 'x' [..., *normalized_shape] does not fix normalized_shape; give it in params"),
    (" table: [4, 64],", "", "workload 'w': cannot tell the shape of input 'table' ([rows, cols]); give it"),
    ("normalized_shape: [64]}", "normalized_shape: [32]}", "workload 'w': input 'x' ends in [64], but "
                                                           "normalized_shape is [32]"),
    ("normalized_shape: [64]}", "normalized_shape: [64], eps: 1}", "workload 'w': unknown param 'eps' "
                                                                   "(params: normalized_shape)"),
])
def test_incomplete_workloads_are_refused_clearly(old, new, message):
    assert old in ENTRY
    assert "manifests/t.yaml:3: AOp: " + message in resolve_error(ENTRY.replace(old, new, 1))


def test_an_optional_input_given_as_null_is_left_out():
    text = ENTRY.replace('      table: {dtype: float16, shape: "[rows, cols]"}',
                         '      table: {dtype: float16, shape: "[rows, cols]"}\n'
                         '      w: {dtype: same_as(x), shape: "[*normalized_shape]", optional: true}')
    (op,) = build_ops([parse_text(textwrap.dedent(text), "manifests/t.yaml")])
    (call,) = emit_workloads.resolve(op, op.workloads[0])
    assert call["args"][2] == {"shape": [64], "dtype": "float16"}  # evaluable: given
    (op,) = build_ops([parse_text(textwrap.dedent(text.replace("dtypes: [float16]", "w: null, dtypes: [float16]")),
                                  "manifests/t.yaml")])
    (call,) = emit_workloads.resolve(op, op.workloads[0])
    assert call["args"][2] == {"value": None}
    assert "workload 'w': input 'table' is not optional; give its shape, not null" in \
        resolve_error(ENTRY.replace("table: [4, 64]", "table: null"))
