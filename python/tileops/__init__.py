"""libtileops from Python: load the library, inspect targets and counters, and the Op-class view.

    import tileops
    tileops.load()                                   # torch.ops.tileops.* become available
    from tileops.norm import RMSNormFwdOp
    op = RMSNormFwdOp(normalized_shape=(4096,))      # construct once, reuse
    y = op(x, weight)                                # one graph node under torch.compile
"""
from __future__ import annotations

import ctypes
import json
import mmap
import os
from pathlib import Path

# `import tileops` before torch: our `import torch` below runs torch's backend autoload, which calls
# _autoload() while this module is half-built; it then only notes the request, done at the end.
_importing = True
_autoload_pending = False


def _autoload() -> None:
    """Entry point in torch's `torch.backends` group (pyproject.toml): `import torch` loads the
    library in every process where the wheel is installed; TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns it off."""
    global _autoload_pending
    if _importing:
        _autoload_pending = True
        return
    load()


import torch  # noqa: E402

__all__ = ["load", "load_backend", "library_path", "build_record", "check_torch_abi", "counters", "reset_counters", "clear_kernel_caches",
           "target_names", "set_default_target", "default_target", "op_table", "pending", "pending_tuning", "enable_autograd",
           "autograd_enabled",
           "patch", "unpatch", "patched"]

_lib: ctypes.CDLL | None = None
_lib_path: str | None = None


def _candidates():
    env = os.environ.get("TILEOPS_LIBRARY")
    if env:
        yield Path(env)
    here = Path(__file__).resolve().parent
    yield here / "libtileops.so"                     # installed next to the package
    yield here.parent.parent / "build" / "libtileops.so"  # source checkout: python/tileops -> build/


def library_path() -> str:
    for c in _candidates():
        if c.is_file():
            return str(c)
    tried = ", ".join(str(c) for c in _candidates())
    raise FileNotFoundError(f"tileops: libtileops.so not found (tried {tried}); build it with scripts/setup.sh "
                            "or set TILEOPS_LIBRARY")


_RECORD_PREFIX = b"tileops-build-record:"


def build_record(path: str | None = None) -> dict[str, str]:
    """The torch a libtileops.so was built against ({'torch', 'cxx11_abi', 'cuda'}), read from the
    file without loading it."""
    path = path or library_path()
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        at = m.find(_RECORD_PREFIX)
        if at < 0:
            raise RuntimeError(f"tileops: {path} carries no build record; it is not a libtileops build")
        raw = m[at + len(_RECORD_PREFIX):m.find(b"\0", at)].decode()
    return dict(field.split("=", 1) for field in raw.split(";") if field)


def _running_torch() -> dict[str, str]:
    return {"torch": torch.__version__, "cxx11_abi": str(int(torch._C._GLIBCXX_USE_CXX11_ABI)),
            "cuda": (torch.version.cuda or "none").split(".")[0]}


def check_torch_abi(path: str | None = None) -> None:
    """Raises if the library at `path` was built against another torch than the running one: version
    (ignoring a local tag like +cu130), C++11 ABI flag and CUDA major must all match."""
    path = path or library_path()
    built, run = build_record(path), _running_torch()

    def same(key: str) -> bool:
        return built[key].split("+")[0] == run[key].split("+")[0]

    if not all(same(k) for k in ("torch", "cxx11_abi", "cuda")):
        raise RuntimeError(
            f"tileops: {path} was built against torch {built['torch']} (C++11 ABI {built['cxx11_abi']}, "
            f"CUDA {built['cuda']}) but the running torch is {run['torch']} (C++11 ABI {run['cxx11_abi']}, "
            f"CUDA {run['cuda']}); rebuild libtileops against the running torch or install the matching one")


