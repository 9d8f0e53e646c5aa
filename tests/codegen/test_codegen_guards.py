"""The generated boundary refuses bad calls before any work: overlap of written tensors, out= that
requires grad and sizes over the limit are checked before the first contiguous copy, allocation or
launch; every body re-raises errors with the operator's name."""
import os

import pytest

from codegen import emit_cpp
from codegen.__main__ import load_ops

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def golden():
    return {op.cls: op for op in load_ops([os.path.join(HERE, "golden", "branches.yaml")], HERE)}


def boundary(op, name):
    _, env = emit_cpp.emit_check_fn(op)
    branch = next(b for b in op.branches if op.operator_name(b) == name)
    text = "\n".join(emit_cpp.emit_branch(op, env, branch))
    return text[: text.index("__meta(")], text


def first_work(text):
    return min(i for i in (text.find(".contiguous()"), text.find("runtime::empty("), text.find("invoke(")) if i >= 0)


def test_written_inputs_are_checked_for_overlap_before_any_copy(golden):
    body, _ = boundary(golden["RopeNeoxCachedFwdOp"], "position_rope_neox_cached_fwd_writes_k_writes_q")
    for check in ('require_no_internal_overlap(kOp, "q", q)', 'require_no_internal_overlap(kOp, "k", k)',
                  'require_no_overlap(kOp, "q", q, "k", k)', 'require_no_overlap(kOp, "q", q, "positions", positions)',
                  'require_copy_fits(kOp, "q", q)'):
        assert check in body
        assert body.index(check) < first_work(body), check
    assert body.count('require_no_overlap(kOp, "q", q, "k", k)') == 1  # each pair once
    assert "require_no_overlap(kOp, \"positions\"" not in body          # two read inputs may share memory


def test_an_optional_written_input_is_touched_only_when_present(golden):
    # RoPE's key=None: every use of k in the boundary (overlap checks, the contiguous copy, the write-back)
    # and the autograd guard's version bump sit behind its presence test.
    name = "position_rope_optional_key_fwd_writes_k_writes_q"
    body, text = boundary(golden["RopeOptionalKeyFwdOp"], name)
    present = "tileops::check::present(k)"
    assert emit_cpp.schema(golden["RopeOptionalKeyFwdOp"], golden["RopeOptionalKeyFwdOp"].branches[0]).startswith(
        f"{name}(Tensor positions, Tensor(a!) q, Tensor(b!)? k, Tensor cos_sin_cache")
    for check in (f'if ({present}) tileops::check::require_no_internal_overlap(kOp, "k", (*k));',
                  f'if ({present}) tileops::check::require_no_overlap(kOp, "q", q, "k", (*k));',
                  f"at::Tensor w_k = !{present} ? at::Tensor() : (*k).is_contiguous()",
                  f"if ({present} && !w_k.is_same((*k))) (*k).copy_(w_k);",
                  f"if ({present}) tileops::runtime::bump_version((*k));"):
        assert check in text, check
    unguarded = [line for line in text.splitlines() if "(*k)" in line and present not in line and "const auto s" not in line]
    assert unguarded == [], unguarded


def test_out_is_checked_before_any_allocation_and_its_grad_refused(golden):
    body, text = boundary(golden["SiluAndMulFwdOp"], "activation_silu_and_mul_fwd_out")
    for check in ("require_out_like(kOp, out", 'require_no_internal_overlap(kOp, "out", out)',
                  'require_no_overlap(kOp, "out", out, "x", x)'):
        assert body.index(check) < first_work(body), check
    assert body.count("require_out_like") == 1
    assert 'refuse_out_grad("tileops::activation_silu_and_mul_fwd_out", {&x, &out})' in text


def test_outputs_are_size_checked_before_allocation(golden):
    body, _ = boundary(golden["SiluAndMulFwdOp"], "activation_silu_and_mul_fwd")
    assert body.index("require_alloc_fits(kOp, \"output 'y'\"") < body.index("tileops::runtime::empty(")


def test_every_body_names_the_op_on_any_error(golden):
    body, text = boundary(golden["SiluAndMulFwdOp"], "activation_silu_and_mul_fwd")
    assert body.count("tileops::check::rethrow_naming(kOp);") == 1
    assert body.index("try {") < first_work(body)
