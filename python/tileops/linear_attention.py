"""Linear-attention family ops (manifests/linear_attention.yaml)."""
from ._ops import make_classes

_classes = make_classes("linear_attention")
globals().update(_classes)
__all__ = sorted(_classes)
