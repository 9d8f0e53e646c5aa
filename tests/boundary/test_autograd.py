"""No silent graph drop: grad-requiring inputs under grad mode are a clear error."""
import pytest
import torch

OP = torch.ops.tileops.norm_rms_norm_fwd


def test_requires_grad_under_grad_mode_is_an_error():
    w = torch.randn(8, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"tileops::norm_rms_norm_fwd: an input requires grad, but this op has "
                                           r"no autograd formula"):
        OP(torch.randn(2, 8), w, [8])


def test_no_grad_and_inference_mode_work():
    w = torch.randn(8, requires_grad=True)
    x = torch.randn(2, 8)
    with torch.no_grad():
        y = OP(x, w, [8])
    assert not y.requires_grad
    with torch.inference_mode():
        torch.testing.assert_close(OP(x, w, [8]), torch.nn.functional.rms_norm(x, [8], w))
