"""The manifest's autograd pairing (`autograd: {backward: ...}`): the naming convention is resolved by
the model, every broken pairing is refused naming the entry and the rule, and the generated glue."""
import os
import subprocess
import sys
import textwrap

import pytest

from codegen import emit_cpp
from codegen.__main__ import load_ops
from codegen.model import build_ops
from codegen.parse import ManifestError, parse_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PAIR = textwrap.dedent("""
    NrmFwdOp:
      family: fam
      ref_api: torch.nrm
      status: implemented
      autograd: {backward: NrmBwdOp}
      signature:
        inputs:
          x: {dtype: float16 | float32, shape: "[..., *ns]"}
          weight: {dtype: same_as(x), shape: "[*ns]", optional: true}
          bias: {dtype: same_as(x), shape: "[*ns]", optional: true}
        outputs:
          y: {dtype: same_as(x), shape: same_as(x)}
        params:
          ns: {type: "int[]"}
          eps: {type: "float?", default: null}
          flag: {type: bool, default: false}

    NrmBwdOp:
      family: fam
      ref_api: torch.nrm_backward
      status: implemented
      signature:
        inputs:
          dy: {dtype: float16 | float32, shape: "[..., *ns]"}
          x: {dtype: same_as(dy), shape: same_as(dy)}
          weight: {dtype: same_as(dy), shape: "[*ns]", optional: true}
        outputs:
          dx: {dtype: same_as(dy), shape: same_as(dy)}
          dweight: {dtype: same_as(dy), shape: "[*ns]", optional: true}
          dbias: {dtype: same_as(dy), shape: "[*ns]", optional: true}
        params:
          ns: {type: "int[]"}
          eps: {type: "float?", default: null}
    """)


def ops_of(text):
    return {op.cls: op for op in build_ops([parse_text(text, "manifests/t.yaml")])}


def error_of(text):
    with pytest.raises(ManifestError) as e:
        build_ops([parse_text(text, "manifests/t.yaml")])
    return str(e.value)


def test_good_pairing_resolves_the_naming_convention():
    fwd = ops_of(PAIR)["NrmFwdOp"]
    p = fwd.pairing
    assert p.backward.cls == "NrmBwdOp"
    assert p.sources == (("grad", "y"), ("input", "x"), ("input", "weight"))
    assert p.grads == ("x", "weight", "bias")
    assert ops_of(PAIR)["NrmBwdOp"].pairing is None


# The gradient of y taken by a backward input not named dy: `grad_names`.
RENAMED = PAIR.replace("autograd: {backward: NrmBwdOp}", "autograd: {backward: NrmBwdOp, grad_names: {y: gy}}") \
    .replace("      dy: {dtype: float16 | float32", "      gy: {dtype: float16 | float32").replace("same_as(dy)", "same_as(gy)")


def test_grad_names_gives_an_output_gradient_another_name():
    p = ops_of(RENAMED)["NrmFwdOp"].pairing
    assert p.sources == (("grad", "y"), ("input", "x"), ("input", "weight"))
    assert "gy" in "".join(emit_cpp.emit_pairing(ops_of(RENAMED)["NrmFwdOp"]))


@pytest.mark.parametrize("old,new,message", [
    ("grad_names: {y: gy}", "grad_names: {z: gy}",
     "autograd.grad_names maps differentiable forward outputs (y) to the backward inputs that take their gradients"),
    ("grad_names: {y: gy}", "grad_names: {y: gz}",
     "grad_names gives the gradient of 'y' to backward input 'gz', which NrmBwdOp does not have"),
    ("grad_names: {y: gy}", "grad_names: {y: x}", "grad_names gives the gradient of 'y' to 'x', a forward tensor's name"),
    ("grad_names: {y: gy}", "grad_names: []", "autograd.grad_names maps differentiable forward outputs"),
    ("grad_names: {y: gy}", "no_grad: [y], grad_names: {y: gy}", "autograd.grad_names maps differentiable forward outputs ()"),
])
def test_each_grad_names_rule_fires(old, new, message):
    assert message in error_of(RENAMED.replace(old, new, 1))


