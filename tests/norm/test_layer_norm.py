"""LayerNormFwdOp on CPU (reference target): matches F.layer_norm, optional weight/bias, checks."""
import pytest
import torch

from tileops.norm import LayerNormFwdOp

OP = torch.ops.tileops.norm_layer_norm_fwd
F = torch.nn.functional


@pytest.mark.parametrize("weight,bias", [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matches_layer_norm(weight, bias, dtype):
    x = torch.randn(3, 5, 48, dtype=dtype)
    w = torch.randn(48, dtype=dtype) if weight else None
    b = torch.randn(48, dtype=dtype) if bias else None
    torch.testing.assert_close(OP(x, w, b, [48]), F.layer_norm(x, [48], w, b))


def test_eps_default_and_multi_dim_shape():
    x = torch.randn(2, 4, 6)
    assert OP.default._schema.arguments[4].default_value == pytest.approx(1e-5)
    torch.testing.assert_close(LayerNormFwdOp((4, 6), eps=1e-3)(x), F.layer_norm(x, (4, 6), eps=1e-3))


def test_bias_shape_rule():
    with pytest.raises(RuntimeError, match=r"tileops::norm_layer_norm_fwd: 'bias' must have shape \[\*normalized_shape\]"):
        OP(torch.randn(2, 8), None, torch.randn(9), [8])


def test_opcheck():
    x = torch.randn(4, 16)
    torch.library.opcheck(OP.default, (x, torch.randn(16), torch.randn(16), [16], 1e-5))
