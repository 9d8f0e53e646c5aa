"""The serving forms of RMSNorm on the GPU (nvrtc target): a float32 weight beside a 16-bit x (also for
LayerNorm's weight and bias), the
Gemma form and the out= branch, against a float64 reference and the reference target, under
torch.compile and CUDA graphs. Skipped without a GPU (conftest)."""
import pytest
import torch
import torch._dynamo

from support.reference import assert_close_rel, rms_norm_ref

pytestmark = pytest.mark.gpu
OPS = torch.ops.tileops
F = torch.nn.functional
# Row lengths the plain weight serves with every implementation: register rows (64 .. 8192), staged
# rows (8192, 16384 on sm_90), cluster rows (131072); the serving forms take register or streaming rows.
# 1 and 7 rows take the few-rows layout of the register rows, 600 the other.
NS = [64, 128, 1000, 3584, 4096, 8192, 16384, 131072]


def gemma_ref(x, ns, w, eps=1e-6):
    return rms_norm_ref(x, ns, 1 + w.double(), eps)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("m", [1, 7, 600])
def test_fused_add_float32_weight(m, n, dtype):
    x = torch.randn(m, n, device="cuda", dtype=dtype)
    r = torch.randn(m, n, device="cuda", dtype=dtype)
    w = torch.randn(n, device="cuda") * 2
    y, s = OPS.norm_fused_add_rms_norm_fwd(x, r, w, [n], 1e-6)
    assert torch.equal(s, x + r)
    assert_close_rel(y, rms_norm_ref(x + r, [n], w, 1e-6))
    r2 = r.clone()
    y2 = OPS.norm_fused_add_rms_norm_fwd_writes_residual(x, r2, w, [n], 1e-6)
    assert torch.equal(r2, s) and torch.equal(y2, y)


