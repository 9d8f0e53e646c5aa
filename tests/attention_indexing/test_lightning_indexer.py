"""FP8LightningIndexerFwdOp (manifests/attention_indexing.yaml) on CPU against the indexer's formula
in float64 written here (and, for bfloat16 inputs, TileOPs' quantisation written out); ranges, groups,
clean_logits and the refusals."""
import pytest
import torch

import tileops
from tileops.attention_indexing import FP8LightningIndexerFwdOp

tileops.load()
ops = torch.ops.tileops
OP = ops.attention_indexing_fp8_lightning_indexer_fwd
NAME = "tileops::attention_indexing_fp8_lightning_indexer_fwd"
FP8 = torch.float8_e4m3fn


def float64_logits(q8, k8, weights, k_scale, ks, ke, clean):
    """logits[b, s, n, g] = sum over the group's heads of relu(q8 . k8) * w[s, h] * k_scale[b, n, g]."""
    b, s, h, d = q8.shape
    n, g = k8.shape[1], k8.shape[2]
    hg = h // g
    q = q8.double().view(b, s, g, hg, d)
    k = k8.double()
    dots = torch.einsum("bsghd,bngd->bsngh", q, k).clamp(min=0)
    w = weights.double().view(s, g, hg)[None, :, None]
    out = (dots * w).sum(-1) * (1.0 if k_scale is None else k_scale.double()[:, None])
    if clean:
        for t in range(s):
            lo = min(max(int(ks[t]), 0), n)
            hi = max(min(max(int(ke[t]), 0), n), lo)
            out[:, t, :lo] = float("-inf")
            out[:, t, hi:] = float("-inf")
    return out


def fp8_case(b, s, h, g, n, d, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q8 = (torch.randn(b, s, h, d, generator=gen) * 4).to(FP8)
    k8 = (torch.randn(b, n, g, d, generator=gen) * 4).to(FP8)
    weights = torch.randn(s, h, generator=gen)
    k_scale = torch.rand(b, n, g, generator=gen) + 0.1
    ks = torch.randint(-2, n, (s,), generator=gen, dtype=torch.int32)
    ke = ks + torch.randint(-1, n, (s,), generator=gen, dtype=torch.int32)
    ke[0] = n + 5  # past the keys
    return q8, k8, weights, k_scale, ks, ke


def close(got, want):
    assert torch.equal(torch.isinf(got), torch.isinf(want.float()))
    fin = torch.isfinite(want)
    torch.testing.assert_close(got[fin].double(), want[fin], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("heads,groups", [(4, 1), (8, 2)])
@pytest.mark.parametrize("clean", [True, False])
def test_fp8_inputs_match_float64(heads, groups, clean):
    q8, k8, w, k_scale, ks, ke = fp8_case(2, 5, heads, groups, 19, 32)
    got = OP(q8, k8, w, ks, ke, k_scale, clean_logits=clean)
    assert got.shape == (2, 5, 19, groups) and got.dtype == torch.float32
    close(got, float64_logits(q8, k8, w, k_scale, ks, ke, clean))
    close(OP(q8, k8, w, ks, ke, None, clean_logits=clean), float64_logits(q8, k8, w, None, ks, ke, clean))


def tileops_quantised(index_q, index_k):
    """TileOPs' op before its kernel: q cast as it is; k per row: scale = max(|k|, 1e-4) / 448,
    k * (1 / scale) cast to float8."""
    kf = index_k.float()
    sf = kf.abs().amax(-1, keepdim=True).clamp(min=1e-4) / 448.0
    return index_q.to(FP8), (kf * (1.0 / sf)).to(FP8), sf.squeeze(-1)


@pytest.mark.parametrize("heads,groups", [(4, 1), (8, 2)])
def test_bfloat16_inputs_are_quantised_as_tileops_does(heads, groups):
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(1, 6, heads, 16, generator=gen).bfloat16()
    k = (torch.randn(1, 11, groups, 16, generator=gen) * 3).bfloat16()
    k[0, 3] = 0  # an all-zero row: scale 1e-4 / 448
    w = torch.randn(6, heads, generator=gen)
    ks, ke = torch.zeros(6, dtype=torch.int32), torch.arange(6, dtype=torch.int32) * 2
    got = FP8LightningIndexerFwdOp()(q, k, w, ks, ke)
    q8, k8, sf = tileops_quantised(q, k)
    close(got, float64_logits(q8, k8, w, sf, ks, ke, True))
    # not the unquantised scores: the quantisation is part of the op
    exact = float64_logits(q, k, w, None, ks, ke, True)
    assert not torch.allclose(got[torch.isfinite(got)].double(), exact[torch.isfinite(exact)], rtol=1e-3, atol=1e-3)


def test_ranges_are_clamped_as_tileops_clean_kernel():
    q8, k8, w, k_scale, _, _ = fp8_case(1, 4, 2, 1, 6, 8, seed=2)
    ks = torch.tensor([-3, 2, 5, 4], dtype=torch.int32)
    ke = torch.tensor([2, 2, 100, 1], dtype=torch.int32)  # [0, 2), empty, [5, 6), empty (ke < ks)
    got = OP(q8, k8, w, ks, ke, k_scale)[0, :, :, 0]
    finite = torch.isfinite(got)
    assert finite.tolist() == [[True, True, False, False, False, False], [False] * 6,
                               [False] * 5 + [True], [False] * 6]


def test_refusals_name_the_op_the_argument_and_the_rule():
    q8, k8, w, k_scale, ks, ke = fp8_case(1, 3, 4, 2, 5, 8)
    with pytest.raises(ValueError, match=rf"{NAME}: 'index_k_scale' scales a float8_e4m3fn index_k"):
        OP(q8.float().bfloat16(), k8.float().bfloat16(), w, ks, ke, k_scale)
    with pytest.raises(TypeError, match=rf"{NAME}: the dtypes of \(index_q, index_k\) must be one of the combinations"):
        OP(q8, k8.float().bfloat16(), w, ks, ke, None)
    with pytest.raises(ValueError, match=rf"{NAME}: .*heads % kv_group == 0"):
        OP(q8[:, :, :3], k8, w[:, :3], ks, ke, k_scale)
    with pytest.raises(RuntimeError, match=rf"{NAME}: 'weights' must have shape \[seq_len, heads\]"):
        OP(q8, k8, w.t().contiguous(), ks, ke, k_scale)
    with pytest.raises(TypeError, match=rf"{NAME}: 'cu_seqlen_ke' must have dtype int32"):
        OP(q8, k8, w, ks, ke.long(), k_scale)
