"""Meta/fake calls answer from the generated Meta kernel: manifest shapes, contiguous strides, no kernel."""
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

OP = torch.ops.tileops.norm_rms_norm_fwd


def test_meta_call_gives_contiguous_output_for_non_contiguous_x(counters):
    x = torch.empty_strided((6, 4, 8), (8, 48, 1), device="meta", dtype=torch.bfloat16)  # dims 0,1 swapped
    assert not x.is_contiguous()
    y = OP(x, None, [8])
    assert y.device.type == "meta" and y.dtype == torch.bfloat16 and y.shape == (6, 4, 8)
    assert y.stride() == (32, 8, 1)  # contiguous, not x's strides (no empty_like)
    assert counters()["kernel_builds"] == 0


def test_fake_tensor_call_builds_nothing(counters):
    with FakeTensorMode() as mode:
        x = mode.from_tensor(torch.randn(5, 16).t().contiguous().t())  # non-contiguous fake
        y = OP(x, None, [16])
        assert y.shape == (5, 16) and y.stride() == (16, 1)
    c = counters()
    assert c["kernel_builds"] == 0 and c["kernel_hits"] == 0


def test_real_output_strides_match_meta_for_non_contiguous_x():
    x = torch.randn(8, 6).t()  # (6, 8), strides (1, 6)
    y = OP(x, None, [8])
    y_meta = OP(x.to("meta"), None, [8])
    assert y.stride() == y_meta.stride() == (8, 1)
    torch.testing.assert_close(y, torch.nn.functional.rms_norm(x, [8]))
