"""Pool family ops (manifests/pool.yaml)."""
from ._ops import make_classes

_classes = make_classes("pool")
globals().update(_classes)
__all__ = sorted(_classes)
