"""device="cpu": the same kernel API, run by the tc_ir reference interpreter.

Pointer arguments may be numpy arrays or objects with `data_ptr()` (a CPU torch tensor): their
memory is registered with the interpreter, so every access is bounds-checked and an out-of-bounds
access names the source line. A plain integer pointer is a raw host address the caller vouches for
(the interpreter's raw mode, without bounds information), as in the spec's `x.data_ptr()` style.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import compiler
from .signature import Signature, is_pointer


class CpuKernel:
    """One lowered kernel function and its signature; `launch` interprets a whole grid."""

    def __init__(self, function: Any, source: str | None = None) -> None:
        self.function = function
        self.source = source
        kinds = [str(a.type) for a in function.args]
        self.signature = Signature(function.name, kinds, list(function.arg_names) or None)

    def ir_text(self) -> str:
        printer = compiler.require("tc_ir", "print_module")
        module_cls = compiler.require("tc_ir", "Module")
        return str(printer(module_cls([self.function])))

    def launch(self, args: Sequence[object], grid: tuple[int, int, int]) -> None:
        sig = self.signature
        sig.check_count(len(args))
        memory_cls = compiler.require("tc_ir", "Memory")
        interpret = compiler.require("tc_ir", "interpret")
        raw_ints = any(is_pointer(k) and _is_plain_int(a) for k, a in zip(sig.kinds, args))
        memory = memory_cls(allow_raw=raw_ints)
        values: list[object] = []
        for i, (kind, value) in enumerate(zip(sig.kinds, args)):
            if is_pointer(kind) and not _is_plain_int(value):
                values.append(_register(memory, value, sig.names[i], sig, i))
            else:
                values.append(value)
        values = sig.normalize(values)
        # bf16 scalars are normalised to their bit pattern for the GPU; the interpreter wants values
        for i, kind in enumerate(sig.kinds):
            if kind == "bf16":
                values[i] = float(args[i])  # type: ignore[arg-type]
        if grid[0] * grid[1] * grid[2] == 0:
            return
        interpret(self.function, values, grid, memory, source=self.source)


def _is_plain_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _register(memory: Any, value: object, name: str, sig: Signature, i: int) -> int:
    """Register a numpy array or a data_ptr() object; returns the address passed to the kernel."""
    if isinstance(value, np.ndarray):
        if value.flags.c_contiguous or value.flags.f_contiguous:
            return int(memory.register(value, name))
        lo, hi = _byte_bounds(value)
        memory.register_address(int(lo), int(hi - lo), name, value)
        return int(value.ctypes.data)
    data_ptr = getattr(value, "data_ptr", None)
    if callable(data_ptr):
        device = getattr(value, "device", None)
        if device is not None and getattr(device, "type", "cpu") != "cpu":
            raise ValueError(f"argument {i + 1} ('{name}') of {sig.describe()} is on {device}, "
                             f"but this kernel runs on the CPU interpreter (device='cpu')")
        address = int(data_ptr())
        storage = getattr(value, "untyped_storage", None)
        if callable(storage):
            st = storage()
            base, nbytes = int(st.data_ptr()), int(st.nbytes())
        else:
            base = address
            nbytes = int(getattr(value, "nbytes", 0) or 0)
        if nbytes and base:
            memory.register_address(base, nbytes, name, value)
        return address
    return value  # type: ignore[return-value]  # not a pointer: normalize() reports it


def _byte_bounds(a: np.ndarray[Any, Any]) -> tuple[int, int]:
    utils = getattr(np.lib, "array_utils", None)
    fn = getattr(utils, "byte_bounds", None) or getattr(np, "byte_bounds")
    lo, hi = fn(a)
    return int(lo), int(hi)
