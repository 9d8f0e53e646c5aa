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
import os
from pathlib import Path

import torch

__all__ = ["load", "load_backend", "library_path", "counters", "reset_counters", "clear_kernel_caches",
           "target_names", "set_default_target", "default_target", "op_table", "enable_autograd", "autograd_enabled"]

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


def load(path: str | None = None) -> ctypes.CDLL:
    """Loads libtileops.so once (torch.ops.load_library) and returns its C handle."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    path = path or library_path()
    torch.ops.load_library(path)
    lib = ctypes.CDLL(path)  # the same handle the loader already holds
    for name in ("tileops_op_table_json", "tileops_target_names", "tileops_set_default_target",
                 "tileops_default_target", "tileops_take_registration_errors"):
        getattr(lib, name).restype = ctypes.c_char_p
    lib.tileops_counter.restype = ctypes.c_int64
    lib.tileops_counter.argtypes = [ctypes.c_char_p]
    lib.tileops_set_default_target.argtypes = [ctypes.c_char_p]
    lib.tileops_unregister_target.argtypes = [ctypes.c_char_p]
    lib.tileops_set_autograd_pairing.argtypes = [ctypes.c_int]
    _lib, _lib_path = lib, path
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
    """Every manifest entry as the library was generated from it."""
    return json.loads(load().tileops_op_table_json().decode())
