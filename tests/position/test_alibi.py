"""AlibiFwdOp (no tensor inputs): slopes against the formula, meta device, bad num_heads,
torch.compile(fullgraph=True), the Op-class view."""
import math

import pytest
import torch
import torch._dynamo

from tileops.position import AlibiFwdOp

OP = torch.ops.tileops.position_alibi_fwd


def alibi_ref(num_heads):
    """HF transformers' get_alibi_slopes, written out in float64."""
    n = 2 ** math.floor(math.log2(num_heads))
    slopes = [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]
    slopes += [2.0 ** (-4.0 * (2 * j + 1) / n) for j in range(num_heads - n)]
    return torch.tensor(slopes, dtype=torch.float64).float()


@pytest.mark.parametrize("num_heads", [1, 8, 12, 112])
def test_matches_formula_on_cpu(num_heads):
    s = OP(num_heads, "cpu")
    assert s.shape == (num_heads,) and s.dtype == torch.float32 and s.device.type == "cpu"
    torch.testing.assert_close(s, alibi_ref(num_heads), rtol=0, atol=0)


def test_known_values():
    # 8 heads: 1/2, 1/4, ..., 1/256; 12 heads adds the odd-indexed slopes of 16 heads.
    assert OP(8, "cpu").tolist() == [2.0 ** -(i + 1) for i in range(8)]
    assert OP(12, "cpu")[8:].tolist() == pytest.approx([2.0 ** (-0.5 * (2 * j + 1)) for j in range(4)])


def test_meta_device_gives_shape_and_dtype_only(counters):
    s = OP(112, torch.device("meta"))
    assert s.is_meta and s.shape == (112,) and s.dtype == torch.float32
    assert counters()["kernel_builds"] == 0


@pytest.mark.parametrize("bad", [0, -3])
def test_bad_num_heads_names_the_rule(bad):
    with pytest.raises(ValueError, match=r"tileops::position_alibi_fwd: shape rule 'num_heads >= 1' is violated"):
        OP(bad, "cpu")


def test_inside_compile_fullgraph():
    torch._dynamo.reset()
    fn = torch.compile(lambda x: x * OP(12, x.device), fullgraph=True)
    x = torch.ones(12)
    torch.testing.assert_close(fn(x), alibi_ref(12))


def test_op_class():
    op = AlibiFwdOp(num_heads=8, device="cpu")
    assert AlibiFwdOp.compile_op_names == ()  # no tensor inputs: no boundary
    torch.testing.assert_close(op(), alibi_ref(8))
    with pytest.raises(TypeError, match="no compile boundary"):
        AlibiFwdOp(8, "cpu", target="reference")
