"""The reference interpreter: runs target-independent tile IR over a whole grid with numpy.

Pointers are int64 byte addresses into a `Memory` of registered host buffers; every access is
bounds-checked and an out-of-bounds one raises `OutOfBoundsError` with the source line, the
program id and the element. The semantics of every op (wrap-around, C division, shifts clamped
like PTX, f16/bf16 rounding after each op, fp32 dot accumulation, saturating float->int casts)
are documented in `elementwise` and `memops`: the GPU backend must match them.
"""

from __future__ import annotations

from .errors import AssumptionError, InterpreterError, MisalignedAccessError, OutOfBoundsError
from .grid import Interpreter, interpret, tensor_span
from .memory import Buffer, Memory, RawMemory

__all__ = [
    "AssumptionError",
    "Buffer",
    "Interpreter",
    "InterpreterError",
    "Memory",
    "MisalignedAccessError",
    "OutOfBoundsError",
    "RawMemory",
    "interpret",
    "tensor_span",
]
