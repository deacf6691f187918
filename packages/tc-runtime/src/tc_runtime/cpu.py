"""device="cpu": the same kernel API, run by the tc_ir reference interpreter.

Pointer arguments may be numpy arrays or objects with `data_ptr()` (a CPU torch tensor): their
memory is registered with the interpreter, so every access is bounds-checked and an out-of-bounds
access names the source line. A plain integer pointer is a raw host address the caller vouches for
(the interpreter's raw mode, without bounds information), as in the spec's `x.data_ptr()` style.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

from . import compiler
from .options import Options
from .signature import NP_DTYPES, Signature, declared_multiples, is_pointer, pointee_kind


class CpuKernel:
    """One lowered kernel function and its signature; `launch` interprets a whole grid."""

    def __init__(self, function: Any, source: str | None = None) -> None:
        self.function = function
        self.source = source
        kinds = [str(a.type) for a in function.args]
        self.signature = Signature(function.name, kinds, list(function.arg_names) or None,
                                   function.unsigned_args, declared_multiples(function.arg_attrs))
        #: the `opt` of grid callables (set by the kernel to its configuration's)
        self.opt = Options({}, 4, 3)

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
        try:
            interpret(self.function, values, grid, memory, source=self.source)
        except ValueError as exc:
            readonly = _read_only(sig, args)
            if not readonly or "read-only" not in str(exc):
                raise
            what = "is a read-only array" if len(readonly) == 1 else "are read-only arrays"
            raise ValueError(f"kernel '{sig.kernel}' stores to read-only memory: "
                             f"{', '.join(readonly)} of {sig.describe()} {what} (pass a "
                             f"writeable copy)") from None


class Region:
    """The host memory behind one pointer argument: to save, restore and compare it while the
    CPU auto-tuner runs every configuration on the same inputs."""

    def __init__(self, name: str, kind: str, address: int, nbytes: int) -> None:
        self.name = name
        self.pointee = pointee_kind(kind)
        self.address = address
        self.nbytes = nbytes

    def read(self) -> bytes:
        return ctypes.string_at(self.address, self.nbytes)

    def write(self, data: bytes) -> None:
        ctypes.memmove(self.address, data, len(data))

    def equal(self, a: bytes, b: bytes) -> bool:
        """Same values, with a tolerance for floats (configurations may sum in another order)."""
        import numpy as np

        if a == b:
            return True
        dtype = np.dtype(NP_DTYPES.get(self.pointee, "uint8"))
        if len(a) % dtype.itemsize or dtype.kind not in "f" and self.pointee != "bf16":
            return False
        x = np.frombuffer(a, dtype=dtype)
        y = np.frombuffer(b, dtype=dtype)
        if self.pointee == "bf16":
            x = (x.astype(np.uint32) << 16).view(np.float32)
            y = (y.astype(np.uint32) << 16).view(np.float32)
        tol = 1e-2 if self.pointee in ("f16", "bf16") else 1e-4
        return bool(np.allclose(x, y, rtol=tol, atol=tol, equal_nan=True))


def regions(sig: Signature, args: Sequence[object]) -> list[Region] | None:
    """The memory of every pointer argument, or None when one is a raw integer address (its
    extent is unknown, so it cannot be saved and restored)."""
    import numpy as np

    out: list[Region] = []
    for i, (kind, value) in enumerate(zip(sig.kinds, args)):
        if not is_pointer(kind):
            continue
        if isinstance(value, np.ndarray):
            lo, hi = _byte_bounds(value)
            out.append(Region(sig.names[i], kind, lo, hi - lo))
            continue
        data_ptr = getattr(value, "data_ptr", None)
        storage = getattr(value, "untyped_storage", None)
        if callable(data_ptr) and callable(storage):
            base, nbytes = _storage(sig, i, value)
            out.append(Region(sig.names[i], kind, base, nbytes))
            continue
        return None
    seen: set[tuple[int, int]] = set()
    unique = []
    for r in out:
        if r.nbytes and (r.address, r.nbytes) not in seen:
            seen.add((r.address, r.nbytes))
            unique.append(r)
    return unique


def _read_only(sig: Signature, args: Sequence[object]) -> list[str]:
    """The pointer arguments that are read-only numpy arrays, as "argument 2 ('x')": numpy's
    own error when the interpreter stores to one names no argument."""
    import numpy as np

    return [f"argument {i + 1} ('{sig.names[i]}')" for i, (kind, value) in
            enumerate(zip(sig.kinds, args))
            if is_pointer(kind) and isinstance(value, np.ndarray) and not value.flags.writeable]


def _is_plain_int(value: object) -> bool:
    import numpy as np

    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _register(memory: Any, value: object, name: str, sig: Signature, i: int) -> int:
    """Register a numpy array or a data_ptr() object; returns the address passed to the kernel."""
    import numpy as np

    dtype = getattr(value, "dtype", None)
    if dtype is not None:
        sig.check_elements(i, dtype)
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
        address = int(sig.data_pointer(i, value))
        if callable(getattr(value, "untyped_storage", None)):
            base, nbytes = _storage(sig, i, value)
        else:
            base = address
            nbytes = int(getattr(value, "nbytes", 0) or 0)
        if nbytes and base:
            memory.register_address(base, nbytes, name, value)
        return address
    return value  # type: ignore[return-value]  # not a pointer: normalize() reports it


def _storage(sig: Signature, i: int, value: Any) -> tuple[int, int]:
    """(address, bytes) of the memory tensor argument `i` spans, from its first element to its
    last: a view is bounded by its own elements, as a numpy array is, so a store past the end of
    `base[:50]` is out of bounds rather than a silent write into `base[50:]` (a TypeError names
    the argument for a tensor without storage, as `Signature.data_pointer` gives)."""
    from tc_ir.interpreter import tensor_span

    sig.data_pointer(i, value)
    return tensor_span(value)


def _byte_bounds(a: Any) -> tuple[int, int]:
    import numpy as np

    utils = getattr(np.lib, "array_utils", None)
    fn = getattr(utils, "byte_bounds", None) or getattr(np, "byte_bounds")
    lo, hi = fn(a)
    return int(lo), int(hi)
