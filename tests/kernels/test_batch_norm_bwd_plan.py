"""Which kernels BatchNormBwdOp's nvrtc plan builds, on a named device without a GPU (the offline plan
of tileops.warmup): a channel whose dy and x fit one CTA's registers is one launch of
batch_norm_bwd_channel (2-d x with adjacent channels a CTA, larger x a channel a CTA, an empty batch
too); at the limit and one access past it, the chunked path (partial sums, their reduction, dx)."""
import urllib.parse

import pytest
import torch

import tileops
from tileops import warmup

tileops.load()
OP = torch.ops.tileops.norm_batch_norm_bwd
CHUNKED = ["batch_norm_bwd_partial", "batch_norm_bwd_reduce", "batch_norm_bwd_dx"]


def planned(shape, dtype=torch.float16, device="h200", offset=0):
    """The names of the kernels a call plans on `device` (CPU tensors: only shapes, dtypes and alignment count)."""
    c = shape[1]
    numel = 1
    for s in shape:
        numel *= s
    dy = torch.empty(numel + offset, dtype=dtype)[offset:].view(shape)
    lib = warmup._lib()
    err = lib.tileops_begin_offline_plan(device.encode()).decode()
    assert not err, err
    try:
        with torch.no_grad():
            OP(dy, torch.empty(shape, dtype=dtype), torch.empty(c), torch.empty(c), torch.empty(c))
    finally:
        lines = lib.tileops_end_offline_plan().decode().splitlines()
    return [urllib.parse.unquote(ln.split(" name=", 1)[1].split(" ", 1)[0]) for ln in lines]


def kinds(names):
    return [k.split("__")[0] for k in names]


@pytest.mark.parametrize("shape,dtype,name", [
    ((32, 64), torch.float16, "batch_norm_bwd_channel__f16__v1_c32_t256_k4__sm_90a"),
    ((8, 64, 32, 32), torch.bfloat16, "batch_norm_bwd_channel__bf16__v8_c1_t256_k4__sm_90a"),
    ((4, 128, 32, 32), torch.float16, "batch_norm_bwd_channel__f16__v8_c1_t128_k4__sm_90a"),
    ((4, 256, 28, 28), torch.float16, "batch_norm_bwd_channel__f16__v8_c1_t128_k4__sm_90a"),
    ((3, 5, 7), torch.float32, "batch_norm_bwd_channel__f32__v1_c1_t32_k1__sm_90a"),
    ((6, 3), torch.float32, "batch_norm_bwd_channel__f32__v1_c4_t32_k1__sm_90a"),
    ((0, 4, 5), torch.float16, "batch_norm_bwd_channel__f16__v1_c1_t32_k1__sm_90a"),  # an empty batch: zero sums
])
def test_small_channels_are_one_launch(shape, dtype, name):
    assert planned(shape, dtype) == [name]


def test_alignment_sets_the_access_width():
    assert planned((2, 8, 64))[0].startswith("batch_norm_bwd_channel__f16__v8_")
    assert planned((2, 8, 64), offset=1)[0].startswith("batch_norm_bwd_channel__f16__v1_")  # dy one element off
    assert planned((2, 8, 64), offset=4)[0].startswith("batch_norm_bwd_channel__f16__v4_")


@pytest.mark.parametrize("fits,past,dtype", [
    ((1, 8, 128, 256), (1, 8, 128, 264), torch.float16),  # 4096 accesses of 8: 1024 threads of 4 (32 K values)
    ((8192, 3, 4), (8193, 3, 4), torch.float16),         # 8-byte accesses: 1024 threads of 8
    ((4, 8, 64, 64), (4, 8, 64, 65), torch.float32),      # 4096 accesses of 4
    ((2, 3, 8191), (2, 3, 8193), torch.float16),          # scalar: 1024 threads of 16
    ((512, 64), (513, 64), torch.float16),                # 2-d, 32 channels a CTA: 32 threads of 16 a channel
    ((1024, 16), (1025, 16), torch.bfloat16),             # 2-d, 16 channels a CTA: 64 threads of 16
])
def test_the_one_launch_plan_ends_where_a_channel_leaves_the_registers(fits, past, dtype):
    assert kinds(planned(fits, dtype)) == ["batch_norm_bwd_channel"]
    assert kinds(planned(past, dtype)) == CHUNKED


def test_large_channels_take_the_chunks_with_the_same_access():
    assert planned((4, 128, 1024, 1024)) == [
        "batch_norm_bwd_partial__f16__v8_c1_t256__sm_90a", "batch_norm_bwd_reduce__t256__sm_90a",
        "batch_norm_bwd_dx__f16__v8_c1_t256__sm_90a"]
    assert planned((4096, 100), torch.float32) == [
        "batch_norm_bwd_partial__f32__v1_c32_t256__sm_90a", "batch_norm_bwd_reduce__t256__sm_90a",
        "batch_norm_bwd_dx__f32__v1_c32_t256__sm_90a"]
