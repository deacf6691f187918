"""tc_torch.add on CPU tensors (the interpreter): values, dtypes, and the refusals."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.autograd import gradcheck

import tc_torch


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_add_equals_torch(dtype: torch.dtype) -> None:
    x = torch.rand(2500, dtype=dtype)
    y = torch.rand(2500, dtype=dtype)
    assert torch.equal(tc_torch.add(x, y), x + y)


def test_add_2d_and_non_contiguous() -> None:
    x = torch.rand(33, 65)
    y = torch.rand(65, 33).t()  # a transposed view: made contiguous first
    z = tc_torch.add(x, y)
    assert z.shape == (33, 65) and z.is_contiguous()
    assert torch.equal(z, x + y)


def test_empty_tensors() -> None:
    z = tc_torch.add(torch.empty(0), torch.empty(0))
    assert z.numel() == 0


def test_autograd() -> None:
    x = torch.rand(100, requires_grad=True)
    y = torch.rand(100, requires_grad=True)
    loss: Any = tc_torch.add(x, y).sum()
    loss.backward()
    assert x.grad is not None and torch.equal(x.grad, torch.ones(100))
    assert y.grad is not None and torch.equal(y.grad, torch.ones(100))


def test_add_gradcheck_float64() -> None:
    x = torch.randn(3, 7, dtype=torch.float64, requires_grad=True)
    y = torch.randn(3, 7, dtype=torch.float64, requires_grad=True)
    assert gradcheck(tc_torch.add, (x, y))
    assert gradcheck(lambda v: tc_torch.add(v.t(), v.t()), (torch.randn(
        5, 5, dtype=torch.float64, requires_grad=True),))  # strided views, a doubled gradient


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_add_autograd_half_types(dtype: torch.dtype) -> None:
    x = torch.randn(40).to(dtype).requires_grad_()
    y = torch.randn(40).to(dtype).requires_grad_()
    g = torch.randn(40).to(dtype)
    out: Any = tc_torch.add(x, y)
    assert out.dtype == dtype and torch.equal(out, x.detach() + y.detach())
    out.backward(g)
    assert x.grad is not None and y.grad is not None
    assert x.grad.dtype == dtype and torch.equal(x.grad, g) and torch.equal(y.grad, g)


def test_refusals() -> None:
    with pytest.raises(TypeError, match="different dtypes"):
        tc_torch.add(torch.rand(4), torch.rand(4, dtype=torch.float64))
    with pytest.raises(TypeError, match="dtype int32 is not supported"):
        tc_torch.add(torch.ones(4, dtype=torch.int32), torch.ones(4, dtype=torch.int32))
    with pytest.raises(ValueError, match="different shapes"):
        tc_torch.add(torch.rand(4), torch.rand(5))
    with pytest.raises(ValueError, match="same device"):
        tc_torch.add(torch.rand(4), torch.rand(4, device="meta"))
    with pytest.raises(TypeError, match="expects two tensors"):
        tc_torch.add(torch.rand(4), 1.0)  # type: ignore[arg-type]
