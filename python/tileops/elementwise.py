"""Elementwise family ops (manifests/elementwise.yaml), one engine for all: broadcasting inputs of
any strides, torch's type promotion, Scalar params; inplace=True for the `_writes_input` branch,
out= for the `_out` branch. E.g. AddFwdOp(alpha=2)(a, b), WhereFwdOp()(cond, a, b)."""
from ._ops import make_classes

_classes = make_classes("elementwise")
globals().update(_classes)
__all__ = sorted(_classes)
