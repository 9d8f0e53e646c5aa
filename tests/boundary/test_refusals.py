"""Bad calls refused before any copy, allocation or compute, each error naming the op, the argument
and the rule: out= that requires grad, written tensors that overlap, sizes over the limit, a device
the process does not have, and errors from torch or the allocator."""
import os
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import tileops

ops = torch.ops.tileops
LIMIT = 1 << 35  # tileops::check::kMaxTensorBytes (src/boundary/checks.h, README "Limits")


# ---- out= that requires grad (torch's rule for out= functions) ------------------------------------

def test_out_requiring_grad_is_refused_like_torch():
    x = torch.randn(4, 16)
    out = torch.empty(4, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"tileops::activation_silu_and_mul_fwd_out: functions with out=\.\.\. "
                                           r"arguments don't support automatic differentiation, but one of the "
                                           r"arguments requires grad"):
        ops.activation_silu_and_mul_fwd_out(x, out)
    assert out.grad_fn is None and out._version == 0  # refused before writing


def test_out_call_with_a_grad_requiring_input_gets_torchs_out_rule():
    x = torch.randn(4, 16, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"activation_gelu_and_mul_fwd_out: functions with out=\.\.\. arguments"):
        ops.activation_gelu_and_mul_fwd_out(x, torch.empty(4, 8))


def test_out_requiring_grad_is_accepted_under_no_grad_like_torch():
    x = torch.randn(4, 16)
    out = torch.empty(4, 8, requires_grad=True)
    with torch.no_grad():
        ops.activation_silu_and_mul_fwd_out(x, out)
    a, b = x.chunk(2, dim=-1)
    torch.testing.assert_close(out.detach(), torch.nn.functional.silu(a) * b)


# ---- written tensors that overlap --------------------------------------------------------------------

def rope_args(t=5, h=2, d=8):
    cache = torch.randn(16, d)
    return torch.randint(0, 16, (t,)), torch.randn(t, h, d), torch.randn(t, h, d), cache


def test_rope_with_k_the_same_tensor_as_q_is_refused_untouched():
    pos, q, _, cache = rope_args()
    before = q.clone()
    with pytest.raises(RuntimeError, match=r"tileops::position_rope_neox_cached_fwd_writes_k_writes_q: 'q' is written and "
                                           r"shares memory with 'k'"):
        ops.position_rope_neox_cached_fwd_writes_k_writes_q(pos, q, q, cache)
    assert torch.equal(q, before)


def test_rope_with_q_and_k_overlapping_in_one_buffer_is_refused():
    pos, _, _, cache = rope_args()
    buf = torch.randn(6, 2, 8)
    with pytest.raises(RuntimeError, match=r"'q' is written and shares memory with 'k'"):
        ops.position_rope_non_neox_cached_fwd_writes_k_writes_q(pos, buf[:5], buf[1:], cache)


def test_rope_with_disjoint_interleaved_views_of_one_buffer_is_accepted():
    # q and k split from one qkv buffer (vLLM's layout): one storage, no shared element.
    pos, _, _, cache = rope_args()
    buf = torch.randn(5, 4, 8)
    q, k = buf[:, :2], buf[:, 2:]
    q_ref, k_ref = q.clone(), k.clone()
    ops.position_rope_neox_cached_fwd_writes_k_writes_q(pos, q, k, cache)
    ops.position_rope_neox_cached_fwd_writes_k_writes_q(pos, q_ref, k_ref, cache)
    assert torch.equal(q, q_ref) and torch.equal(k, k_ref)


def test_qk_norm_rope_with_k_the_same_tensor_as_q_is_refused():
    pos, q, _, cache = rope_args()
    w = torch.ones(8)
    before = q.clone()
    with pytest.raises(RuntimeError, match=r"tileops::position_qk_norm_rope_fwd_writes_k_writes_q: 'q' is written "
                                           r"and shares memory with 'k'"):
        ops.position_qk_norm_rope_fwd_writes_k_writes_q(pos, q, q, w, w, cache)
    assert torch.equal(q, before)


def test_written_residual_that_is_x_is_refused():
    x = torch.randn(4, 8)
    with pytest.raises(RuntimeError, match=r"tileops::norm_fused_add_rms_norm_fwd_writes_residual: 'residual' is "
                                           r"written and shares memory with 'x'"):
        ops.norm_fused_add_rms_norm_fwd_writes_residual(x, x, None, [8])


