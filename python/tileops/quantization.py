"""Quantization family ops (manifests/quantization.yaml)."""
from ._ops import make_classes

_classes = make_classes("quantization")
globals().update(_classes)
__all__ = sorted(_classes)
