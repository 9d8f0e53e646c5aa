"""The MLA decode kernel on the nvrtc target (src/kernels/attention/decode_mla.cuh), on a CUDA GPU: against
the float64 oracle for every head tile, token counts around the 16-token tiles and the splits, an empty
cache, DeepSeek's dims and others its plan takes; TileOPs' workloads against the reference target; the
shapes it leaves to ATen; CUDA graph replay."""
import pytest
import torch

import tileops
from support.decode_oracle import default_scale, float64_decode

pytestmark = pytest.mark.gpu
tileops.load()
ops = torch.ops.tileops
TOL = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def mla_inputs(b, h, n, d, pe, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, device="cuda").to(dtype)  # noqa: E731
    return r(b, h, d), r(b, h, pe), r(b, n, 1, d), r(b, n, 1, pe)


def mla(q, q_pe, k, k_pe, target=None):
    return ops.attention_multi_head_latent_attention_decode_with_kv_cache_fwd(q, q_pe, k, k_pe, pe_dim=q_pe.size(-1),
                                                                             target=target)


def assert_float64(o, q, q_pe, k, k_pe):
    d, pe = q.size(-1), q_pe.size(-1)
    for i in range(q.size(0)):
        want = float64_decode(torch.cat([q[i], q_pe[i]], -1)[None].cpu(), torch.cat([k[i], k_pe[i]], -1).cpu(),
                              k[i].cpu(), default_scale(d + pe))[0]
        torch.testing.assert_close(o[i].cpu().double(), want, rtol=TOL[o.dtype], atol=TOL[o.dtype])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("b,h,n", [(1, 16, 1), (2, 20, 15), (2, 128, 16), (1, 8, 17), (3, 33, 129), (1, 128, 4099),
                                   (2, 16, 0)])
def test_deepseek_dims_match_float64(dtype, b, h, n):
    q, q_pe, k, k_pe = mla_inputs(b, h, n, 128, 64, dtype)
    o = mla(q, q_pe, k, k_pe)
    assert o.shape == (b, h, 128) and o.dtype == dtype
    assert_float64(o, q, q_pe, k, k_pe)


@pytest.mark.parametrize("d,pe", [(64, 0), (256, 64), (32, 32)])
def test_other_dims_match_float64(d, pe):
    q, q_pe, k, k_pe = mla_inputs(2, 24, 300, d, pe, torch.bfloat16, seed=1)
    assert_float64(mla(q, q_pe, k, k_pe), q, q_pe, k, k_pe)


@pytest.mark.parametrize("b,n", [(32, 4096), (4, 32768)])
def test_workloads_against_the_reference(b, n):
    q, q_pe, k, k_pe = mla_inputs(b, 128, n, 128, 64, torch.bfloat16, seed=2)
    torch.testing.assert_close(mla(q, q_pe, k, k_pe).float(), mla(q, q_pe, k, k_pe, "reference").float(),
                               rtol=1.6e-2, atol=1.6e-2)


@pytest.mark.parametrize("d,pe,dtype", [(512, 64, torch.bfloat16), (120, 8, torch.float16)])
def test_shapes_left_to_aten(d, pe, dtype):
    q, q_pe, k, k_pe = mla_inputs(1, 4, 40, d, pe, dtype, seed=3)
    assert_float64(mla(q, q_pe, k, k_pe), q, q_pe, k, k_pe)


def test_cuda_graph_replay():
    q, q_pe, k, k_pe = mla_inputs(2, 128, 1000, 128, 64, torch.bfloat16, seed=4)
    mla(q, q_pe, k, k_pe)  # builds the kernels
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        o = mla(q, q_pe, k, k_pe)
    fresh = mla_inputs(2, 128, 1000, 128, 64, torch.bfloat16, seed=5)
    for dst, src in zip((q, q_pe, k, k_pe), fresh):
        dst.copy_(src)
    g.replay()
    torch.cuda.synchronize()
    assert_float64(o, q, q_pe, k, k_pe)
