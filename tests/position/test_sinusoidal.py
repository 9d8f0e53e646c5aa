"""SinusoidalFwdOp (no tensor inputs): the interleaved table against the float64 formula, defaults,
dtypes, meta device, errors naming the rule, torch.compile(fullgraph=True), the Op-class view."""
import pytest
import torch
import torch._dynamo

from tileops.position import SinusoidalFwdOp

OP = torch.ops.tileops.position_sinusoidal_fwd


def sinusoidal_ref(n, dim, base=10000.0):
    """Vaswani et al.: PE[p, 2i] = sin(p / base^(2i/dim)), PE[p, 2i+1] = cos(p / base^(2i/dim))."""
    p = torch.arange(n, dtype=torch.float64)[:, None]
    i2 = torch.arange(0, dim, 2, dtype=torch.float64)
    angle = p / base ** (i2 / dim)
    table = torch.empty(n, dim, dtype=torch.float64)
    table[:, 0::2], table[:, 1::2] = angle.sin(), angle.cos()
    return table


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("n,dim,base", [(1, 2, 10000.0), (64, 16, 10000.0), (512, 768, 10000.0), (33, 10, 500.0)])
def test_matches_formula(dtype, n, dim, base):
    t = OP(n, dim, "cpu", base, dtype)
    assert t.shape == (n, dim) and t.dtype == dtype and t.is_contiguous()
    # Rounded once from float64: at most one ulp (near 1) from the formula rounded the same way.
    torch.testing.assert_close(t, sinusoidal_ref(n, dim, base).to(dtype), rtol=0, atol=torch.finfo(dtype).eps)


def test_layout_is_interleaved_sin_cos():
    t = OP(4, 4, "cpu")
    p = torch.arange(4, dtype=torch.float64)
    torch.testing.assert_close(t[:, 0], p.sin().float())       # column 0: sin(p * 1)
    torch.testing.assert_close(t[:, 1], p.cos().float())       # column 1: cos(p * 1)
    torch.testing.assert_close(t[:, 2], (p / 100).sin().float())  # 10000^(2/4) = 100


def test_defaults_are_base_10000_and_float32():
    t = OP(16, 8, "cpu")
    assert t.dtype == torch.float32
    torch.testing.assert_close(t, sinusoidal_ref(16, 8).float(), rtol=0, atol=1.2e-7)
    assert OP(4, 4, "cpu", 2.0).ne(t[:4, :4]).any()  # base reaches the kernel


def test_meta_device(counters):
    t = OP(8192, 4096, torch.device("meta"), dtype=torch.bfloat16)
    assert t.is_meta and t.shape == (8192, 4096) and t.dtype == torch.bfloat16
    assert counters()["kernel_builds"] == 0


PREFIX = r"tileops::position_sinusoidal_fwd: "


@pytest.mark.parametrize("args,kwargs,exc,message", [
    ((8, 7, "cpu"), {}, ValueError, r"shape rule 'dim % 2 == 0' is violated \(left side 1, right side 0\)"),
    ((8, 0, "cpu"), {}, ValueError, r"shape rule 'dim >= 2' is violated"),
    ((-1, 8, "cpu"), {}, ValueError, r"shape rule 'num_positions >= 0' is violated"),
    ((8, 8, "cpu"), {"dtype": torch.int32}, ValueError,
     r"'dtype' must be one of float16 \| bfloat16 \| float32, got int32"),
    ((8, 8, "meta"), {"dtype": torch.float64}, ValueError, r"'dtype' must be one of .*, got float64"),
])
def test_bad_params_name_the_rule(args, kwargs, exc, message):
    with pytest.raises(exc, match=PREFIX + message):
        OP(*args, **kwargs)


def test_empty_table():
    assert OP(0, 8, "cpu").shape == (0, 8)


def test_inside_compile_fullgraph():
    torch._dynamo.reset()
    fn = torch.compile(lambda x: x + OP(x.shape[0], x.shape[1], x.device, 10000.0, x.dtype), fullgraph=True)
    x = torch.zeros(32, 64)
    torch.testing.assert_close(fn(x), sinusoidal_ref(32, 64).float())


def test_op_class_defaults_and_dtype_names():
    op = SinusoidalFwdOp(10, 6, "cpu")
    assert SinusoidalFwdOp.compile_op_names == () and op.dtype == torch.float32 and op.base == 10000.0
    torch.testing.assert_close(op(), sinusoidal_ref(10, 6).float(), rtol=0, atol=1.2e-7)
    assert SinusoidalFwdOp(10, 6, "cpu", dtype="bfloat16")().dtype == torch.bfloat16


def test_scalar_type_choices_must_be_dtype_names():
    # The grammar extension SinusoidalFwdOp needs: choices on a ScalarType param are dtype names.
    from codegen.model import build_ops
    from codegen.parse import ManifestError, parse_text
    text = """
TOp:
  family: fam
  ref_api: formula
  status: implemented
  signature:
    outputs:
      y: {dtype: same_as(dtype), shape: "[n]"}
    params:
      n: {type: int}
      device: {type: Device}
      dtype: {type: ScalarType, default: float32, choices: [float32, CHOICE]}
"""
    (op,) = build_ops([parse_text(text.replace("CHOICE", "bfloat16"), "manifests/t.yaml")])
    assert op.param("dtype").choices == ("float32", "bfloat16")
    with pytest.raises(ManifestError, match=r"param 'dtype': choices must be dtype names"):
        build_ops([parse_text(text.replace("CHOICE", "int4"), "manifests/t.yaml")])