def test_out_overlapping_its_input_is_refused():
    x = torch.randn(4, 16)
    with pytest.raises(RuntimeError, match=r"tileops::activation_silu_and_mul_fwd_out: 'out' is written and shares "
                                           r"memory with 'x'"):
        ops.activation_silu_and_mul_fwd_out(x, out=x.view(-1)[8:40].view(4, 8))


def test_out_as_a_strided_view_of_its_input_is_refused():
    # A non-dense view is searched exactly, not let through as torch's "too hard" overlap is.
    x = torch.randn(4, 16)
    before = x.clone()
    with pytest.raises(RuntimeError, match=r"activation_silu_and_mul_fwd_out: 'out' is written and shares memory "
                                           r"with 'x'"):
        ops.activation_silu_and_mul_fwd_out(x, out=x[:, :8])
    assert torch.equal(x, before)


def test_rope_with_k_a_strided_prefix_of_q_is_refused_untouched():
    # k = q[:, :2]: a non-contiguous view inside q; accepted, it gave wrong values in 319 of 640 places.
    pos, q, _, cache = rope_args(t=5, h=4, d=8)
    before = q.clone()
    for op in (ops.position_rope_neox_cached_fwd_writes_k_writes_q, ops.position_rope_non_neox_cached_fwd_writes_k_writes_q):
        with pytest.raises(RuntimeError, match=r"'q' is written and shares memory with 'k'"):
            op(pos, q, q[:, :2], cache)
    w = torch.ones(8)
    with pytest.raises(RuntimeError, match=r"position_qk_norm_rope_fwd_writes_k_writes_q: 'q' is written and "
                                           r"shares memory with 'k'"):
        ops.position_qk_norm_rope_fwd_writes_k_writes_q(pos, q, q[:, :2], w, w, cache)
    assert torch.equal(q, before)


def test_rope_with_q_k_split_from_a_flat_qkv_is_accepted():
    # vLLM's flat layout: q, k, v = qkv.split(...) along the last dim, each a strided view.
    t, hq, hk, d = 5, 4, 2, 8
    qkv = torch.randn(t, (hq + 2 * hk) * d)
    q, k, _ = qkv.split([hq * d, hk * d, hk * d], dim=-1)
    pos, cache = torch.randint(0, 16, (t,)), torch.randn(16, d)
    q_ref, k_ref = q.clone().view(t, hq, d), k.clone().view(t, hk, d)
    ops.position_rope_neox_cached_fwd_writes_k_writes_q(pos, q.view(t, hq, d), k.view(t, hk, d), cache)
    ops.position_rope_neox_cached_fwd_writes_k_writes_q(pos, q_ref, k_ref, cache)
    assert torch.equal(q.view(t, hq, d), q_ref) and torch.equal(k.view(t, hk, d), k_ref)


def test_written_view_with_interleaved_strides_that_repeat_elements_is_refused():
    # as_strided with sizes [3, 3] and strides [2, 1]: elements (0, 2) and (1, 0) are one; not dense,
    # not expanded, so torch calls it "too hard".
    x = torch.randn(16).as_strided((3, 3), (2, 1))
    with pytest.raises(RuntimeError, match=r"activation_relu_fwd_writes_x: 'x' is written, but some of its "
                                           r"elements share one memory location"):
        ops.activation_relu_fwd_writes_x(x)


def test_expanded_written_input_is_refused():
    x = torch.randn(1, 8).expand(4, 8)
    with pytest.raises(RuntimeError, match=r"tileops::activation_relu_fwd_writes_x: 'x' is written, but some of its "
                                           r"elements share one memory location .*x\.clone\(\)"):
        ops.activation_relu_fwd_writes_x(x)


def test_expanded_out_is_refused():
    out = torch.empty(1, 8).expand(4, 8)
    with pytest.raises(RuntimeError, match=r"activation_gelu_and_mul_fwd_out: 'out' is written, but some of its "
                                           r"elements share"):
        ops.activation_gelu_and_mul_fwd_out(torch.randn(4, 16), out)


def run_capped(code: str, headroom_mb: int) -> subprocess.CompletedProcess:
    """Runs `code` in a child whose address space may grow by only headroom_mb after imports: an
    allocation of more makes torch raise, so a refusal that allocates first shows the wrong error."""
    prog = textwrap.dedent("""
        import resource, sys, time, torch, tileops
        tileops.load()
        ops = torch.ops.tileops
        with open("/proc/self/statm") as f:
            vm = int(f.read().split()[0]) * resource.getpagesize()
        cap = vm + {headroom} * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    """).format(headroom=headroom_mb) + textwrap.dedent(code)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True, text=True, timeout=120)


