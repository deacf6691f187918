"""The ops' backward functions are first-order: their kernels have no derivative of their own."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch.autograd.function import once_differentiable

Backward = Callable[..., Any]


def first_order(backward: Backward) -> Backward:
    """torch's `once_differentiable` for an autograd.Function's backward, at no cost in the usual
    backward pass: there grad mode is off (no `create_graph`), so the gradients are computed
    directly; only with grad mode on does the call go through `once_differentiable`, which makes
    a second derivative an error. (`once_differentiable` enters torch.no_grad on every call: an
    H100 host spent about 5 us a backward in it, a quarter of matmul's own Python there.)"""
    checked = once_differentiable(backward)

    @functools.wraps(backward)
    def gradients(ctx: Any, *grads: Any) -> Any:
        if torch.is_grad_enabled():
            return checked(ctx, *grads)
        return backward(ctx, *grads)
    return gradients


__all__ = ["first_order"]