def test_two_outputs_cannot_share_a_gradient_name():
    # z's gradient is dz by the convention; naming y's dz too would feed one input both
    text = RENAMED.replace("      y: {dtype: same_as(x), shape: same_as(x)}\n",
                           "      y: {dtype: same_as(x), shape: same_as(x)}\n      z: {dtype: same_as(x), shape: same_as(x)}\n", 1)
    text = text.replace("      x: {dtype: same_as(gy), shape: same_as(gy)}\n",
                        "      x: {dtype: same_as(gy), shape: same_as(gy)}\n      dz: {dtype: same_as(gy), shape: same_as(gy)}\n", 1)
    assert "two forward outputs' gradients would both be named 'dz'" in error_of(text.replace("{y: gy}", "{y: dz}"))


def edit(old, new, text=PAIR):
    assert old in text, old
    return text.replace(old, new, 1)


def edit_last(old, new):
    head, sep, tail = PAIR.rpartition(old)
    assert sep, old
    return head + new + tail


@pytest.mark.parametrize("text,message", [
    # unknown backward op
    (edit("backward: NrmBwdOp", "backward: GhostBwdOp"),
     "manifests/t.yaml:6: NrmFwdOp: autograd pairing: backward names unknown op class 'GhostBwdOp'"),
    (edit("backward: NrmBwdOp", "backward: NrmFwdOp"), "NrmFwdOp: autograd pairing: an op cannot be its own backward"),
    (edit("autograd: {backward: NrmBwdOp}", "autograd: {bwd: NrmBwdOp}"), "NrmFwdOp: unknown key 'bwd' in autograd"),
    # a backward input with no source
    (edit("      weight: {dtype: same_as(dy), shape: \"[*ns]\", optional: true}\n",
          "      weight: {dtype: same_as(dy), shape: \"[*ns]\", optional: true}\n      mean: {dtype: float32, shape: "
          "\"[...]\"}\n"),
     "NrmFwdOp: autograd pairing: backward input 'mean' has no source: it is neither d<output> of a forward output (y) "
     "nor a forward input or output of that name"),
    # a forward optional input the backward requires
    (edit("      weight: {dtype: same_as(dy), shape: \"[*ns]\", optional: true}\n",
          "      weight: {dtype: same_as(dy), shape: \"[*ns]\"}\n"),
     "backward input 'weight' must be optional: forward input 'weight' is"),
    # backward outputs must be d<input>
    (edit("dbias: {", "dscale: {"), "backward output 'dscale' is not d<input> of a forward input (x, weight, bias)"),
    # no gradient silently dropped
    (edit("      dbias: {dtype: same_as(dy), shape: \"[*ns]\", optional: true}\n", ""),
     "forward input 'bias' gets no gradient: backward NrmBwdOp has no output 'dbias'"),
    (edit("      dy: {dtype: float16 | float32, shape: \"[..., *ns]\"}\n      x: {dtype: same_as(dy), shape: same_as(dy)}",
          "      x: {dtype: float16 | float32, shape: \"[..., *ns]\"}").replace("same_as(dy)", "same_as(x)"),
     "forward output 'y' gets no gradient: backward NrmBwdOp has no input 'dy'"),
    # params
    (PAIR + "      extra: {type: int, default: 0}\n", "backward param 'extra' has no forward param of that name"),
    (edit_last('eps: {type: "float?", default: null}', "eps: {type: float, default: 0.1}"),
     "backward param 'eps' is float but the forward's is float?"),
    # dtype mismatches
    (edit("dy: {dtype: float16 | float32", "dy: {dtype: float32"),
     "dtype mismatch: backward input 'dy' vs forward 'y': float32 vs float16 | float32"),
    (edit("dx: {dtype: same_as(dy)", "dx: {dtype: float32"),
     "dtype mismatch: backward output 'dx' vs forward 'x': float32 vs float16 | float32"),
    (edit("weight: {dtype: same_as(x), shape", "weight: {dtype: float16 | float32, shape"),
     "dtype mismatch: backward input 'weight' vs forward 'weight': the backward ties 'weight' to 'dy' but the "
     "forward does not tie 'weight' to 'y'"),
    # shape mismatches
    (edit("dweight: {dtype: same_as(dy), shape: \"[*ns]\"", "dweight: {dtype: same_as(dy), shape: \"[..., *ns]\""),
     "shape mismatch: backward output 'dweight' vs forward 'weight': [..., *ns] vs [*ns]"),
    (edit("x: {dtype: same_as(dy), shape: same_as(dy)}", "x: {dtype: same_as(dy), shape: \"[..., 2, *ns]\"}"),
     "shape mismatch: backward input 'x' vs forward 'x': [..., 2, *ns] vs [..., *ns]"),
    # a forward that writes its input
    (edit("bias: {dtype: same_as(x), shape: \"[*ns]\", optional: true}",
          "bias: {dtype: same_as(x), shape: \"[*ns]\", optional: true, mutated: optional}"),
     "NrmFwdOp: autograd pairing: NrmFwdOp writes its input 'bias' (mutated); a paired forward and backward must be "
     "functional"),
    # an implemented forward needs an implemented backward
    (edit("ref_api: torch.nrm_backward\n  status: implemented", "ref_api: torch.nrm_backward\n  status: spec-only"),
     "backward NrmBwdOp is spec-only; an implemented forward pairs with an implemented backward"),
])
def test_each_pairing_rule_fires(text, message):
    assert message in error_of(text)


