"""Edge cases of the ops on the interpreter: empty batches, extreme arguments, clear refusals."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import tc_torch


@pytest.mark.parametrize("shape_a,shape_b", [((0, 4, 2), (2, 3)), ((0, 4, 2), (1, 2, 3)),
                                             ((1, 4, 2), (0, 2, 3)), ((4, 2), (0, 2, 3))])
def test_matmul_batch_of_zero_broadcasts(shape_a: tuple[int, ...],
                                          shape_b: tuple[int, ...]) -> None:
    # (before: a batch of 0 against a broadcast operand made a batch of 1, read out of bounds)
    a = torch.randn(shape_a, dtype=torch.float64, requires_grad=True)
    b = torch.randn(shape_b, dtype=torch.float64, requires_grad=True)
    c = tc_torch.matmul(a, b)
    ref = torch.matmul(a, b)
    assert c.shape == ref.shape == (0, 4, 3)
    da, db = torch.autograd.grad(c.sum(), (a, b))
    ra, rb = torch.autograd.grad(ref.sum(), (a, b))
    assert da.shape == ra.shape and db.shape == rb.shape
    assert torch.equal(da, ra) and torch.equal(db, rb)


@pytest.mark.parametrize("ignore_index", [-2**63, 2**63 - 1, 2**40])
def test_cross_entropy_ignore_index_at_the_int64_limits(ignore_index: int) -> None:
    # (before: -2**63 became a literal the front end refuses as too large for 'long')
    x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    t = torch.tensor([0, 1, 2, 3, 0])
    t[1] = ignore_index
    loss = tc_torch.cross_entropy(x, t, ignore_index=ignore_index)
    ref = F.cross_entropy(x, t, ignore_index=ignore_index)
    assert torch.allclose(loss, ref)
    (g,) = torch.autograd.grad(loss, x)
    (rg,) = torch.autograd.grad(ref, x)
    assert torch.allclose(g, rg)


@pytest.mark.parametrize("ignore_index", [2**63, -2**63 - 1])
def test_cross_entropy_ignore_index_beyond_int64(ignore_index: int) -> None:
    x, t = torch.randn(3, 4), torch.zeros(3, dtype=torch.long)
    with pytest.raises(ValueError, match=f"ignore_index {ignore_index} does not fit in int64"):
        tc_torch.cross_entropy(x, t, ignore_index=ignore_index)


def test_layer_norm_eps_beyond_the_float_range() -> None:
    with pytest.raises(ValueError, match="tc_torch.layer_norm: eps 1000.* is too large for a float"):
        tc_torch.layer_norm(torch.randn(2, 3), 3, eps=10**400)


@pytest.mark.parametrize("dim", [2, -3, 5])
def test_softmax_dim_out_of_range(dim: int) -> None:
    with pytest.raises(ValueError, match=f"dim={dim} is out of range for a 2-D tensor"):
        tc_torch.softmax(torch.randn(3, 4), dim)
