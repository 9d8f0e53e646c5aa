"""Sequence-modeling family ops (manifests/sequence_modeling.yaml): Engram, FFT, mHC."""
from ._ops import make_classes

_classes = make_classes("sequence_modeling")
globals().update(_classes)
__all__ = sorted(_classes)