# A forward that also returns a statistic the backward reads (as layer norm's rstd): `no_grad` marks it.
STAT = edit("      y: {dtype: same_as(x), shape: same_as(x)}\n",
            "      y: {dtype: same_as(x), shape: same_as(x)}\n      rstd: {dtype: float32, shape: \"[...]\"}\n",
            edit("      weight: {dtype: same_as(dy), shape: \"[*ns]\", optional: true}\n",
                 "      weight: {dtype: same_as(dy), shape: \"[*ns]\", optional: true}\n"
                 "      rstd: {dtype: float32, shape: \"[...]\"}\n",
                 edit("autograd: {backward: NrmBwdOp}", "autograd: {backward: NrmBwdOp, no_grad: [rstd]}")))


def test_a_no_grad_output_is_saved_not_differentiated():
    fwd = ops_of(STAT)["NrmFwdOp"]
    assert fwd.autograd_no_grad == ("rstd",)
    assert fwd.pairing.sources == (("grad", "y"), ("input", "x"), ("input", "weight"), ("output", "rstd"))
    # without no_grad the float32 statistic would be a gradient dropped
    assert "forward output 'rstd' gets no gradient" in error_of(STAT.replace(", no_grad: [rstd]", ""))
    text = emit_cpp.emit_pairing(fwd)
    assert any("ag_ctx->mark_non_differentiable({o_rstd});" in line for line in text)
    assert any("ag_ctx->save_for_backward({x, weight.value_or(at::Tensor()), o_rstd});" in line for line in text)


@pytest.mark.parametrize("old,new,message", [
    ("no_grad: [rstd]", "no_grad: [mean]", "autograd.no_grad lists forward outputs (y, rstd) that are saved"),
    ("no_grad: [rstd]", "no_grad: rstd", "autograd.no_grad lists forward outputs"),
    ("      rstd: {dtype: float32, shape: \"[...]\"}\n    outputs:\n      dx",
     "      rstd: {dtype: float32, shape: \"[...]\"}\n      drstd: {dtype: float32, shape: \"[...]\"}\n"
     "    outputs:\n      dx",
     "backward input 'drstd' is the gradient of 'rstd', which no_grad marks not differentiable"),
])
def test_no_grad_rules_fire(old, new, message):
    assert message in error_of(edit(old, new, STAT))


def test_generated_autograd_kernel_and_function():
    # elementwise.yaml too: the norm family's composites are made of its ops
    text = emit_cpp.emit_registration(load_ops([os.path.join(ROOT, "manifests", f) for f in ("norm.yaml",
                                                                                               "elementwise.yaml")], ROOT))
    fn = text[text.index("struct norm_rms_norm_fwd__Pair"):text.index("static at::Tensor norm_rms_norm_fwd__boundary")]
    # forward: below autograd to the forward op; saves what the backward reads; params by name
    assert "at::AutoDispatchBelowADInplaceOrView guard;" in fn
    assert "ag_ctx->save_for_backward({x, weight.value_or(at::Tensor())});" in fn
    assert 'ag_ctx->saved_data["eps"]' in fn and 'ag_ctx->saved_data["normalized_shape"]' in fn
    # backward: the dispatcher's backward op, the dx-only branch when dweight is not needed
    assert '"tileops::norm_rms_norm_bwd", ""' in fn and '"tileops::norm_rms_norm_bwd_without_dweight", ""' in fn
    assert "const bool need_dweight = ag_needs(1);" in fn
    guard = text[text.index("static at::Tensor norm_rms_norm_fwd__autograd"):]
    guard = guard[:guard.index("\n}\n")]
    assert "if (tileops::autograd_pairing() && tileops::runtime::wants_grad(" in guard
    assert "return norm_rms_norm_fwd__Pair::apply(x, weight, normalized_shape, eps, target);" in guard
    # unpaired ops keep only the guard
    assert "norm_fused_add_rms_norm_fwd__Pair" not in text


