"""Reduction family ops (manifests/reduction.yaml): SoftmaxFwdOp, LogSoftmaxFwdOp and the dim reductions
(SumFwdOp, MeanFwdOp, AmaxFwdOp, ..., LogSumExpFwdOp)."""
from ._ops import make_classes

_classes = make_classes("reduction")
globals().update(_classes)
__all__ = sorted(_classes)