def test_huge_expanded_written_input_is_refused_at_once_without_allocating():
    # 2^25 rows of 16 float32 = 2 GiB if it were copied out (the child may only grow by 256 MiB).
    r = run_capped("""
        x = torch.randn(1, 16).expand(2**25, 16)
        t0 = time.perf_counter()
        try:
            ops.activation_silu_fwd_writes_x(x)
        except RuntimeError as e:
            print("ERR", time.perf_counter() - t0, str(e).splitlines()[0])
    """, headroom_mb=256)
    assert r.returncode == 0, r.stderr
    line = r.stdout.strip()
    assert line.startswith("ERR"), r.stdout + r.stderr
    _, seconds, msg = line.split(" ", 2)
    assert "tileops::activation_silu_fwd_writes_x: 'x' is written, but some of its elements share" in msg
    assert float(seconds) < 0.05


# ---- sizes ----------------------------------------------------------------------------------------

def test_factory_output_over_the_limit_is_refused_at_once():
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"tileops::position_sinusoidal_fwd: output 'table' of shape \[1048576, 65536\] "
                                         r"and dtype float32 would take 274877906944 bytes .* over the limit of "
                                         r"34359738368 bytes .*kMaxTensorBytes"):
        ops.position_sinusoidal_fwd(2**20, 2**16, "cpu")
    with pytest.raises(ValueError, match=r"tileops::position_alibi_fwd: output 'slopes' of shape \[17179869184\]"):
        ops.position_alibi_fwd(2**34, "cpu")
    assert time.perf_counter() - t0 < 0.05


def test_factory_size_whose_byte_count_overflows_is_refused():
    with pytest.raises(ValueError, match=r"position_sinusoidal_fwd: output 'table' .* more than 2\^63 bytes"):
        ops.position_sinusoidal_fwd(2**40, 2**40, "cpu")


def test_factory_output_at_the_limit_on_meta_is_only_shapes():
    t = ops.position_sinusoidal_fwd(2**20, 2**16, "meta")
    assert t.shape == (2**20, 2**16) and t.device.type == "meta"


def test_contiguous_copy_over_the_limit_is_refused():
    x = torch.randn(1, 1024).expand(2**24, 1024)  # 64 GiB once contiguous
    with pytest.raises(ValueError, match=r"tileops::norm_rms_norm_fwd: the contiguous copy of non-contiguous 'x' of "
                                         r"shape \[16777216, 1024\] and dtype float32 would take 68719476736 bytes"):
        ops.norm_rms_norm_fwd(x, None, [1024])


def test_contiguous_copy_under_the_limit_is_computed():
    x = torch.randn(1, 64).expand(3, 64)
    y = ops.norm_rms_norm_fwd(x, None, [64])
    torch.testing.assert_close(y, torch.nn.functional.rms_norm(x, [64]))


# ---- devices --------------------------------------------------------------------------------------

@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_factory_on_cuda_without_cuda_names_the_op():
    with pytest.raises(RuntimeError, match=r"tileops::position_alibi_fwd: 'device' is cuda, but this process sees "
                                           r"no CUDA device"):
        ops.position_alibi_fwd(8, "cuda")
    with pytest.raises(RuntimeError, match=r"tileops::position_sinusoidal_fwd: 'device' is cuda:0"):
        ops.position_sinusoidal_fwd(4, 8, "cuda:0")


def test_factory_on_a_cuda_index_past_the_devices_names_the_op():
    n = torch.cuda.device_count()
    with pytest.raises(RuntimeError, match=r"tileops::position_alibi_fwd: 'device' is cuda:%d, but this process "
                                           r"sees" % (n + 3)):
        ops.position_alibi_fwd(8, torch.device("cuda", n + 3))


# ---- errors from torch or the allocator name the op ---------------------------------------------

def test_allocation_failure_names_the_op_and_keeps_its_type():
    r = run_capped("""
        x = torch.randn(2**23, 16)  # 512 MiB; its output does not fit the remaining headroom
        try:
            ops.norm_rms_norm_fwd(x, None, [16])
        except Exception as e:
            print(type(e).__name__, "|", str(e).splitlines()[0])
        y = ops.norm_rms_norm_fwd(torch.ones(2, 16), None, [16])  # the next call works
        print("NEXT", float(y.sum()))
    """, headroom_mb=700)
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.strip().splitlines()
    # torch's CPU allocator raises a RuntimeError (CUDA's an OutOfMemoryError: scripts/reliability_gpu.sh).
    assert first.startswith("RuntimeError | tileops::norm_rms_norm_fwd: "), first
    assert "DefaultCPUAllocator" in first
    assert second.startswith("NEXT 32.0"), second