def test_validator_reports_a_broken_pairing(tmp_path):
    text = open(os.path.join(ROOT, "manifests", "norm.yaml")).read()
    assert "autograd: {backward: RMSNormBwdOp}" in text
    bad = tmp_path / "norm.yaml"
    bad.write_text(text.replace("autograd: {backward: RMSNormBwdOp}", "autograd: {backward: LayerNormBwdOp}"))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "validate_manifest.py"), "--manifests",
                          str(bad), os.path.join(ROOT, "manifests", "elementwise.yaml"),  # the composites' ops
                          "--library", ""], capture_output=True, text=True, timeout=300)
    assert out.returncode == 1
    assert ("norm.yaml:10: RMSNormFwdOp: autograd pairing: backward output 'dbias' is not d<input> of a forward "
            "input (x, weight)" in out.stderr), out.stderr


# A float32 weight beside a 16-bit x (dtype_combos): the backward takes it and gives its gradient in
# the weight's dtype (dtype_or(weight, dy)).
MIXED = textwrap.dedent("""
    NrmFwdOp:
      family: fam
      ref_api: torch.nrm
      status: implemented
      autograd: {backward: NrmBwdOp}
      signature:
        inputs:
          x: {dtype: float16 | float32, shape: "[..., *ns]"}
          weight: {dtype: float16 | float32, shape: "[*ns]", optional: true}
          bias: {dtype: float16 | float32, shape: "[*ns]", optional: true}
        outputs:
          y: {dtype: same_as(x), shape: same_as(x)}
        params:
          ns: {type: "int[]"}
        dtype_combos:
          - {x: float16, weight: float16, bias: float16}
          - {x: float16, weight: float32, bias: float32}
          - {x: float32, weight: float32, bias: float32}

    NrmBwdOp:
      family: fam
      ref_api: torch.nrm_backward
      status: implemented
      signature:
        inputs:
          dy: {dtype: float16 | float32, shape: "[..., *ns]"}
          x: {dtype: same_as(dy), shape: same_as(dy)}
          weight: {dtype: float16 | float32, shape: "[*ns]", optional: true}
        outputs:
          dx: {dtype: same_as(dy), shape: same_as(dy)}
          dweight: {dtype: "dtype_or(weight, dy)", shape: "[*ns]", optional: true}
          dbias: {dtype: "dtype_or(weight, dy)", shape: "[*ns]", optional: true}
        params:
          ns: {type: "int[]"}
        dtype_combos:
          - {dy: float16, weight: float16}
          - {dy: float16, weight: float32}
          - {dy: float32, weight: float32}
    """)


def test_a_float32_weight_pairs_through_dtype_combos():
    assert ops_of(MIXED)["NrmFwdOp"].pairing.grads == ("x", "weight", "bias")


@pytest.mark.parametrize("edit_pair,message", [
    # the backward refuses a combination the forward accepts
    (("      - {dy: float16, weight: float32}\n", ""),
     "the forward accepts x=float16, weight=float32, bias=float32, which gives backward NrmBwdOp (dy=float16, "
     "x=float16, weight=float32), outside its dtype_combos"),
    # dbias follows the weight: the forward must tie bias to weight (its combos do)
    (("      - {x: float16, weight: float32, bias: float32}\n", "      - {x: float16, weight: float32, bias: float16}\n"),
     "the backward ties 'dbias' to 'weight' but the forward does not tie 'bias' to 'weight'"),
])
def test_float32_weight_pairing_rules_fire(edit_pair, message):
    old, new = edit_pair
    assert old in MIXED
    assert message in error_of(MIXED.replace(old, new, 1))