@pytest.mark.parametrize("w_dtype", ["same", torch.float32], ids=["w_same", "w_f32"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("m", [1, 7, 600])
def test_gemma_rms_norm_and_fused_add(m, n, dtype, w_dtype):
    x = torch.randn(m, n, device="cuda", dtype=dtype)
    r = torch.randn(m, n, device="cuda", dtype=dtype)
    w = (torch.randn(n, device="cuda") * 0.5).to(dtype if w_dtype == "same" else w_dtype)
    assert_close_rel(OPS.norm_gemma_rms_norm_fwd(x, w, [n]), gemma_ref(x, [n], w))
    y, s = OPS.norm_gemma_fused_add_rms_norm_fwd(x, r, w, [n])
    assert torch.equal(s, x + r)
    assert_close_rel(y, gemma_ref(x + r, [n], w))


def layer_norm_ref(x, ns, w=None, b=None, eps=1e-5):
    y = F.layer_norm(x.double(), ns, None if w is None else w.double(), None if b is None else b.double(), eps)
    return y.to(x.dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("m", [1, 7, 600])
def test_rms_norm_float32_weight(m, n, dtype):
    x = torch.randn(m, n, device="cuda", dtype=dtype)
    w = torch.randn(n, device="cuda") * 2
    y = OPS.norm_rms_norm_fwd(x, w, [n], 1e-6)
    assert_close_rel(y, rms_norm_ref(x, [n], w, 1e-6))
    out = torch.empty_like(x)
    OPS.norm_rms_norm_fwd_out(x, w, out, [n], 1e-6)
    assert torch.equal(out, y)


@pytest.mark.parametrize("affine", ["wb", "w", "b"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("m", [1, 7, 600])
def test_layer_norm_float32_weight_and_bias(m, n, dtype, affine):
    x = torch.randn(m, n, device="cuda", dtype=dtype) + 3
    w = torch.randn(n, device="cuda") * 2 if "w" in affine else None
    b = torch.randn(n, device="cuda") * 2 if "b" in affine else None
    assert_close_rel(OPS.norm_layer_norm_fwd(x, w, b, [n], 1e-5), layer_norm_ref(x, [n], w, b))


@pytest.mark.parametrize("offset_bytes", [4, 8])
def test_float32_weight_below_16_byte_alignment(offset_bytes):
    n = 4096
    x = torch.randn(64, n, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n + 4, device="cuda")[offset_bytes // 4:][:n]
    assert w.data_ptr() % 16 != 0
    assert_close_rel(OPS.norm_gemma_rms_norm_fwd(x, w, [n]), gemma_ref(x, [n], w))
    y, _ = OPS.norm_fused_add_rms_norm_fwd(x, x, w, [n])
    assert_close_rel(y, rms_norm_ref(x + x, [n], w))
    assert_close_rel(OPS.norm_rms_norm_fwd(x, w, [n]), rms_norm_ref(x, [n], w))
    b = torch.randn(n + 4, device="cuda")[offset_bytes // 4:][:n]
    assert_close_rel(OPS.norm_layer_norm_fwd(x, w, b, [n]), layer_norm_ref(x, [n], w, b))
    dy = torch.randn_like(x)
    dx, dw = OPS.norm_rms_norm_bwd(dy, x, w, [n])
    ref_dx, ref_dw = OPS.norm_rms_norm_bwd(dy, x, w.clone(), [n])  # a 16-byte-aligned copy of the weight
    assert_close_rel(dx, ref_dx)  # another vector width: another summation order
    torch.testing.assert_close(dw, ref_dw, rtol=1e-5, atol=1e-4)


def test_agrees_with_the_reference_target_on_cuda():
    x = torch.randn(32, 3584, device="cuda", dtype=torch.bfloat16)
    r = torch.randn(32, 3584, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(3584, device="cuda") * 0.5
    for op, args in [(OPS.norm_gemma_rms_norm_fwd, (x, w, [3584])),
                     (OPS.norm_rms_norm_fwd, (x, w, [3584])),
                     (OPS.norm_gemma_fused_add_rms_norm_fwd, (x, r, w, [3584])),
                     (OPS.norm_fused_add_rms_norm_fwd, (x, r, w, [3584]))]:
        got, ref = op(*args), op(*args, target="reference")
        for g, e in zip(got if isinstance(got, tuple) else (got,), ref if isinstance(ref, tuple) else (ref,)):
            torch.testing.assert_close(g, e, rtol=1.6e-2, atol=1.6e-2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("n", [128, 4096, 16384])
def test_rms_norm_out(n, dtype):
    x = torch.randn(33, n, device="cuda", dtype=dtype)
    w = torch.randn(n, device="cuda", dtype=dtype)
    out = torch.empty_like(x)
    assert OPS.norm_rms_norm_fwd_out(x, w, out, [n]) is None
    assert torch.equal(out, OPS.norm_rms_norm_fwd(x, w, [n]))
    strided = torch.empty(n, 33, device="cuda", dtype=dtype).t()
    OPS.norm_rms_norm_fwd_out(x, w, strided, [n])
    assert torch.equal(strided, out)


def test_compile_and_cuda_graph():
    torch._dynamo.reset()
    x = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda")

    def block(x, r, w, out):
        y = OPS.norm_gemma_fused_add_rms_norm_fwd_writes_residual(x, r, w, [4096])
        OPS.norm_rms_norm_fwd_out(y, None, out, [4096])
        return out + 1

    r0 = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
    r_e, r_c = r0.clone(), r0.clone()
    o_e, o_c = torch.empty_like(x), torch.empty_like(x)
    expected = block(x, r_e, w, o_e)
    got = torch.compile(block, fullgraph=True)(x, r_c, w, o_c)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(r_c, r_e)
    # Graph capture after a warm-up (the kernels are built outside the capture).
    r_g, o_g = r0.clone(), torch.empty_like(x)
    block(x, r0.clone(), w, torch.empty_like(x))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        block(x, r_g, w, o_g)
    r_g.copy_(r0)
    g.replay()
    torch.testing.assert_close(r_g, r_e)
    torch.testing.assert_close(o_g, o_e)
