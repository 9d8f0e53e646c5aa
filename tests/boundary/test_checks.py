"""Bad input: an error naming the op, the argument and the manifest rule; never a crash."""
import pytest
import torch

OP = torch.ops.tileops.norm_rms_norm_fwd
PREFIX = r"tileops::norm_rms_norm_fwd: "


def test_unsupported_dtype_int32():
    with pytest.raises(TypeError, match=PREFIX + r"'x' must have dtype float16 \| bfloat16 \| float32, got int32"):
        OP(torch.ones(2, 8, dtype=torch.int32), None, [8])


def test_float64_is_not_in_the_manifest():
    with pytest.raises(TypeError, match=PREFIX + r"'x' must have dtype .*, got float64"):
        OP(torch.randn(2, 8, dtype=torch.float64), None, [8])


def test_weight_dtype_must_match_x_or_be_float32():
    with pytest.raises(TypeError, match=PREFIX + r"the dtypes of \(x, weight\) must be one of the combinations "
                                                 r"\(float16, float16\), .* \(dtype_combos\), got \(float32, bfloat16\)"):
        OP(torch.randn(2, 8), torch.randn(8, dtype=torch.bfloat16), [8])


def test_normalized_shape_must_be_trailing_dims_of_x():
    with pytest.raises(RuntimeError, match=PREFIX + r"'x' must have shape \[\.\.\., \*normalized_shape\] "
                                                    r"\(normalized_shape=\[16\]\), got \[2, 8\]"):
        OP(torch.randn(2, 8), None, [16])


def test_x_with_fewer_dims_than_normalized_shape():
    with pytest.raises(RuntimeError, match=PREFIX + r"'x' must have shape"):
        OP(torch.randn(8), None, [2, 8])


def test_weight_shape_must_be_normalized_shape():
    with pytest.raises(RuntimeError, match=PREFIX + r"'weight' must have shape \[\*normalized_shape\] "
                                                    r"\(normalized_shape=\[8\]\), got \[7\]"):
        OP(torch.randn(2, 8), torch.randn(7), [8])


def test_empty_normalized_shape():
    with pytest.raises(ValueError, match=PREFIX + r"shape rule 'len\(normalized_shape\) >= 1' is violated"):
        OP(torch.randn(2, 8), None, [])


def test_tensors_on_different_devices():
    with pytest.raises(RuntimeError, match=PREFIX + r"'weight' must be on the device of 'x' \(cpu\), got meta"):
        OP(torch.randn(2, 8), torch.randn(8, device="meta"), [8])


def test_unknown_target_names_the_registered_ones():
    with pytest.raises(RuntimeError, match=PREFIX + r"unknown target 'tpu9' \(registered: 'nvrtc', 'cublaslt', 'reference'"):
        OP(torch.randn(2, 8), None, [8], target="tpu9")


def test_nvrtc_target_on_cpu_tensors_is_refused_clearly():
    with pytest.raises(RuntimeError, match=r"target 'nvrtc' serves CUDA tensors only, got cpu"):
        OP(torch.randn(2, 8), None, [8], target="nvrtc")


def test_zero_rows_returns_an_empty_result(counters):
    y = OP(torch.randn(0, 8), torch.randn(8), [8])
    assert y.shape == (0, 8) and y.dtype == torch.float32
    assert counters()["kernel_builds"] == 0  # nothing to compute: no kernel constructed


def test_row_too_long_for_the_manifest_rule():
    with pytest.raises(ValueError, match=r"prod\(normalized_shape\) <= 1048576"):
        OP(torch.empty(1, 2 ** 20 + 1, device="meta"), None, [2 ** 20 + 1])


def test_an_fp8_dtype_is_named_as_torch_names_it():
    a = torch.zeros(2, 4, 8).to(torch.float8_e5m2)
    scale = torch.ones((), dtype=torch.float32)
    with pytest.raises(TypeError, match=r"tileops::gemm_bmm_fp8_fwd: 'a' must have dtype float8_e4m3fn, got float8_e5m2$"):
        torch.ops.tileops.gemm_bmm_fp8_fwd(a, a, scale, scale)
