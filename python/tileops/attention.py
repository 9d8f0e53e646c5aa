"""Attention family ops (manifests/attention.yaml)."""
from ._ops import make_classes

_classes = make_classes("attention")
globals().update(_classes)
__all__ = sorted(_classes)
