"""The ops' backward passes are first-order (tc_torch.ops.first_order): a gradient of a gradient
is refused with torch's once_differentiable error, while the first gradient is the same with or
without create_graph; a gradient that depends on the saved inputs alone (a gradient penalty) is
refused too, never returned without its graph."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import tc_torch
from tc_torch.ops import first_order as fo

OPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "matmul": lambda x: tc_torch.matmul(x, x.t()),
    "softmax": lambda x: tc_torch.softmax(x),
    "layer_norm": lambda x: tc_torch.layer_norm(x, 8),
    "cross_entropy": lambda x: tc_torch.cross_entropy(x, torch.tensor([1, 3, 5, 7])),
    "transpose": lambda x: tc_torch.transpose(x),
}


@pytest.mark.parametrize("name", list(OPS))
def test_a_second_derivative_is_refused(name: str) -> None:
    torch.manual_seed(0)
    x = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    y = OPS[name](x)
    w = torch.randn_like(y, requires_grad=True)  # (a gradient that is differentiated further)
    (first,) = torch.autograd.grad(y, x, w)
    (again,) = torch.autograd.grad(OPS[name](x), x, w, create_graph=True)
    assert torch.equal(first, again) and again.requires_grad
    with pytest.raises(RuntimeError, match="marked with @once_differentiable"):
        again.sum().backward()  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("name", list(OPS))
def test_a_gradient_penalty_through_the_saved_inputs_is_refused(name: str) -> None:
    # the incoming gradient w requires no grad, so torch's once_differentiable would return the
    # gradient without a graph and a penalty on it would lose every term through x: silently wrong
    torch.manual_seed(0)
    x = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    y = OPS[name](x)
    w = torch.randn_like(y)
    (first,) = torch.autograd.grad(y, x, w)
    (again,) = torch.autograd.grad(OPS[name](x), x, w, create_graph=True)
    assert torch.equal(first, again)
    if name == "transpose":  # (linear: its gradient is w transposed, whatever x is)
        assert not again.requires_grad
        return
    assert again.requires_grad
    with pytest.raises(RuntimeError, match="tc_torch's ops compute first derivatives only"):
        (again ** 2).sum().backward()  # type: ignore[no-untyped-call]


def test_a_matmul_gradient_penalty_is_refused_where_torch_would_differ() -> None:
    # the reproducer: d/da of sum((a b) * c) is c b^T, whose penalty depends on b
    torch.manual_seed(0)
    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, 2, dtype=torch.float64, requires_grad=True)
    c = torch.randn(3, 2, dtype=torch.float64)
    (ga,) = torch.autograd.grad((tc_torch.matmul(a, b) * c).sum(), a, create_graph=True)
    (reference,) = torch.autograd.grad((torch.matmul(a, b) * c).sum(), a, create_graph=True)
    assert torch.allclose(ga, reference)
    with pytest.raises(RuntimeError, match="differentiate twice"):
        (ga ** 2).sum().backward()  # type: ignore[no-untyped-call]


class _Ctx:
    saved_tensors: tuple[torch.Tensor, ...] = ()


def test_first_order_calls_the_backward_directly_without_grad_mode() -> None:
    calls: list[tuple[bool, tuple[object, ...]]] = []

    def backward(ctx: object, *grads: object) -> tuple[object, ...]:
        calls.append((torch.is_grad_enabled(), grads))
        return grads

    wrapped = fo.first_order(backward)
    assert wrapped.__name__ == "backward"
    with torch.no_grad():
        assert wrapped(_Ctx(), 1, 2) == (1, 2)
    with torch.enable_grad():
        assert wrapped(_Ctx(), 3) == (3,)
    assert calls == [(False, (1, 2)), (False, (3,))]  # (with grad mode on: under no_grad)


def test_first_order_marks_only_the_tensors_among_the_gradients() -> None:
    saved = torch.ones(2, requires_grad=True)

    class Ctx:
        saved_tensors = (saved,)

    @fo.first_order
    def backward(ctx: object, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        return g * 2, None

    with torch.enable_grad():
        got, none = backward(Ctx(), torch.ones(2))
    assert none is None and got.requires_grad and torch.equal(got.detach(), torch.full((2,), 2.0))
    with torch.enable_grad():  # nothing requires grad: returned as computed
        plain, _ = backward(_Ctx(), torch.ones(2))
    assert not plain.requires_grad
