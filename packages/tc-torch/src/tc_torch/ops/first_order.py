"""The ops' backward functions are first-order: their kernels have no derivative of their own."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, overload

import torch
from torch._C import _functions

Backward = Callable[..., Any]

#: What differentiating a tc_torch gradient again says (torch's wording for once_differentiable,
#: which users search for, and what to do instead).
SECOND_DERIVATIVE = (b"trying to differentiate twice a function that was marked with @once_differentiable: "
                     b"tc_torch's ops compute first derivatives only (for a gradient of a gradient, "
                     b"use the torch op)")


@overload
def first_order(backward: Backward, *, linear: bool = False) -> Backward: ...


@overload
def first_order(backward: None = None, *, linear: bool = False) -> Callable[[Backward], Backward]: ...


def first_order(backward: Backward | None = None, *, linear: bool = False) -> Any:
    """Makes an autograd.Function's `backward` first-order, at no cost in the usual backward
    pass: there grad mode is off (no `create_graph`), so the gradients are computed directly.

    With grad mode on (`create_graph=True`), the gradients are computed under no_grad and, where
    they depend on anything that requires grad, come back marked so that differentiating them
    again raises (torch's DelayedError) instead of silently missing terms. They depend on the
    incoming gradients when those require grad, and, unless the op is `linear` (its gradient a
    fixed function of the incoming one: a transposition), on the tensors it saved (inputs, or
    outputs that carry the inputs' graph). torch's `once_differentiable` looks at the incoming
    gradients alone, so a gradient penalty through it loses the saved inputs' terms without a
    word; it also enters torch.no_grad on every call (about 5 us a backward on an H100's host).

    Usable bare (`@first_order`) or with arguments (`@first_order(linear=True)`)."""
    if backward is None:
        return functools.partial(first_order, linear=linear)
    fn = backward

    @functools.wraps(fn)
    def gradients(ctx: Any, *grads: Any) -> Any:
        if not torch.is_grad_enabled():
            return fn(ctx, *grads)
        with torch.no_grad():
            outputs = fn(ctx, *grads)
        depends = any(isinstance(g, torch.Tensor) and g.requires_grad for g in grads)
        if not depends and not linear:
            depends = any(t.requires_grad for t in ctx.saved_tensors)
        if not depends:
            return outputs
        many = isinstance(outputs, tuple)
        marked = _marked(outputs if many else (outputs,))
        return marked if many else marked[0]
    return gradients


def _marked(outputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """`outputs` as tensors that require grad through a node raising SECOND_DERIVATIVE when it
    is differentiated (None and non-tensors pass through)."""
    tensors = [i for i, t in enumerate(outputs) if isinstance(t, torch.Tensor)]
    if not tensors:
        return outputs
    err = _functions.DelayedError(SECOND_DERIVATIVE, len(tensors))
    aliases = []
    for i in tensors:
        alias = outputs[i].detach()
        alias.requires_grad_(True)
        aliases.append(alias)
    raised = err(*aliases)
    raised = raised if isinstance(raised, tuple) else (raised,)
    out = list(outputs)
    for i, t in zip(tensors, raised):
        out[i] = t
    return tuple(out)


__all__ = ["SECOND_DERIVATIVE", "first_order"]
