"""Convolution family ops (manifests/convolution.yaml)."""
from ._ops import make_classes

_classes = make_classes("convolution")
globals().update(_classes)
__all__ = sorted(_classes)
