"""The registry of op lowerings: NAME -> function(ctx, op). Each lower_* module registers its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from .context import Ctx

LOWERINGS: dict[str, Callable[[Ctx, Any], None]] = {}

_F = TypeVar("_F", bound=Callable[..., None])


def lowers(*names: str) -> Callable[[_F], _F]:
    def deco(fn: _F) -> _F:
        for n in names:
            LOWERINGS[n] = fn
        return fn

    return deco


def load_all() -> None:
    """Import the modules that register lowerings."""
    from . import lower_control, lower_elementwise, lower_memory, lower_shared, lower_tile  # noqa: F401
    from . import lower_async, lower_mma, lower_tma  # noqa: F401
