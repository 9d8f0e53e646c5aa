"""Who serves each op when a call names no target (docs/CONTRACT.md §6): op_table()'s "serving"
and the pending list."""
import os
import subprocess
import sys

import tileops

# Ops whose CUDA calls run on the reference (ATen) because no verified kernel of ours exists yet.
REFERENCE_ON_CUDA = {"BmmFp8FwdOp", "CBProducerFwdOp", "DeltaNetDecodeFwdOp", "GatedDeltaNetDecodeFwdOp",
                     "GLADecodeFwdOp", "GatedDeltaNetPrefillBTHDFwdOp",
                     "GatedDeltaNetPrefillBHTDFwdOp", "GLAFwdOp", "TopkSelectorFwdOp", "RopeNeoxPositionIdsFwdOp", "DaCumsumFwdOp", "SSDChunkStateFwdOp",
                     "SSDStatePassingFwdOp", "SSDChunkScanFwdOp", "SSDDecodeFwdOp",
                     "MultiHeadAttentionDecodePagedWithKVCacheFwdOp",
                     "MultiHeadAttentionFwdOp", "MultiHeadAttentionBwdOp",
                     "GroupedQueryAttentionBwdOp", "GroupedQueryAttentionSlidingWindowVarlenFwdOp",
                     "GroupedQueryAttentionFwdOp", "GroupedQueryAttentionSlidingWindowFwdOp",
                     "MoePermuteAlignFwdOp", "MoePermuteNopadFwdOp", "MoeUnpermuteFwdOp",
                     "FusedMoEExpertsNopadPersistent3WGFwdOp",
                     "FusedMoeFwdOp", "EngramGateConvFwdOp", "EngramGateConvBwdOp", "EngramDecodeFwdOp",
                     "FFTC2CFwdOp", "MHCPreFwdOp", "MHCPostFwdOp", "Conv1dFwdOp", "Conv2dFwdOp", "Conv3dFwdOp",
                     "BmmFp8KNFwdOp", "BmmFp8NKFwdOp",
                     "RopeNeoxFwdOp", "RopeNonNeoxFwdOp", "RopeLlama31FwdOp", "RopeYarnFwdOp", "RopeLongRopeFwdOp",
                     "GatedDeltaNetBHTDFwdOp", "GatedDeltaNetBTHDFwdOp", "GatedDeltaNetBwdOp", "DeltaNetFwdOp",
                     "DeltaNetBwdOp", "GLABwdOp",
                     "GroupedQueryAttentionPrefillFwdOp", "GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp",
                     "DeepSeekSparseAttentionDecodeWithKVCacheFwdOp", "FP8LightningIndexerFwdOp"}


CUBLASLT_ON_CUDA = {"GemmFwdOp", "BmmFwdOp", "GroupedGemmFwdOp", "MoeGroupedGemmNopadFwdOp", "MoeGateUpFwdOp"}


def test_every_op_with_a_boundary_is_served_on_cpu_and_cuda():
    table = tileops.op_table()
    for e in (e for e in table if e["has_boundary"]):
        assert e["serving"]["cpu"] == "reference", e["class"]
        assert e["serving"]["cuda"] in ("nvrtc", "cublaslt", "reference"), e["class"]
        if e["class"] in CUBLASLT_ON_CUDA:  # served by cuBLASLt whatever nvrtc has pending
            assert e["serving"]["cuda"] == "cublaslt", e["class"]
            continue
        # the reference serves CUDA only where nvrtc has no verified kernel
        assert (e["serving"]["cuda"] == "reference") == (e["class"] in REFERENCE_ON_CUDA or
                                                       "nvrtc" in e["serving"]["pending"])


def test_pending_module_prints_the_pending_list():
    python_dir = os.path.dirname(os.path.dirname(tileops.__file__))  # a checkout's python/, unless installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([python_dir, os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-m", "tileops.pending"], capture_output=True, text=True, check=True, env=env)
    assert r.stdout.splitlines() == ([f"{c}\t{t}" for c, t in tileops.pending()] +
                                     [f"{c}\tnvrtc\t{s}" for c, s in tileops.pending_tuning()])


def test_ops_md_says_what_the_registry_says():
    # build/generated/docs/OPS.md is generated from the targets' kernel lines; the registry is what runs.
    path = os.path.join(os.path.dirname(tileops.library_path()), "generated", "docs", "OPS.md")
    rows = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            cells = [c.strip() for c in line.split("|")[1:-1]]
            if len(cells) == 8 and cells[0].endswith("Op"):
                rows[cells[0]] = (cells[3], cells[4])
    for e in tileops.op_table():
        if e["has_boundary"]:
            cuda, pending = e["serving"]["cuda"], [t for t in ("nvrtc", "cublaslt") if t in e["serving"]["pending"]]
            if cuda == "reference" and pending:
                cuda += f" ({', '.join(pending)} pending)"
            assert rows[e["class"]] == (e["serving"]["cpu"], cuda), e["class"]


def test_gemm_is_served_by_cublaslt_and_fp8_gemm_by_nvrtc():
    serving = {e["class"]: e["serving"] for e in tileops.op_table()}
    for cls in sorted(CUBLASLT_ON_CUDA):
        # MoE's one-launch grouped GEMM and gate-up (runs read on the device) wait for their GPU run
        pending = ["nvrtc"] if cls in ("MoeGroupedGemmNopadFwdOp", "MoeGateUpFwdOp") else []
        assert serving[cls] == {"cpu": "reference", "cuda": "cublaslt", "pending": pending}, cls
    # block scales on nvrtc's tensor-core kernel; it declines per-tensor ones to cuBLASLt, a backstop
    assert serving["GemmFp8FwdOp"] == {"cpu": "reference", "cuda": "nvrtc", "pending": []}
    # W4A16: nvrtc's decode kernel, declining prefill sizes to cuBLASLt (one dequantising pass, one GEMM)
    assert serving["GemmW4A16FwdOp"] == {"cpu": "reference", "cuda": "nvrtc", "pending": []}
    # the fused MoE layers on cuBLASLt (both GEMMs a run an expert) wait for their GPU run
    assert sorted(p for p in tileops.pending() if p[1] == "cublaslt") == [
        ("FusedMoEExpertsNopadPersistent3WGFwdOp", "cublaslt"), ("FusedMoeFwdOp", "cublaslt")]
