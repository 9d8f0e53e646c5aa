"""Generated schema, op table and compile_op_names for RMSNormFwdOp; opcheck on CPU."""
import pytest
import torch

import tileops
from tileops.norm import RMSNormFwdOp

SCHEMA = ("tileops::norm_rms_norm_fwd(Tensor x, Tensor? weight, SymInt[] normalized_shape, float? eps=None, *, "
          "str? target=None) -> Tensor")


def test_schema_is_generated_from_the_manifest():
    assert str(torch.ops.tileops.norm_rms_norm_fwd.default._schema) == SCHEMA


def test_compile_op_names_from_python_and_the_op_table():
    assert RMSNormFwdOp.compile_op_names == ("tileops::norm_rms_norm_fwd", "tileops::norm_rms_norm_fwd_out")
    entry = next(e for e in tileops.op_table() if e["class"] == "RMSNormFwdOp")
    assert entry["compile_op_names"] == ["tileops::norm_rms_norm_fwd", "tileops::norm_rms_norm_fwd_out"]
    assert entry["has_boundary"] is True
    assert entry["ref_api"] == "torch.nn.functional.rms_norm"


def test_pt2_compliant_tag():
    assert torch.Tag.pt2_compliant_tag in torch.ops.tileops.norm_rms_norm_fwd.default.tags


def test_dispatch_keys_registered():
    name = "tileops::norm_rms_norm_fwd"
    for key in ("Meta", "CUDA", "CompositeExplicitAutograd", "Autograd"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(name, key), key


@pytest.mark.parametrize("shape,ns,weight,eps", [
    ((4, 16), [16], True, None),
    ((4, 16), [16], False, 1e-5),
    ((2, 3, 4, 8), [4, 8], True, 1e-6),
    ((0, 16), [16], True, None),
])
def test_opcheck_cpu(shape, ns, weight, eps):
    x = torch.randn(*shape)
    w = torch.randn(*ns) if weight else None
    torch.library.opcheck(torch.ops.tileops.norm_rms_norm_fwd.default, (x, w, ns, eps))


def test_op_class_binds_params_and_checks_target():
    op = RMSNormFwdOp(16, eps=1e-5)
    assert op.normalized_shape == [16] and op.eps == 1e-5
    x = torch.randn(2, 16)
    torch.testing.assert_close(op(x), torch.nn.functional.rms_norm(x, [16], eps=1e-5))
    with pytest.raises(ValueError, match="unknown target 'nope'"):
        RMSNormFwdOp(16, target="nope")
    with pytest.raises(TypeError, match="missing param 'normalized_shape'"):
        RMSNormFwdOp()


def test_optional_inputs_followed_only_by_defaults_default_to_none():
    clamp = str(torch.ops.tileops.elementwise_clamp_fwd.default._schema)
    assert "Tensor? min=None, Tensor? max=None, *" in clamp
    # a required argument after it keeps the optional input required, as in torch's own schemas
    assert "Tensor? weight, SymInt[] normalized_shape" in SCHEMA
    x = torch.randn(5, 7)
    hi = torch.full((7,), 0.25)
    torch.testing.assert_close(torch.ops.tileops.elementwise_clamp_fwd(x, max=hi), torch.clamp(x, max=hi))
    xh, w = x.view(1, 5, 7).to(torch.bfloat16), torch.randn(4, 5, 3, dtype=torch.bfloat16)
    torch.testing.assert_close(torch.ops.tileops.convolution_conv1d_fwd(xh, w), torch.nn.functional.conv1d(xh, w))
