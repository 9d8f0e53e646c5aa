"""On a GPU: a real run records its kernels, the warm-up replays the record with NVRTC only, and a
cold process pointed at the result (TILEOPS_CACHE_DIR_READONLY) compiles nothing."""
import json
import os
import subprocess
import sys

import pytest

from tileops import warmup

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# First call of each op, timed in a fresh process (module load included), then the counters.
RUN = r"""
import json, time, torch, tileops
tileops.load()
ops = torch.ops.tileops
x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
g = torch.randn(64, 2 * 4096, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
first_ms = {}
for name, call in (("norm_rms_norm_fwd", lambda: ops.norm_rms_norm_fwd(x, w, [4096])),
                   ("activation_silu_and_mul_fwd", lambda: ops.activation_silu_and_mul_fwd(g)),
                   ("reduction_softmax_fwd", lambda: ops.reduction_softmax_fwd(x, -1))):
    t0 = time.perf_counter()
    call()
    torch.cuda.synchronize()
    first_ms[name] = (time.perf_counter() - t0) * 1e3
print(json.dumps({"first_ms": first_ms, "counters": tileops.counters()}))
"""


def run(env):
    r = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), **env))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.gpu
def test_cold_process_on_a_warmed_image_cache_compiles_nothing(tmp_path):
    record, image = tmp_path / "kernels.rec", tmp_path / "image"
    cold = run({"TILEOPS_CACHE_DIR": str(tmp_path / "user1"), "TILEOPS_RECORD_KERNELS": str(record)})
    assert cold["counters"]["nvrtc_compiles"] >= 3, cold
    assert len(record.read_text().splitlines()) == cold["counters"]["nvrtc_compiles"]

    # The warm-up sees no GPU: NVRTC only.
    r = subprocess.run([sys.executable, "-m", "tileops.warmup", "--record", str(record), "--cache-dir", str(image)],
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), CUDA_VISIBLE_DEVICES=""))
    assert r.returncode == 0, r.stderr

    warm = run({"TILEOPS_CACHE_DIR": str(tmp_path / "user2"), "TILEOPS_CACHE_DIR_READONLY": str(image)})
    assert warm["counters"]["nvrtc_compiles"] == 0, warm
    assert warm["counters"]["disk_cache_hits"] == cold["counters"]["nvrtc_compiles"], warm
    assert not (tmp_path / "user2").exists() or not any((tmp_path / "user2").glob("*.cubin"))
    print("\nfirst call, cold process: cold compile", json.dumps(cold["first_ms"]),
          "| warmed image cache", json.dumps(warm["first_ms"]))
    for name, ms in warm["first_ms"].items():
        assert ms < cold["first_ms"][name], (name, warm, cold)


# First call of each op at a manifest workload shape (norm.yaml llama-8b-prefill, activation.yaml
# llama-8b-mlp-prefill, reduction.yaml lm-head-logits), timed in a fresh process, then the counters.
RUN_WORKLOADS = r"""
import json, time, torch, tileops
tileops.load()
ops = torch.ops.tileops
x = torch.randn(2048, 4096, device="cuda", dtype=torch.bfloat16)
w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
g = torch.randn(2048, 28672, device="cuda", dtype=torch.bfloat16)
s = torch.randn(4, 128256, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
first_ms = {}
for name, call in (("norm_rms_norm_fwd", lambda: ops.norm_rms_norm_fwd(x, w, [4096])),
                   ("activation_silu_and_mul_fwd", lambda: ops.activation_silu_and_mul_fwd(g)),
                   ("reduction_softmax_fwd", lambda: ops.reduction_softmax_fwd(s, -1))):
    t0 = time.perf_counter()
    call()
    torch.cuda.synchronize()
    first_ms[name] = (time.perf_counter() - t0) * 1e3
print(json.dumps({"first_ms": first_ms, "counters": tileops.counters()}))
"""

# Names of tileops' device table (src/targets/nvrtc/device_facts.cpp) by the GPU's marketing name.
DEVICE_NAMES = (("H200", "h200"), ("H100", "h100"), ("A100", "a100"), ("L40S", "l40s"), ("A10", "a10"))


@pytest.mark.gpu
def test_cold_process_on_a_cache_warmed_from_workloads_compiles_nothing(tmp_path):
    import torch
    gpu = torch.cuda.get_device_name()
    device = next((n for marker, n in DEVICE_NAMES if marker in gpu), None)
    if device is None:
        pytest.skip(f"no named device facts for {gpu}")
    image = tmp_path / "image"
    # The warm-up sees no GPU: the plan uses the named device's facts, NVRTC compiles.
    r = subprocess.run([sys.executable, "-m", "tileops.warmup", "--workloads", "--device", device,
                        "--op", "RMSNormFwdOp", "--op", "SiluAndMulFwdOp", "--op", "SoftmaxFwdOp",
                        "--cache-dir", str(image)],
                       capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), CUDA_VISIBLE_DEVICES=""))
    assert r.returncode == 0, r.stderr
    print("\n" + r.stdout.strip())

    def run_workloads(env):
        p = subprocess.run([sys.executable, "-c", RUN_WORKLOADS], capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), **env))
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout.strip().splitlines()[-1])

    warm = run_workloads({"TILEOPS_CACHE_DIR": str(tmp_path / "user"), "TILEOPS_CACHE_DIR_READONLY": str(image)})
    print("first call at workload shapes, cache warmed from workloads without a GPU:", json.dumps(warm["first_ms"]))
    assert warm["counters"]["nvrtc_compiles"] == 0, warm
    assert warm["counters"]["disk_cache_hits"] >= 3, warm
    assert not (tmp_path / "user").exists() or not any((tmp_path / "user").glob("*.cubin"))
    # The 2 ms goal for a first call is not met yet for the process's first op (H200: RMSNorm 2.45 ms,
    # then SiLU-and-mul 1.38 ms): reported as an expected failure, not passed.
    slow = {name: round(ms, 2) for name, ms in warm["first_ms"].items() if ms > 2.0}
    if slow:
        pytest.xfail(f"first call over 2 ms on a warmed cache: {slow}")
