"""Mixture-of-experts family ops (manifests/moe.yaml)."""
from ._ops import make_classes

_classes = make_classes("moe")
globals().update(_classes)
__all__ = sorted(_classes)
