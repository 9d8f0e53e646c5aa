"""The peer libraries the benchmarks put beside ours: flashinfer (header-only CUDA kernels, called
through a small torch extension built here, scripts/bench/peers/flashinfer_ext.cu) and Liger-Kernel
(Triton). Both come from an installed package or from .deps/peers (scripts/prepare_gpu_deps.sh
--peers); a peer that is missing gives no column, and the table says so.
"""
from __future__ import annotations

import functools
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEPS = os.path.join(ROOT, ".deps", "peers")


def _flashinfer_include() -> list[str] | None:
    """flashinfer's include folder and the CCCL it ships (cuda/cmath's fast_mod_div is newer than
    the toolkit's): from an installed flashinfer-python's package data, else from .deps/peers."""
    roots = [(os.path.join(DEPS, "flashinfer", "include"), os.path.join(DEPS, "flashinfer", "cccl", "libcudacxx"),
              os.path.join(DEPS, "flashinfer", "cccl", "cub"), os.path.join(DEPS, "flashinfer", "cccl", "thrust"))]
    try:
        import importlib.util
        spec = importlib.util.find_spec("flashinfer")
        if spec and spec.submodule_search_locations:
            data = os.path.join(list(spec.submodule_search_locations)[0], "data")
            roots.insert(0, (os.path.join(data, "include"), os.path.join(data, "cccl", "libcudacxx", "include"),
                             os.path.join(data, "cccl", "cub"), os.path.join(data, "cccl", "thrust")))
    except (ImportError, ValueError):
        pass
    for paths in roots:
        if all(os.path.isdir(p) for p in paths):
            return [paths[1], paths[2], paths[3], paths[0]]
    return None


# torch's extension build hides the half/bfloat16 operators that flashinfer's headers use.
UNDEF_TORCH_HALF = [f"-U__CUDA_NO_{x}__" for x in ("HALF_OPERATORS", "HALF_CONVERSIONS", "BFLOAT16_CONVERSIONS",
                                                    "HALF2_OPERATORS")]


@functools.cache
def flashinfer():
    """The extension module, or None (with the reason printed once) where it cannot be built."""
    inc = _flashinfer_include()
    if inc is None or not torch.cuda.is_available():
        print("peers: " + ("no GPU" if inc else "flashinfer headers not found") + "; no flashinfer column")
        return None
    major, minor = torch.cuda.get_device_capability()
    try:
        return build_flashinfer(inc, f"{major}{minor}" + ("a" if major >= 9 else ""))
    except Exception as e:  # a compiler error is a missing column, not a failed benchmark run
        print(f"peers: flashinfer extension failed to build ({type(e).__name__}: {str(e)[-400:]})")
        return None


def build_flashinfer(inc: list[str], arch: str):
    """Builds (or reuses) the extension for one arch, e.g. '90a'; needs nvcc, not a GPU."""
    from torch.utils.cpp_extension import load
    flags = ["-O3", "-std=c++20", "--expt-relaxed-constexpr", "-DENABLE_BF16", "-DENABLE_FP8", *UNDEF_TORCH_HALF,
             f"-gencode=arch=compute_{arch},code=sm_{arch}", *_cublas_headers()]
    return load(name="tileops_bench_flashinfer", sources=[os.path.join(HERE, "peers", "flashinfer_ext.cu")],
                extra_include_paths=inc, extra_cuda_cflags=flags, build_directory=_build_dir(), verbose=False)


def _cublas_headers() -> list[str]:
    """flashinfer's norm.cuh includes cublasLt.h: where the toolkit lacks it, the headers of the
    nvidia wheels beside torch, searched after every other folder."""
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    if os.path.exists(os.path.join(cuda_home, "include", "cublasLt.h")):
        return []
    try:
        import nvidia
        for base in nvidia.__path__:
            for sub in ("cu13", "cu12", "cublas"):
                inc = os.path.join(base, sub, "include")
                if os.path.exists(os.path.join(inc, "cublasLt.h")):
                    return ["-Xcompiler", f"-idirafter{inc}"]
    except ImportError:
        pass
    return []


def _build_dir() -> str:
    d = os.path.join(ROOT, "build", "bench-flashinfer")
    os.makedirs(d, exist_ok=True)
    return d


@functools.cache
def liger():
    """The liger_kernel.ops modules the benchmarks call, or None where Liger-Kernel (or Triton) is not importable."""
    site = os.path.join(DEPS, "site")
    if os.path.isdir(site) and site not in sys.path:
        sys.path.append(site)
    try:
        import importlib
        import types
        names = ("rms_norm", "fused_add_rms_norm", "layer_norm", "swiglu", "rope", "softmax")
        return types.SimpleNamespace(**{n: importlib.import_module(f"liger_kernel.ops.{n}") for n in names})
    except Exception as e:
        print(f"peers: Liger-Kernel not importable ({type(e).__name__}: {e}); no liger column")
        return None


