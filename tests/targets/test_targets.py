"""Target resolution: explicit -> process default -> detection; out-of-tree backends; nothing pinned."""
import os

import pytest
import torch

import tileops
from tileops.norm import RMSNormFwdOp

OP = torch.ops.tileops.norm_rms_norm_fwd


@pytest.fixture(autouse=True)
def no_default_and_no_claim(monkeypatch):
    monkeypatch.delenv("TILEOPS_EXAMPLE_CLAIM_CPU", raising=False)
    tileops.set_default_target(None)
    yield
    tileops.set_default_target(None)


def test_in_tree_targets():
    names = tileops.target_names()
    assert names[:3] == ["nvrtc", "cublaslt", "reference"]


def test_process_default_applies_and_unknown_default_is_refused():
    with pytest.raises(ValueError, match=r"unknown target 'nope' for the process default; registered: 'nvrtc', "):
        tileops.set_default_target("nope")
    tileops.set_default_target("nvrtc")
    assert tileops.default_target() == "nvrtc"
    with pytest.raises(RuntimeError, match="target 'nvrtc' serves CUDA tensors only"):
        OP(torch.randn(2, 8), None, [8])
    # The explicit target wins over the default.
    torch.testing.assert_close(OP(torch.ones(2, 8), None, [8], target="reference"), torch.ones(2, 8))


def test_out_of_tree_backend_by_name(example_backend):
    assert example_backend in tileops.target_names()
    x, w = torch.randn(5, 32), torch.randn(32)
    y = OP(x, w, [32], target=example_backend)
    torch.testing.assert_close(y, torch.nn.functional.rms_norm(x, [32], w), rtol=1e-5, atol=1e-5)


def test_detection_prefers_a_claiming_backend_over_the_fallback(example_backend, monkeypatch):
    x = torch.randn(2, 8, dtype=torch.bfloat16)
    torch.testing.assert_close(OP(x, None, [8]), torch.nn.functional.rms_norm(x, [8]))  # reference
    monkeypatch.setenv("TILEOPS_EXAMPLE_CLAIM_CPU", "1")
    # Now example_cpu claims CPU; it has no bfloat16 kernel, which shows it was chosen.
    with pytest.raises(RuntimeError, match=r"\(target 'example_cpu'\): target 'example_cpu' has no bfloat16 kernel"):
        OP(x, None, [8])
    monkeypatch.delenv("TILEOPS_EXAMPLE_CLAIM_CPU")
    # A failed construction pinned nothing: the same call resolves afresh.
    torch.testing.assert_close(OP(x, None, [8]), torch.nn.functional.rms_norm(x, [8]))


def test_failed_explicit_target_pins_nothing_for_the_op_class():
    op = RMSNormFwdOp(8, target="nvrtc")
    with pytest.raises(RuntimeError, match="serves CUDA tensors only"):
        op(torch.randn(2, 8))
    plain = RMSNormFwdOp(8)
    torch.testing.assert_close(plain(torch.ones(2, 8)), torch.ones(2, 8))


def test_explicit_target_applies_to_the_first_compiled_call(example_backend):
    torch._dynamo.reset()
    op = RMSNormFwdOp(8, target=example_backend)
    x = torch.randn(3, 8, dtype=torch.bfloat16)
    fn = torch.compile(lambda x: op(x), fullgraph=True, backend="eager")
    with pytest.raises(RuntimeError, match="example_cpu' has no bfloat16 kernel"):
        fn(x)


def test_backend_whose_registration_fails_is_rolled_back():
    # A second copy of the example backend under the same target name must fail as a whole.
    path = os.path.join(os.path.dirname(tileops.library_path()), "plugin", "example_backend",
                        "libtileops_example_backend.so")
    if "example_cpu" not in tileops.target_names():
        tileops.load_backend(path)
    before = tileops.target_names()
    import shutil
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        copy = os.path.join(d, "libtileops_example_backend_copy.so")
        shutil.copy(path, copy)
        with pytest.raises(RuntimeError, match=r"registering target 'example_cpu' failed: a target of that name is "
                                               r"already registered"):
            tileops.load_backend(copy)
    assert tileops.target_names() == before
