"""The ops' backward passes are first-order (tc_torch.ops.first_order): a gradient of a gradient
is refused with torch's once_differentiable error, while the first gradient is the same with or
without create_graph."""

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


def test_first_order_calls_the_backward_directly_without_grad_mode() -> None:
    calls: list[tuple[bool, tuple[object, ...]]] = []

    def backward(ctx: object, *grads: object) -> tuple[object, ...]:
        calls.append((torch.is_grad_enabled(), grads))
        return grads

    wrapped = fo.first_order(backward)
    assert wrapped.__name__ == "backward"
    with torch.no_grad():
        assert wrapped(None, 1, 2) == (1, 2)
    with torch.enable_grad():
        assert wrapped(None, 3) == (3,)
    assert calls == [(False, (1, 2)), (False, (3,))]  # (once_differentiable: under no_grad)
