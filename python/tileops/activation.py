"""Activation family ops (manifests/activation.yaml): ReluFwdOp, SiluFwdOp, GeluFwdOp (each with
inplace=True for the _writes_x branch), SigmoidFwdOp (integer x gives float32 y) and the gated SiluAndMulFwdOp, GeluAndMulFwdOp,
GeluTanhAndMulFwdOp (call with out= for the _out branch)."""
from ._ops import make_classes

_classes = make_classes("activation")
globals().update(_classes)
__all__ = sorted(_classes)
