"""Position family ops (manifests/position.yaml)."""
from ._ops import make_classes

_classes = make_classes("position")
globals().update(_classes)
__all__ = sorted(_classes)
