"""The grid driver: binds arguments, then runs the compiled kernel once per program id."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ops import Function, Module
from ..types import PointerType, ScalarType, TileType
from ..verifier import verify
from .compiler import CompiledBlock, Compiler
from .dtypes import scalar
from .errors import InterpreterError
from .memory import Memory
from .state import ProgramState


def _grid3(grid: int | Sequence[int]) -> tuple[int, int, int]:
    dims = [grid] if isinstance(grid, (int, np.integer)) else list(grid)
    if not 1 <= len(dims) <= 3:
        raise InterpreterError(f"a launch grid has 1 to 3 dimensions, got {len(dims)}: {grid!r}")
    out: list[int] = []
    for d in dims:
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d < 0:
            raise InterpreterError(f"grid dimensions must be non-negative integers, got {grid!r}")
        out.append(int(d))
    while len(out) < 3:
        out.append(1)
    return out[0], out[1], out[2]


def _is_tensor(arg: object) -> bool:
    """A torch-like tensor: `data_ptr()` and `untyped_storage()` (torch is never imported here)."""
    return callable(getattr(arg, "data_ptr", None)) and callable(getattr(arg, "untyped_storage", None))


def _register_tensor(memory: Memory, tensor: Any, what: str, name: str) -> int:
    """Register the bytes a CPU tensor spans (from its first element to its last, by its
    strides) and return the address of its first element. A view is bounded by its own
    elements, as a numpy array is: an access past the end of `base[:50]` is out of bounds even
    where the storage goes on (it would overwrite elements the caller did not pass)."""
    device = getattr(tensor, "device", None)
    if device is not None and getattr(device, "type", "cpu") != "cpu":
        raise InterpreterError(f"{what} is a tensor on {device}: the interpreter runs on CPU memory")
    address, nbytes = tensor_span(tensor)
    if address > 0:  # (an empty tensor may have no storage at all)
        memory.register_address(address, nbytes, name, tensor)
    return address


def tensor_span(tensor: Any) -> tuple[int, int]:
    """(address of the first element, bytes up to the end of the last) of a torch-like tensor,
    by its shape and strides: the range a kernel given the tensor may touch. 0 bytes when it
    has no elements."""
    address = int(tensor.data_ptr())
    if int(tensor.numel()) == 0:
        return address, 0
    last = sum((int(n) - 1) * int(st) for n, st in zip(tensor.shape, tensor.stride()))
    return address, (last + 1) * int(tensor.element_size())


class Interpreter:
    """A kernel prepared once for the interpreter (verified unless check=False); call it to run
    a grid.

    >>> Interpreter(fn)(args=[x, y, n], grid=(cdiv(n, 1024),), memory=mem)
    """

    def __init__(self, function: Function | Module, *, source: str | None = None, check: bool = True) -> None:
        if isinstance(function, Module):
            if len(function.functions) != 1:
                names = [f.name for f in function.functions]
                raise InterpreterError(f"the module holds {len(names)} kernels {names}: pass one function")
            function = function.functions[0]
        if check:  # malformed IR is reported as such, not as a numpy error mid-run
            verify(function)
        self.function = function
        self.state = ProgramState(source)
        compiler = Compiler(self.state)
        self.body: CompiledBlock = compiler.block(function.body)
        self.num_slots = compiler.num_slots

    def bind(self, args: Sequence[Any], memory: Memory) -> list[Any]:
        """Arguments as interpreter values: numpy arrays and CPU tensors for pointer arguments are
        registered in `memory` (a tensor with the bytes its elements span) and passed by address; numbers
        become the argument's IR type."""
        fn = self.function
        params = fn.args
        if len(args) != len(params):
            raise InterpreterError(f"kernel {fn.name} takes {len(params)} arguments, got {len(args)}")
        out: list[Any] = []
        for i, (param, arg) in enumerate(zip(params, args)):
            name = fn.arg_names[i] if i < len(fn.arg_names) and fn.arg_names[i] else f"#{i}"
            t = param.type
            if isinstance(t, TileType):
                raise InterpreterError(f"argument {name} of {fn.name} is a tile; kernels take scalars and pointers")
            if isinstance(t, PointerType):
                if isinstance(arg, np.ndarray):
                    arg = memory.register(arg, name)
                elif _is_tensor(arg):
                    arg = _register_tensor(memory, arg, f"argument {name} of {fn.name}", name)
                if not isinstance(arg, (int, np.integer)) or isinstance(arg, bool):
                    raise InterpreterError(
                        f"argument {name} of {fn.name} is a pointer ({t}): pass a numpy array, a CPU "
                        f"tensor or an integer address, not {type(arg).__name__}"
                    )
                out.append(np.int64(arg))
                continue
            assert isinstance(t, ScalarType)
            if t.is_int and not isinstance(arg, (int, bool, np.integer, np.bool_)):
                raise InterpreterError(f"argument {name} of {fn.name} is {t}: pass an integer, not {arg!r}")
            if t.is_float and not isinstance(arg, (int, float, np.integer, np.floating)):
                raise InterpreterError(f"argument {name} of {fn.name} is {t}: pass a number, not {arg!r}")
            out.append(scalar(arg, t))
        return out

    def __call__(self, args: Sequence[Any], grid: int | Sequence[int], memory: Memory | None = None) -> Memory:
        memory = memory if memory is not None else Memory()
        state = self.state
        state.memory = memory
        values = self.bind(args, memory)
        gx, gy, gz = state.grid = _grid3(grid)
        env: list[Any] = [None] * self.num_slots
        body = self.body
        with np.errstate(all="ignore"):
            for z in range(gz):
                for y in range(gy):
                    for x in range(gx):
                        state.pid = (x, y, z)
                        body.run(env, values)
        return memory


def interpret(
    function: Function | Module,
    args: Sequence[Any],
    grid: int | Sequence[int],
    memory: Memory | None = None,
    *,
    source: str | None = None,
    allow_raw: bool = False,
) -> Memory:
    """Run `function` over the whole `grid` (1 to 3 dims) on host memory; returns the memory.

    Pointer arguments are byte addresses into `memory` (numpy arrays and CPU torch tensors passed
    directly are registered first, so that their accesses are bounds-checked). `source` (the
    kernel's source text) lets errors quote the offending line; `allow_raw` lets unregistered
    addresses reach raw host memory (see `Memory`)."""
    if memory is None:
        memory = Memory(allow_raw=allow_raw)
    elif allow_raw:
        memory.allow_raw = True
    return Interpreter(function, source=source)(args, grid, memory)
