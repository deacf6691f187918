"""Errors a kernel can cause while it runs in the interpreter (not compile errors)."""

from __future__ import annotations


class InterpreterError(Exception):
    """A kernel did something the reference semantics forbids (bad access, bad launch, ...)."""


class OutOfBoundsError(InterpreterError):
    """A load, store or atomic touched memory outside every registered buffer.

    Attributes: `loc` (the op's source location), `program_id`, `index` (the element's index in
    the tile), `address`, `buffer` (the nearest buffer's name or None)."""

    def __init__(
        self,
        message: str,
        *,
        loc: object = None,
        program_id: tuple[int, ...] = (),
        index: tuple[int, ...] = (),
        address: int = 0,
        buffer: str | None = None,
    ) -> None:
        super().__init__(message)
        self.loc = loc
        self.program_id = program_id
        self.index = index
        self.address = address
        self.buffer = buffer


class MisalignedAccessError(InterpreterError):
    """An access whose address is not a multiple of the element size (a GPU fault)."""


class MemoryFault(Exception):
    """Internal: raised by `Memory`, turned into an `InterpreterError` with the op's context."""

    def __init__(self, kind: str, position: int, address: int, detail: str, buffer: str | None) -> None:
        super().__init__(detail)
        self.kind = kind  # "bounds" or "align"
        self.position = position  # index into the flat list of accessed addresses
        self.address = address
        self.detail = detail
        self.buffer = buffer


class AssumptionError(InterpreterError):
    """A value broke a fact its declaration vouches for (`__multipleof(N)` / `__aligned(N)` on a
    local variable): undefined behaviour on the GPU, where vector accesses rely on it.

    Attributes: `loc`, `program_id`, `index` (the element's index in the tile, () for scalars),
    `value`."""

    def __init__(
        self, message: str, *, loc: object = None, program_id: tuple[int, ...] = (),
        index: tuple[int, ...] = (), value: int = 0,
    ) -> None:
        super().__init__(message)
        self.loc = loc
        self.program_id = program_id
        self.index = index
        self.value = value
