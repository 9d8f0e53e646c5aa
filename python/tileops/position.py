"""Position family ops (manifests/position.yaml): the vLLM-style RoPE ops (RopeNeoxCachedFwdOp, RopeNonNeoxCachedFwdOp,
their flat forms; in place on q and k from a cos/sin cache), TileOPs' RopeNeoxPositionIdsFwdOp and its
scaled RoPE ops RopeLlama31FwdOp, RopeYarnFwdOp, RopeLongRopeFwdOp (x into a new tensor, layout '1d'
[seq_len, head_dim] or '2d' [batch, seq_len, num_heads, head_dim], the table built from the params;
LongRoPE's rescale_factors is a call input: RopeLongRopeFwdOp(...)(x, factors)), AlibiFwdOp,
SinusoidalFwdOp and the composite QKNormRopeFwdOp."""
from ._ops import make_classes

_classes = make_classes("position")
globals().update(_classes)
__all__ = sorted(_classes)