def versions() -> dict:
    out = {}
    path = os.path.join(DEPS, "VERSIONS")
    if os.path.exists(path):
        for item in open(path).read().split():
            name, _, ver = item.partition("==")
            out[name] = ver
    return out


# Factories {label: make(i) -> callable} of the peers that have an op, for harness.measure; each call
# is what that library's Python API does for it (outputs allocated per call, as ours are).

def rms_norm(xs, w, eps: float) -> dict:
    out = {}
    if (fi := flashinfer()) is not None:
        def f(i):
            return lambda: fi.rmsnorm(torch.empty_like(xs[i]), xs[i], w, eps, False)
        out["flashinfer"] = f
    if (lg := liger()) is not None:
        def g(i):
            return lambda: lg.rms_norm.rms_norm_forward(xs[i], w, eps, 0.0, "llama", None)
        out["liger"] = g
    return out


def fused_add_rms_norm(xs, rs, w, eps: float) -> dict:
    """flashinfer writes x and residual in place (as ours _writes_residual); Liger returns new tensors."""
    out = {}
    if (fi := flashinfer()) is not None:
        def f(i):
            return lambda: fi.fused_add_rmsnorm(xs[i], rs[i], w, eps, False)
        out["flashinfer"] = f
    if (lg := liger()) is not None:
        def g(i):
            return lambda: lg.fused_add_rms_norm.fused_add_rms_norm_forward(xs[i], rs[i], w, eps, 0.0, "llama")
        out["liger"] = g
    return out


def layer_norm(xs, w, b, eps: float) -> dict:
    """flashinfer's LayerNorm takes float32 weight and bias (its API requires them)."""
    out = {}
    if (fi := flashinfer()) is not None:
        wf, bf = w.float(), b.float()

        def f(i):
            return lambda: fi.layernorm(torch.empty_like(xs[i]), xs[i], wf, bf, eps)
        out["flashinfer"] = f
    if (lg := liger()) is not None:
        def g(i):
            return lambda: lg.layer_norm.layer_norm_forward(xs[i], w, b, eps)
        out["liger"] = g
    return out


def silu_and_mul(xs) -> dict:
    out = {}
    if (fi := flashinfer()) is not None:
        def f(i):
            x = xs[i]
            return lambda: fi.silu_and_mul(x.new_empty(*x.shape[:-1], x.shape[-1] // 2), x)
        out["flashinfer"] = f
    if (lg := liger()) is not None:
        def g(i):
            return lambda: lg.swiglu.swiglu_fused_gate_up_forward(xs[i])
        out["liger"] = g
    return out


def rope(ps, qs, ks, cache, neox: bool) -> dict:
    """In place on q [t, hq, d] and k [t, hk, d], positions into a float32 [max_pos, rot] cos|sin
    cache: flashinfer's apply_rope_with_cos_sin_cache_inplace. Liger's rope_forward takes HF's
    layout instead (q, k as [batch, heads, seq, d] views, cos and sin [batch, seq, d] gathered by
    position beforehand, outside the timing) and neox style only."""
    out = {}
    if (fi := flashinfer()) is not None and cache.dtype == torch.float32:
        d = qs[0].shape[-1]

        def f(i):
            q2, k2 = qs[i].view(qs[i].shape[0], -1), ks[i].view(ks[i].shape[0], -1)
            return lambda: fi.rope_cos_sin_cache(ps[i], q2, k2, d, cache, neox)
        out["flashinfer"] = f
    if (lg := liger()) is not None and neox and cache.shape[1] == qs[0].shape[-1]:
        rot = cache.shape[1]
        cos = [torch.cat([cache[p, : rot // 2]] * 2, -1).to(qs[0].dtype)[None] for p in ps]
        sin = [torch.cat([cache[p, rot // 2:]] * 2, -1).to(qs[0].dtype)[None] for p in ps]

        def g(i):
            q4, k4 = qs[i][None].transpose(1, 2), ks[i][None].transpose(1, 2)
            return lambda: lg.rope.rope_forward(q4, k4, cos[i], sin[i])
        out["liger"] = g
    return out


def softmax(xs) -> dict:
    """flashinfer has no plain softmax over a row; Liger's."""
    if (lg := liger()) is None:
        return {}
    return {"liger": lambda i: (lambda: lg.softmax._softmax_forward(xs[i]))}
