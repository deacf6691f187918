"""Variables -> SSA values, with C block scoping.

A `Var` is one declared variable; assignment just rebinds `Var.value` to a new SSA value of the
declared type. Structured control flow saves and restores these bindings (see control.py), so the
same Var can be an iter arg inside a loop and a loop result after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tc_lang import types as C

from ..ops import Value


class Var:
    """A variable: its C type (fixed at declaration), its current SSA value and the facts its
    declaration's attributes vouch for (`{"multiple_of": 8}`), re-asserted at every assignment."""

    __slots__ = ("name", "ctype", "value", "facts")

    def __init__(self, name: str, ctype: C.Type, value: Value, facts: dict[str, int] | None = None) -> None:
        self.name = name
        self.ctype = ctype
        self.value = value
        self.facts: dict[str, int] = facts or {}

    def __repr__(self) -> str:
        return f"Var({self.name}: {self.ctype})"


class Env:
    """A stack of scopes mapping names to Vars."""

    def __init__(self) -> None:
        self.scopes: list[dict[str, Var]] = [{}]

    @contextmanager
    def scope(self) -> Iterator[None]:
        self.scopes.append({})
        try:
            yield
        finally:
            self.scopes.pop()

    def declare(self, name: str, ctype: C.Type, value: Value, facts: dict[str, int] | None = None) -> Var:
        var = Var(name, ctype, value, facts)
        self.scopes[-1][name] = var
        return var

    def lookup(self, name: str) -> Var | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None


def snapshot(vars: list[Var]) -> list[Value]:
    return [v.value for v in vars]


def restore(vars: list[Var], values: list[Value]) -> None:
    for var, value in zip(vars, values):
        var.value = value
