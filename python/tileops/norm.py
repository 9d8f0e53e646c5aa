"""Norm family ops (manifests/norm.yaml)."""
from ._ops import make_classes

globals().update(make_classes("norm"))
__all__ = sorted(make_classes("norm"))
