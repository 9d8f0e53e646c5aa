"""CBProducerFwdOp and the Mamba2FwdOp composite (manifests/mamba.yaml) on CPU: the coupling matrix
against a float64 sum written here, the whole forward against Mamba-2's token-by-token recurrence
(no chunks at all), tracing into the five stage ops, and refusals that name the op."""
import pytest
import torch
import torch._dynamo
import torch.nn.functional as F
from torch._dynamo.backends.common import aot_autograd

import tileops
from tileops.mamba import CBProducerFwdOp, Mamba2FwdOp

tileops.load()
ops = torch.ops.tileops


def float64_cb(c_mat, b_mat, q):
    b, s, g, n = c_mat.shape
    cb = torch.zeros(b, s // q, g, q, q, dtype=torch.float64)
    for c in range(s // q):
        for l in range(q):
            for t in range(l + 1):
                cb[:, c, :, l, t] = (c_mat[:, c * q + l].double() * b_mat[:, c * q + t].double()).sum(-1)
    return cb


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("groups", [1, 3])
def test_cb_producer_is_the_causal_product_inside_each_chunk(dtype, groups):
    b, nc, q, n = 2, 3, 5, 7
    c_mat, b_mat = torch.randn(b, nc * q, groups, n, dtype=dtype), torch.randn(b, nc * q, groups, n, dtype=dtype)
    op = CBProducerFwdOp(batch=b, num_chunks=nc, n_groups=groups, chunk_len=q, d_state=n)
    cb = op(c_mat, b_mat)
    assert cb.shape == (b, nc, groups, q, q) and cb.dtype == dtype
    want = float64_cb(c_mat, b_mat, q)
    assert torch.equal(cb.triu(1), torch.zeros_like(cb))  # above the diagonal: exact zeros
    tol = 1e-3 if dtype == torch.float16 else 8e-3  # one rounding to the dtype
    torch.testing.assert_close(cb.double(), want, rtol=tol, atol=tol)


def test_cb_producer_params_are_checked_against_the_shapes():
    x = torch.randn(2, 8, 1, 4, dtype=torch.float16)
    good = dict(batch=2, num_chunks=2, n_groups=1, chunk_len=4, d_state=4)
    assert ops.mamba_cb_producer_fwd(x, x, **good).shape == (2, 2, 1, 4, 4)
    for key, value, rule in [("batch", 3, "B == batch"), ("num_chunks", 3, "S == num_chunks \\* chunk_len"),
                             ("n_groups", 2, "G == n_groups"), ("d_state", 5, "N == d_state"),
                             ("chunk_len", 0, "chunk_len > 0")]:
        with pytest.raises(ValueError, match=f"tileops::mamba_cb_producer_fwd: .*{rule}"):
            ops.mamba_cb_producer_fwd(x, x, **{**good, key: value})
    with pytest.raises(TypeError, match="tileops::mamba_cb_producer_fwd: 'b_mat' must have the dtype of 'c_mat'"):
        ops.mamba_cb_producer_fwd(x, x.bfloat16(), **good)


def float64_mamba2(x, dt, a, bm, cm, dt_bias, initial, dt_softplus):
    """Mamba-2 one token at a time: h = exp(dt' a) h + dt' x B^T, y = h C. dt' decays in float32 (as
    DaCumsumFwdOp's da_cumsum) and weighs the input rounded to x's dtype (as its dt_out)."""
    b, s, h, p = x.shape
    g, n = bm.shape[2], bm.shape[3]
    d = dt + dt_bias if dt_bias is not None else dt
    d = F.softplus(d) if dt_softplus else d
    d = d.clamp(min=0.0)
    weight = d.to(x.dtype).double()
    group = torch.arange(h) // (h // g)
    state = torch.zeros(b, h, p, n, dtype=torch.float64) if initial is None else initial.double()
    y = torch.zeros(b, s, h, p, dtype=torch.float64)
    for t in range(s):
        decay = (d[:, t].double() * a.double()).exp()[:, :, None, None]
        inp = weight[:, t, :, None, None] * x[:, t].double()[..., None] * bm[:, t].double()[:, group, None, :]
        state = decay * state + inp
        y[:, t] = (state * cm[:, t].double()[:, group, None, :]).sum(-1)
    return y, state


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("with_bias,with_initial,dt_softplus", [(False, False, True), (True, True, True),
                                                                (True, False, False)])
def test_mamba2_forward_is_the_token_by_token_recurrence(dtype, with_bias, with_initial, dt_softplus):
    torch.manual_seed(0)
    b, s, h, p, g, n, chunk = 2, 12, 4, 3, 2, 5, 4
    x = torch.randn(b, s, h, p, dtype=dtype)
    dt = torch.randn(b, s, h) * 0.5
    a = -torch.rand(h) - 0.2
    bm, cm = torch.randn(b, s, g, n, dtype=dtype), torch.randn(b, s, g, n, dtype=dtype)
    dt_bias = torch.rand(h) * 0.3 if with_bias else None
    initial = torch.randn(b, h, p, n) if with_initial else None
    y, final = Mamba2FwdOp(chunk_size=chunk, dt_softplus=dt_softplus)(x, dt, a, bm, cm, dt_bias, initial)
    assert y.dtype == final.dtype == torch.float32 and y.shape == (b, s, h, p) and final.shape == (b, h, p, n)
    want_y, want_final = float64_mamba2(x, dt, a, bm, cm, dt_bias, initial, dt_softplus)
    # cb is rounded to x's dtype (TileOPs' pipeline): bf16 carries 2^-8 relative on every coupling
    tol = 1e-2 if dtype == torch.float16 else 5e-2
    torch.testing.assert_close(y.double(), want_y, rtol=tol, atol=tol)
    torch.testing.assert_close(final.double(), want_final, rtol=1e-4, atol=1e-4)


def test_mamba2_chunk_size_changes_nothing_but_rounding():
    torch.manual_seed(1)
    x = torch.randn(1, 16, 2, 4, dtype=torch.float16)
    args = (x, torch.randn(1, 16, 2), -torch.rand(2), torch.randn(1, 16, 1, 8, dtype=torch.float16),
            torch.randn(1, 16, 1, 8, dtype=torch.float16))
    y4, f4 = ops.mamba_mamba2_fwd(*args, None, None, chunk_size=4)
    y16, f16 = ops.mamba_mamba2_fwd(*args, None, None, chunk_size=16)
    torch.testing.assert_close(y4, y16, rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(f4, f16, rtol=1e-5, atol=1e-5)


def test_mamba2_traces_into_its_five_stages():
    torch._dynamo.reset()
    graphs = []

    def fw_compiler(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    op = Mamba2FwdOp(chunk_size=4)
    args = (torch.randn(2, 8, 4, 3, dtype=torch.bfloat16), torch.randn(2, 8, 4), -torch.rand(4),
            torch.randn(2, 8, 2, 5, dtype=torch.bfloat16), torch.randn(2, 8, 2, 5, dtype=torch.bfloat16),
            torch.rand(4), torch.randn(2, 4, 3, 5))
    fn = torch.compile(lambda *a: op(*a), fullgraph=True, backend=aot_autograd(fw_compiler=fw_compiler))
    got, want = fn(*args), op(*args)
    for g_, w in zip(got, want):
        assert torch.equal(g_, w)
    targets = [str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"]
    for stage in ("mamba_da_cumsum_fwd", "mamba_cb_producer_fwd", "mamba_ssd_chunk_state_fwd",
                  "mamba_ssd_state_passing_fwd", "mamba_ssd_chunk_scan_fwd"):
        assert f"tileops.{stage}.default" in targets, targets
    assert not any("mamba2" in t for t in targets), targets
    assert op.compile_op_names == ()


def test_mamba2_checks_name_the_composite():
    x = torch.randn(1, 6, 2, 3, dtype=torch.float16)
    b_ = torch.randn(1, 6, 1, 4, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"tileops::mamba_mamba2_fwd: .*S % chunk_size == 0"):
        ops.mamba_mamba2_fwd(x, torch.randn(1, 6, 2), -torch.rand(2), b_, b_, None, None, chunk_size=4)
    with pytest.raises(ValueError, match=r"tileops::mamba_mamba2_fwd: .*H % G == 0"):
        bad = torch.randn(1, 6, 3, 4, dtype=torch.float16)
        ops.mamba_mamba2_fwd(x, torch.randn(1, 6, 2), -torch.rand(2), bad, bad, None, None, chunk_size=3)
    with pytest.raises(TypeError, match=r"tileops::mamba_mamba2_fwd: 'dt' must have dtype float32"):
        ops.mamba_mamba2_fwd(x, torch.randn(1, 6, 2).half(), -torch.rand(2), b_, b_, None, None, chunk_size=3)