def load(path: str | None = None) -> ctypes.CDLL:
    """Loads libtileops.so once (torch.ops.load_library) and returns its C handle. Refuses, before
    loading anything, a library built against another torch (check_torch_abi)."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    path = path or library_path()
    check_torch_abi(path)
    torch.ops.load_library(path)
    lib = ctypes.CDLL(path)  # the same handle the loader already holds
    lib.tileops_abi_mismatch.restype = ctypes.c_char_p
    mismatch = lib.tileops_abi_mismatch().decode()
    if mismatch:  # the library's own check of the loaded libtorch
        raise RuntimeError(f"tileops: {mismatch}")
    for name in ("tileops_op_table_json", "tileops_serving_json", "tileops_target_names",
                 "tileops_set_default_target", "tileops_default_target", "tileops_take_registration_errors"):
        getattr(lib, name).restype = ctypes.c_char_p
    lib.tileops_counter.restype = ctypes.c_int64
    lib.tileops_counter.argtypes = [ctypes.c_char_p]
    lib.tileops_set_default_target.argtypes = [ctypes.c_char_p]
    lib.tileops_unregister_target.argtypes = [ctypes.c_char_p]
    lib.tileops_set_autograd_pairing.argtypes = [ctypes.c_int]
    _lib, _lib_path = lib, path
    from . import sharding
    sharding.install()  # DTensor rules, registered when torch.distributed.tensor is (docs/CONTRACT.md §12)
    return lib


def load_backend(path: str) -> None:
    """Loads an out-of-tree backend library; raises if its target registration failed."""
    load()
    torch.ops.load_library(path)
    errors = _lib.tileops_take_registration_errors().decode()
    if errors:
        raise RuntimeError(errors)


_COUNTERS = ("kernel_builds", "kernel_hits", "capture_refusals", "nvrtc_compiles", "disk_cache_hits", "module_loads")


def counters() -> dict[str, int]:
    lib = load()
    return {name: lib.tileops_counter(name.encode()) for name in _COUNTERS}


def reset_counters() -> None:
    load().tileops_reset_counters()


def clear_kernel_caches() -> None:
    """Drops constructed kernels and in-memory CUBINs (the disk cache stays)."""
    load().tileops_clear_kernel_caches()


def target_names() -> list[str]:
    return [n for n in load().tileops_target_names().decode().split("\n") if n]


def set_default_target(name: str | None) -> None:
    err = load().tileops_set_default_target(name.encode() if name is not None else None).decode()
    if err:
        raise ValueError(err)


def default_target() -> str | None:
    return load().tileops_default_target().decode() or None


def unregister_target(name: str) -> bool:
    return bool(load().tileops_unregister_target(name.encode()))


def enable_autograd(on: bool = True) -> bool:
    """Switches the opt-in autograd pairing (manifest `autograd: {backward: ...}`) on or off for the
    whole process; returns the previous state. Off by default (TILEOPS_AUTOGRAD=1 at load turns it on).

    When on, a paired forward (e.g. RMSNormFwdOp) called with inputs that require grad records a graph
    whose backward is its Bwd op; when off, such a call is an error. It applies to calls and traces
    made after the switch: compiled graphs keep what they were traced with (torch._dynamo.reset()).
    """
    return bool(load().tileops_set_autograd_pairing(1 if on else 0))


def autograd_enabled() -> bool:
    return bool(load().tileops_autograd_pairing())


def op_table() -> list[dict]:
    """Every manifest entry as the library was generated from it, with "serving": the target that
    serves it on CPU and on CUDA when a call names none ({"cpu": "reference", "cuda": "nvrtc"}; the
    reference where the CUDA kernel is missing or pending) and the targets holding a pending kernel."""
    lib = load()
    table = json.loads(lib.tileops_op_table_json().decode())
    for entry, serving in zip(table, json.loads(lib.tileops_serving_json().decode()), strict=True):
        entry["serving"] = serving
    return table


def pending() -> list[tuple[str, str]]:
    """(op class, target) for every kernel that is built but not yet verified on its device: it
    runs only with target=<that target>; `python -m tileops.pending` prints them."""
    return [(e["class"], t) for e in op_table() for t in e["serving"]["pending"]]


def pending_tuning() -> list[tuple[str, str]]:
    """(op class, TILEOPS_TUNE setting) for the nvrtc kernels that run only with that developer setting
    until a GPU has verified them (e.g. ClampFwdOp's cases that leave a bound out)."""
    lib = load()
    lib.tileops_pending_tuning.restype = ctypes.c_char_p
    out = []
    for line in lib.tileops_pending_tuning().decode().splitlines():
        setting, ops = line.split("\t")
        out += [(op, f"TILEOPS_TUNE={setting}") for op in ops.split(",")]
    return out


def patch(model, **switches):
    """Moves a Hugging Face transformers model onto tileops ops; returns what it replaced (tileops.hf)."""
    from .hf import patch as _patch  # transformers only when asked for (pip install tileops[hf])
    return _patch(model, **switches)


def unpatch(model) -> int:
    """Undoes tileops.patch on `model` exactly (tileops.hf)."""
    from .hf import unpatch as _unpatch
    return _unpatch(model)


def patched(model, **switches):
    """Context manager: patch on entry, restore on exit (tileops.hf)."""
    from .hf import patched as _patched
    return _patched(model, **switches)


def __getattr__(name: str):
    # `tileops.hf.apply_to_llama(model)` without importing tileops.hf first; tileops.hf imports
    # transformers only inside its functions.
    if name == "hf":
        import importlib
        return importlib.import_module(".hf", __name__)
    raise AttributeError(f"module 'tileops' has no attribute '{name}'")


_importing = False
if _autoload_pending:
    load()
