"""TopkSelectorFwdOp (manifests/attention_indexing.yaml) on CPU against a per-row Python selection
written here: ranges, short ranges padded with -1, ties and NaN as torch.topk, refusals."""
import math

import pytest
import torch

import tileops
from tileops.attention_indexing import TopkSelectorFwdOp

tileops.load()
ops = torch.ops.tileops


def python_select(score, starts, ends, topk):
    """Row by row: the range's positions ordered by (NaN first, then larger score, then position)."""
    b, s, n, g = score.shape
    out = torch.full((b, s, g, topk), -1, dtype=torch.int32)
    for bi in range(b):
        for si in range(s):
            lo, hi = max(0, min(int(starts[bi, si]), n)), max(0, min(int(ends[bi, si]), n))
            for gi in range(g):
                def key(j):
                    x = float(score[bi, si, j, gi])
                    return (0, 0.0, j) if math.isnan(x) else (1, -x, j)
                best = sorted(range(lo, hi), key=key)[:topk]
                out[bi, si, gi, : len(best)] = torch.tensor(best, dtype=torch.int32)
    return out


@pytest.mark.parametrize("g", [1, 3])
def test_selects_the_largest_inside_each_range(g):
    gen = torch.Generator().manual_seed(0)
    b, s, n, k = 2, 5, 17, 4
    score = torch.randn(b, s, n, g, generator=gen)
    starts = torch.randint(0, n, (b, s), generator=gen, dtype=torch.int32)
    ends = (starts + torch.randint(0, n, (b, s), generator=gen, dtype=torch.int32)).clamp(max=n)
    got = TopkSelectorFwdOp(topk=k)(score, starts, ends)
    assert got.shape == (b, s, g, k) and got.dtype == torch.int32
    assert torch.equal(got, python_select(score, starts, ends, k))


def test_short_and_empty_ranges_pad_with_minus_one_and_ranges_are_clamped():
    score = torch.arange(8.0).view(1, 1, 8, 1).repeat(1, 4, 1, 1)
    starts = torch.tensor([[6, 3, -5, 2]], dtype=torch.int32)
    ends = torch.tensor([[8, 3, 2, 100]], dtype=torch.int32)
    got = ops.attention_indexing_topk_selector_fwd(score, starts, ends, 3)[0, :, 0]
    assert got.tolist() == [[7, 6, -1], [-1, -1, -1], [1, 0, -1], [7, 6, 5]]


def test_ties_nan_and_infinities_follow_torch_topk():
    score = torch.tensor([1.0, float("nan"), 3.0, 3.0, -math.inf, 2.0, float("nan"), -math.inf]).view(1, 1, 8, 1)
    full = (torch.zeros(1, 1, dtype=torch.int32), torch.full((1, 1), 8, dtype=torch.int32))
    got = ops.attention_indexing_topk_selector_fwd(score, *full, 8)[0, 0, 0]
    assert got.tolist() == [1, 6, 2, 3, 5, 0, 4, 7]
    assert torch.equal(got, python_select(score, *full, 8)[0, 0, 0])
    # a -inf score inside the range is chosen before any position outside it
    in_range = ops.attention_indexing_topk_selector_fwd(score, torch.full((1, 1), 4, dtype=torch.int32),
                                                        torch.full((1, 1), 5, dtype=torch.int32), 2)
    assert in_range[0, 0, 0].tolist() == [4, -1]


def test_refusals_name_the_op_and_the_rule():
    score, se = torch.randn(1, 2, 6, 1), torch.zeros(1, 2, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"tileops::attention_indexing_topk_selector_fwd: .*topk <= seq_len_kv"):
        ops.attention_indexing_topk_selector_fwd(score, se, se, 7)
    with pytest.raises(ValueError, match=r"tileops::attention_indexing_topk_selector_fwd: .*topk > 0"):
        ops.attention_indexing_topk_selector_fwd(score, se, se, 0)
    with pytest.raises(TypeError, match=r"tileops::attention_indexing_topk_selector_fwd: 'starts' must have dtype int32"):
        ops.attention_indexing_topk_selector_fwd(score, se.long(), se, 2)
    with pytest.raises(RuntimeError, match=r"tileops::attention_indexing_topk_selector_fwd: 'ends' must have shape"):
        ops.attention_indexing_topk_selector_fwd(score, se, se[:, :1], 2)
