"""Persistent staged rows on the GPU: a CTA walks several rows with the next row's bulk copy in
flight (src/kernels/common/bulk_copy.cuh RowStager). The walk only starts when rows outnumber the
CTAs that fit the SMs and is off by default, so a child process turns it on
(TILEOPS_STAGED_WALK=1), pins the grid to one CTA an SM (TILEOPS_STAGED_WALK_CTAS_PER_SM=1: 8 rows a
CTA for 1000 rows, both slots reused many times),
stages every row op of 8 KB and more (TILEOPS_STAGED_MIN_ROW_BYTES, read once a process), once with
LayerNorm's default variant and once with the other, then checks each op against a float64 reference.
That the walk was planned is read from the build's debug log; that a launch then used its grid
rests on the host code and the StagedWalk gtests (the results would be right either way).
Skipped without a GPU (conftest)."""
import os
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.gpu
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def child():
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import tileops
    from support.reference import assert_close_rel, rms_norm_ref

    tileops.load()
    ops = torch.ops.tileops
    torch.manual_seed(0)
    for dtype, n in [(torch.bfloat16, 8192), (torch.bfloat16, 4104), (torch.float32, 4100)]:
        for m in [1000, 133, 1]:  # 133 on 132 CTAs: 67 CTAs of 2 rows (the last of 1)
            x = torch.randn(m, n, device="cuda", dtype=dtype) * 2 + 1
            w = torch.randn(n, device="cuda", dtype=dtype)
            b = torch.randn(n, device="cuda", dtype=dtype)
            assert_close_rel(ops.norm_rms_norm_fwd(x, w, [n]), rms_norm_ref(x, [n], w))
            assert_close_rel(ops.norm_rms_norm_fwd(x, None, [n]), rms_norm_ref(x, [n]))
            ln = torch.nn.functional.layer_norm(x.double(), [n], w.double(), b.double()).to(dtype)
            assert_close_rel(ops.norm_layer_norm_fwd(x, w, b, [n]), ln)
            assert_close_rel(ops.reduction_softmax_fwd(x, -1), torch.softmax(x.double(), -1).to(dtype))
            assert_close_rel(ops.reduction_log_softmax_fwd(x, -1), torch.log_softmax(x.double(), -1).to(dtype))
            r = torch.randn(m, n, device="cuda", dtype=dtype)
            s = x + r
            y, r_new = ops.norm_fused_add_rms_norm_fwd(x, r, w, [n])
            assert torch.equal(r_new, s)
            assert_close_rel(y, rms_norm_ref(s, [n], w))
            ops.norm_fused_add_rms_norm_fwd_writes_residual(x, r, w, [n])  # in place: the walk's
            assert torch.equal(r, s)                                         # next rows are not yet written
    # Replays of a captured walk see new inputs.
    x = torch.randn(1000, 8192, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(8192, device="cuda", dtype=torch.bfloat16)
    ops.norm_rms_norm_fwd(x, w, [8192])
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = ops.norm_rms_norm_fwd(x, w, [8192])
    x.copy_(torch.randn_like(x))
    g.replay()
    torch.cuda.synchronize()
    assert_close_rel(out, rms_norm_ref(x, [8192], w))
    print("staged walks ok")


# LayerNorm's default staged variant (one pass for bfloat16, weight/bias read in the output pass),
# and the other one (two passes, weight/bias in registers).
@pytest.mark.parametrize("ln_knobs", [{}, {"TILEOPS_LN_ONE_PASS": "0", "TILEOPS_LN_CACHE_AFFINE": "1"}],
                         ids=["ln-default", "ln-two-pass-cached"])
def test_every_staged_row_op_walks_rows_correctly(tmp_path, ln_knobs):
    env = dict(os.environ, TILEOPS_STAGED_WALK="1", TILEOPS_STAGED_WALK_CTAS_PER_SM="1",
               TILEOPS_STAGED_MIN_ROW_BYTES="8192", TILEOPS_LOG_LEVEL="debug", TILEOPS_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.path.join(ROOT, "python"), **ln_knobs)
    run = subprocess.run([sys.executable, os.path.abspath(__file__)], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0 and "staged walks ok" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
    walks = [line for line in (run.stdout + run.stderr).splitlines() if "walks rows: up to" in line]
    for kernel in ["rms_norm_fwd__", "fused_add_rms_norm_fwd__", "layer_norm_fwd__", "softmax_fwd__", "log_softmax_fwd__"]:
        kernel = "tileops: " + kernel
        assert any(kernel in line for line in walks), (kernel, walks)  # the walk was planned, not skipped
    assert all(line.rstrip().endswith(" CTAs") and " up to 0 " not in line for line in walks), walks


def test_many_staged_rows_match_float64():
    """6000 staged rows of 8 KB, more than fit the SMs at once, with the defaults (no walk)."""
    from support.reference import assert_close_rel

    x = torch.randn(6000, 4104, device="cuda", dtype=torch.bfloat16) * 2 + 1
    w = torch.randn(4104, device="cuda", dtype=torch.bfloat16)
    ln = torch.nn.functional.layer_norm(x.double(), [4104], w.double()).to(torch.bfloat16)
    assert_close_rel(torch.ops.tileops.norm_layer_norm_fwd(x, w, None, [4104]), ln)
    assert_close_rel(torch.ops.tileops.reduction_softmax_fwd(x, -1), torch.softmax(x.double(), -1).to(torch.bfloat16))


if __name__ == "__main__":
    child()
