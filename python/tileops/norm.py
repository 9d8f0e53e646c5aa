"""Norm family ops (manifests/norm.yaml)."""
from ._ops import make_classes

_classes = make_classes("norm")
globals().update(_classes)
__all__ = sorted(_classes)
