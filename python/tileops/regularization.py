"""Regularization family ops (manifests/regularization.yaml)."""
from ._ops import make_classes

_classes = make_classes("regularization")
globals().update(_classes)
__all__ = sorted(_classes)
