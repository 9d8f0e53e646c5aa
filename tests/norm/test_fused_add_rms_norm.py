"""FusedAddRMSNormFwdOp on CPU (reference target): both side-effect branches, write-back, compile."""
import pytest
import torch
import torch._dynamo

import tileops

OPS = torch.ops.tileops
F = torch.nn.functional


def reference(x, residual, w, ns, eps=None):
    s = x + residual
    return F.rms_norm(s, ns, w, eps), s


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("weight", [True, False])
def test_out_of_place_returns_y_and_the_new_residual(dtype, weight):
    x, r = torch.randn(5, 3, 32, dtype=dtype), torch.randn(5, 3, 32, dtype=dtype)
    w = torch.randn(32, dtype=dtype) if weight else None
    r_before = r.clone()
    y, r_new = OPS.norm_fused_add_rms_norm_fwd(x, r, w, [32])
    y_ref, s_ref = reference(x, r, w, [32])
    assert torch.equal(r_new, s_ref) and torch.equal(y, y_ref)
    assert torch.equal(r, r_before)  # out of place: the input residual is untouched


def test_in_place_branch_writes_residual_and_returns_y():
    x, r = torch.randn(4, 64), torch.randn(4, 64)
    w = torch.randn(64)
    y_ref, s_ref = reference(x, r, w, [64], 1e-6)
    y = OPS.norm_fused_add_rms_norm_fwd_writes_residual(x, r, w, [64], 1e-6)
    assert torch.equal(r, s_ref) and torch.equal(y, y_ref)


def test_non_contiguous_written_residual_is_written_back():
    x = torch.randn(6, 16)
    storage = torch.randn(16, 6)
    r = storage.t()  # (6, 16), not contiguous
    assert not r.is_contiguous()
    expected = x + r
    OPS.norm_fused_add_rms_norm_fwd_writes_residual(x, r, None, [16])
    assert torch.equal(r, expected) and torch.equal(storage.t(), expected)


def test_schemas_and_compile_op_names():
    s = str(OPS.norm_fused_add_rms_norm_fwd_writes_residual.default._schema)
    assert "Tensor(a!) residual" in s and s.endswith("-> Tensor")
    assert str(OPS.norm_fused_add_rms_norm_fwd.default._schema).endswith("-> (Tensor, Tensor)")
    entry = next(e for e in tileops.op_table() if e["class"] == "FusedAddRMSNormFwdOp")
    assert entry["compile_op_names"] == ["tileops::norm_fused_add_rms_norm_fwd",
                                         "tileops::norm_fused_add_rms_norm_fwd_writes_residual"]


def test_residual_shape_and_dtype_rules():
    with pytest.raises(RuntimeError, match=r"tileops::norm_fused_add_rms_norm_fwd: 'residual' must have the shape "
                                           r"of 'x' \[2, 8\], got \[2, 9\]"):
        OPS.norm_fused_add_rms_norm_fwd(torch.randn(2, 8), torch.randn(2, 9), None, [8])
    with pytest.raises(TypeError, match=r"'residual' must have the dtype of 'x'"):
        OPS.norm_fused_add_rms_norm_fwd_writes_residual(torch.randn(2, 8), torch.randn(2, 8).half(), None, [8])


@pytest.mark.parametrize("op", ["norm_fused_add_rms_norm_fwd", "norm_fused_add_rms_norm_fwd_writes_residual"])
def test_opcheck(op):
    x, r, w = torch.randn(3, 16), torch.randn(3, 16), torch.randn(16)
    torch.library.opcheck(getattr(OPS, op).default, (x, r, w, [16], None))


def test_in_place_branch_under_compile_matches_eager():
    torch._dynamo.reset()

    def block(x, r, w):
        y = OPS.norm_fused_add_rms_norm_fwd_writes_residual(x, r, w, [32])
        return y * 2

    x, w = torch.randn(4, 32), torch.randn(32)
    r_eager, r_comp = torch.randn(4, 32), None
    r_comp = r_eager.clone()
    expected = block(x, r_eager, w)
    got = torch.compile(block, fullgraph=True)(x, r_comp, w)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(r_comp, r_eager)  # the mutation happened under compile too


def test_meta_outputs_are_contiguous():
    x = torch.empty_strided((4, 8), (1, 4), device="meta")
    y, r = OPS.norm_fused_add_rms_norm_fwd(x, x, None, [8])
    assert y.stride() == r.stride() == (8, 1)
