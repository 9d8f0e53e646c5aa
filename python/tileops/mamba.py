"""Mamba family ops (manifests/mamba.yaml)."""
from ._ops import make_classes

_classes = make_classes("mamba")
globals().update(_classes)
__all__ = sorted(_classes)
