"""Attention-indexing family ops (manifests/attention_indexing.yaml)."""
from ._ops import make_classes

_classes = make_classes("attention_indexing")
globals().update(_classes)
__all__ = sorted(_classes)
