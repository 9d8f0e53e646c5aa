"""GEMM family ops (manifests/gemm.yaml)."""
from ._ops import make_classes

_classes = make_classes("gemm")
globals().update(_classes)
__all__ = sorted(_classes)
