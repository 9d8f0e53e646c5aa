"""The offline warm-up from the manifests' workloads, as a deployment image build runs it: no GPU
(CUDA_VISIBLE_DEVICES=""), NVRTC only, for a named device."""
import os
import subprocess
import sys
import time
import urllib.parse

import pytest

from tileops import warmup

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), CUDA_VISIBLE_DEVICES="")
# Compiling every workload's kernels takes minutes here; these cover a row norm, a split softmax,
# batch norm's one-launch kernels and its statistics and merge. The other ops' calls are planned (all
# of them, below), which is the part that differs.
OPS = ("RMSNormFwdOp", "SoftmaxFwdOp", "BatchNormFwdOp")


def warm(*args):
    return subprocess.run([sys.executable, "-m", "tileops.warmup", "--workloads", *map(str, args)],
                          capture_output=True, text=True, env=ENV, timeout=900)


def kernel_names(lines):
    return sorted(urllib.parse.unquote(ln.split(" name=", 1)[1].split(" ", 1)[0]) for ln in lines)


def test_every_workload_call_plans_on_named_devices():
    for device in ("h200", "a100"):
        lines = warmup.plan_workloads((device,))
        assert lines, device
        assert all(f" arch={'sm_90a' if device == 'h200' else 'sm_80'} " in ln for ln in lines), device
    # An arch plans for its usual device; the plans of two devices differ (arch, SM count, smem).
    assert warmup.plan_workloads(("sm_90a",), OPS) == warmup.plan_workloads(("h200",), OPS)
    assert kernel_names(warmup.plan_workloads(("h200",), OPS)) != kernel_names(warmup.plan_workloads(("a100",), OPS))


def test_ops_served_by_the_reference_on_cuda_have_nothing_to_plan():
    with pytest.raises(ValueError, match=r"BmmFwdOp run on CUDA through the reference target \(ATen\)"):
        warmup.plan_workloads(("h200",), ("BmmFwdOp",))
    assert not [ln for ln in warmup.plan_workloads(("h200",)) if "bmm" in ln]


def test_workload_warmup_fills_an_image_cache_for_sm_90a_without_a_gpu(tmp_path):
    image = tmp_path / "image"
    t0 = time.monotonic()
    r = warm("--device", "h200", *[a for op in OPS for a in ("--op", op)], "--cache-dir", image)
    seconds = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    planned = kernel_names(warmup.plan_workloads(("h200",), OPS))
    n = len(planned)
    assert f"{n} kernels: {n} compiled, 0 already present, 0 failed" in r.stdout, r.stdout
    # One CUBIN per planned kernel, filed under its disk key (name, then the hash of its source).
    entries = sorted(p.name for p in image.iterdir())
    assert len(entries) == n and all(e.endswith(".cubin") for e in entries), entries
    assert sorted(next(k for k in planned if e.startswith(k + "-")) for e in entries) == planned, entries
    print(f"\nworkload warm-up of {', '.join(OPS)} for h200: {n} kernels in {seconds:.1f} s")
    again = warm("--arch", "sm_90a", "--op", "RMSNormFwdOp", "--cache-dir", image)
    assert again.returncode == 0 and " 0 compiled, " in again.stdout and "0 failed" in again.stdout, again.stdout


@pytest.mark.parametrize("args,message", [
    (("--device", "h300"), "--device/--arch h300: tileops: no facts for device 'h300'; known: h100, sm_90a, h200"),
    (("--arch", "sm_75"), "--device/--arch sm_75: tileops: no facts for device 'sm_75'"),
    (("--device", "h200", "--op", "NoSuchOp"), "no workloads for op NoSuchOp (ops with workloads: "),
])
def test_unknown_device_arch_or_op_is_refused(tmp_path, args, message):
    r = warm(*args, "--cache-dir", tmp_path / "image")
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert not (tmp_path / "image").exists()


def test_workloads_need_a_device_and_record_options_stay_apart(tmp_path):
    r = warm("--cache-dir", tmp_path / "image")
    assert r.returncode == 2 and "--workloads needs at least one --device or --arch" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "tileops.warmup", "--record", tmp_path / "k.rec", "--device", "h200",
                        "--cache-dir", tmp_path / "image"], capture_output=True, text=True, env=ENV)
    assert r.returncode == 2 and "--device and --op go with --workloads" in r.stderr, r.stderr


def test_decode_and_prefill_workloads_plan_their_own_row_layouts():
    # A call's row count picks the layout of the RMSNorm register rows (few rows: wider, so the
    # float32 weight loads with x): the manifest's decode (1 row) and prefill (2048) workloads of the
    # Gemma form plan two kernels of the same row length.
    names = kernel_names(warmup.plan_workloads(("h200",), ("GemmaRMSNormFwdOp",)))
    n3584 = [k for k in names if "__n3584__" in k]
    assert len(n3584) == 2 and any("_t256_" in k for k in n3584) and any("_t64_" in k for k in n3584), names


def test_pool_workloads_of_vector_rows_plan_the_wide_kernel():
    # Windows whose neighbouring outputs share one 16-byte vector of a row (rows of whole vectors,
    # kernel - padding - stride below a vector; large calls where windows share no tap) take
    # pool_fwd_wide, a "__w<P>" kernel; the others the thread-an-output kernel.
    names = kernel_names(warmup.plan_workloads(("h200",), ("AvgPool1dFwdOp", "AvgPool2dFwdOp", "AvgPool3dFwdOp")))
    wide = sorted(k for k in names if "__w" in k)
    assert any(k.startswith("avg_pool1d_fwd__f16__i32__t256__w4__k3s2p1d1__") for k in wide), names  # audio-downsample
    assert any(k.startswith("avg_pool1d_fwd__f16__i32__t256__w2__k5s4p2d1__") for k in wide), names  # long-temporal
    assert any(k.startswith("avg_pool1d_fwd__bf16__i32__t256__w4__k4s2p1d1__") for k in wide), names  # ceil, a tap past
    assert any(k.startswith("avg_pool2d_fwd__f16__i32__t256__w4__k3x3s2x2p1x1d1x1__") for k in wide), names
    # rows of 57 and 22 elements are not whole vectors
    assert any(k.startswith("avg_pool2d_fwd__bf16__") and "__w" not in k for k in names), names
    assert not any(k.startswith("avg_pool3d_fwd__bf16__") and "__w" in k for k in names), names
    # 2x2x2 / 2 windows share no tap: 50176 work items of 4 outputs are too few (video-2x2x2), where
    # VGG's 2x2 / 2 max pool has 401408 in 16 bits
    assert any(k.startswith("avg_pool3d_fwd__f16__i32__t256__k2x2x2s2x2x2p0x0x0d1x1x1__") for k in names), names
    max2 = kernel_names(warmup.plan_workloads(("h200",), ("MaxPool2dFwdOp",)))
    assert any(k.startswith("max_pool2d_fwd__f16__i32__t256__w4__k2x2s2x2p0x0d1x1__") for k in max2), max2
