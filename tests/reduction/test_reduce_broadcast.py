"""AllFwdOp, AnyFwdOp, AmaxFwdOp, AminFwdOp on expanded (stride-0) inputs (manifest `reduced_once`): a
broadcast dim they reduce is read as one element, so the input is never copied out whole; the answers
are torch's, for every mix of broadcast, reduced and kept dims."""
import pytest
import torch

import tileops

tileops.load()
ops = torch.ops.tileops

OPS = {"all": (ops.reduction_all_fwd, torch.all), "any": (ops.reduction_any_fwd, torch.any),
       "amax": (ops.reduction_amax_fwd, torch.amax), "amin": (ops.reduction_amin_fwd, torch.amin)}


def source(name, shape):
    if name in ("all", "any"):
        return torch.rand(shape) < (0.9 if name == "all" else 0.1)
    x = torch.randn(shape)
    x[(0,) * len(shape)] = float("nan") if len(shape) == 3 else x[(0,) * len(shape)]  # NaN reaches the result
    return x


def want(name, x, dim, keepdim):
    fn = OPS[name][1]
    if dim is None:
        return fn(x).reshape([1] * x.dim()) if keepdim else fn(x)
    return fn(x, dim=tuple(dim), keepdim=keepdim) if dim or name in ("amax", "amin") else x.bool() if name in ("all", "any") else x


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("dim", [None, [1], [0, 2], [-1], [0, 1, 2]])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("base,expanded", [((3, 1, 5), (3, 7, 5)), ((1, 4, 1), (6, 4, 9)), ((1, 1, 1), (2, 3, 4))])
def test_expanded_inputs_give_torchs_answer(name, dim, keepdim, base, expanded):
    x = source(name, base).expand(expanded)
    got = OPS[name][0](x, dim, keepdim)
    torch.testing.assert_close(got, want(name, x, dim, keepdim), equal_nan=True)


@pytest.mark.parametrize("name", sorted(OPS))
def test_a_broadcast_reduced_dim_is_not_copied(name):
    # 2^40 * 15 elements: copied out whole it would need terabytes; read once it is 15 elements.
    x = source(name, (3, 1, 5)).expand(3, 2**40, 5)
    got = OPS[name][0](x, [1], False)
    torch.testing.assert_close(got, want(name, x[:, :1], [1], False), equal_nan=True)
    assert OPS[name][0](x, None, True).shape == (1, 1, 1)


def test_all_over_no_dims_keeps_the_broadcast_shape():
    # dim [] reduces nothing for all/any (torch's rule): nothing is read once, the answer is x != 0
    x = torch.tensor([[0.0, 2.0]]).expand(3, 2)
    assert torch.equal(ops.reduction_all_fwd(x, [], False), torch.all(x, dim=()))
