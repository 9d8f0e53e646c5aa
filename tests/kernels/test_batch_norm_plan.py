"""Which kernels BatchNormFwdOp's nvrtc plan builds, on a named device without a GPU (the offline plan
of tileops.warmup): training whose channel fits one CTA's registers is one launch of
batch_norm_fwd_channel (2-d x with adjacent channels a CTA, larger x a channel a CTA), at the limit and
one access past it the three-launch path; eval never takes it."""
import urllib.parse

import pytest
import torch

import tileops
from tileops import warmup

tileops.load()
OP = torch.ops.tileops.norm_batch_norm_fwd_writes_running_mean_writes_running_var


def planned(shape, dtype=torch.float16, training=True, running=True, weight=True, bias=True, device="h200"):
    """The names of the kernels a call plans on `device` (CPU tensors: only shapes, dtypes and alignment count)."""
    c = shape[1]
    lib = warmup._lib()
    err = lib.tileops_begin_offline_plan(device.encode()).decode()
    assert not err, err
    try:
        with torch.no_grad():
            OP(torch.empty(shape, dtype=dtype), torch.empty(c) if running else None,
               torch.empty(c) if running else None, torch.empty(c, dtype=dtype) if weight else None,
               torch.empty(c, dtype=dtype) if bias else None, training)
    finally:
        lines = lib.tileops_end_offline_plan().decode().splitlines()
    return [urllib.parse.unquote(ln.split(" name=", 1)[1].split(" ", 1)[0]) for ln in lines]


@pytest.mark.parametrize("shape,dtype,name", [
    ((32, 64), torch.float16, "batch_norm_fwd_channel__f16__v1_c32_t256_k4_update_w_b__sm_90a"),
    ((8, 64, 32, 32), torch.bfloat16, "batch_norm_fwd_channel__bf16__v8_c1_t256_k4_update_w_b__sm_90a"),
    ((4, 256, 28, 28), torch.float16, "batch_norm_fwd_channel__f16__v8_c1_t128_k4_update_w_b__sm_90a"),
    ((3, 5, 7), torch.float32, "batch_norm_fwd_channel__f32__v1_c1_t32_k1_update_w_b__sm_90a"),
    ((6, 3), torch.float32, "batch_norm_fwd_channel__f32__v1_c4_t32_k1_update_w_b__sm_90a"),
])
def test_small_training_calls_are_one_launch(shape, dtype, name):
    assert planned(shape, dtype) == [name]


def test_running_stats_and_affine_pick_the_specialisation():
    assert planned((32, 64), running=False, weight=False) == ["batch_norm_fwd_channel__f16__v1_c32_t256_k4_nw_b__sm_90a"]
    assert planned((8, 64, 32, 32), running=False, bias=False) == [
        "batch_norm_fwd_channel__f16__v8_c1_t256_k4_w_nb__sm_90a"]


@pytest.mark.parametrize("fits,past,dtype", [
    ((1, 8, 256, 256), (1, 8, 256, 264), torch.float16),  # 8192 accesses of 8: 1024 threads of 8
    ((8, 8, 64, 64), (8, 8, 64, 65), torch.float32),      # 8192 accesses of 4
    ((2, 3, 8191), (2, 3, 8193), torch.float16),          # scalar: 1024 threads of 16
    ((512, 64), (513, 64), torch.float16),                # 2-d, 32 channels a CTA: 32 threads of 16 a channel
    ((1024, 16), (1025, 16), torch.bfloat16),             # 2-d, 16 channels a CTA: 64 threads of 16
])
def test_the_one_launch_plan_ends_where_a_channel_leaves_the_registers(fits, past, dtype):
    assert [k.split("__")[0] for k in planned(fits, dtype)] == ["batch_norm_fwd_channel"]
    assert [k.split("__")[0] for k in planned(past, dtype)][:2] == ["group_norm_fwd_stats", "batch_norm_fwd_stats"]


def test_large_channels_and_eval_keep_their_kernels():
    assert [k.split("__")[0] for k in planned((4, 128, 1024, 1024))] == [
        "group_norm_fwd_stats", "batch_norm_fwd_stats", "group_norm_fwd_rows"]
    assert all(not k.startswith("batch_norm") for k in planned((4, 128, 32, 32), training=False))
