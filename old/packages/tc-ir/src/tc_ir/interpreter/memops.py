"""Loads, stores and atomics: gather/scatter through `Memory`, with masks and fallback values.

Masked-off lanes never touch memory (their addresses are not even checked). A load without
`other` gives 0 in masked-off lanes. Atomics run element by element in tile order when a tile
names one address twice (so each sees the previous one's result), else as one gather+scatter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..ops import AtomicCASOp, AtomicRMWOp, LoadOp, Operation, StoreOp
from ..types import IRType, shape_of
from .dtypes import Array, from_storage, storage_dtype, to_storage, value_dtype
from .elementwise import make_binary
from .errors import MemoryFault, MisalignedAccessError, OutOfBoundsError
from .state import ProgramState

Env = list[Any]
Step = Callable[[Env], None]


def _fault(state: ProgramState, op: Operation, what: str, fault: MemoryFault, positions: Array | None,
           shape: tuple[int, ...]) -> Exception:
    flat = int(positions[fault.position]) if positions is not None else fault.position
    index = tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()
    pid = pid_for_message(state)
    where = state.where(op.loc)
    elem = f"element {list(index)} of the {list(shape)} tile" if shape else "the scalar access"
    if fault.kind == "align":
        return MisalignedAccessError(
            f"{where}: misaligned {what} in program {pid}: {elem}: {fault.detail}"
        )
    return OutOfBoundsError(
        f"{where}: out-of-bounds {what} in program {pid}: {elem} at address 0x{fault.address:x}; "
        f"{fault.detail}",
        loc=op.loc, program_id=pid, index=index, address=fault.address, buffer=fault.buffer,
    )


def pid_for_message(state: ProgramState) -> tuple[int, ...]:
    rank = 3 if state.grid[2] > 1 else 2 if state.grid[1] > 1 else 1
    return state.pid[:rank]


def _flat_mask(mask: Any, shape: tuple[int, ...]) -> Array | None:
    """Positions of the active lanes, or None when all are active."""
    m = np.broadcast_to(np.asarray(mask, dtype=bool), shape).reshape(-1)
    if m.all():
        return None
    return np.flatnonzero(m)


def compile_load(op: LoadOp, slot: Callable[[Any], int], state: ProgramState) -> Step:
    rtype: IRType = op.results[0].type
    shape = shape_of(rtype)
    sdt, vdt = storage_dtype(rtype), value_dtype(rtype)
    p = slot(op.operands[0])
    m = slot(op.operands[1]) if len(op.operands) > 1 else None
    o = slot(op.operands[2]) if len(op.operands) > 2 else None
    r = slot(op.results[0])
    scalar = not shape
    zero = vdt.type(0)

    def load(env: Env) -> None:
        addrs = np.asarray(env[p], dtype=np.int64).reshape(-1)
        positions = None if m is None else _flat_mask(env[m], shape)
        try:
            if positions is None:
                raw = state.memory.gather(addrs, sdt)
                out = from_storage(raw, rtype).reshape(shape)
            else:
                fill = env[o] if o is not None else zero
                out = np.array(np.broadcast_to(np.asarray(fill, dtype=vdt), shape))
                if positions.size:
                    raw = state.memory.gather(addrs[positions], sdt)
                    out.reshape(-1)[positions] = from_storage(raw, rtype)
        except MemoryFault as f:
            raise _fault(state, op, "load", f, positions, shape) from None
        env[r] = out[()] if scalar else out

    return load


def compile_store(op: StoreOp, slot: Callable[[Any], int], state: ProgramState) -> Step:
    vtype: IRType = op.operands[1].type
    shape = shape_of(op.operands[0].type)
    p, v = slot(op.operands[0]), slot(op.operands[1])
    m = slot(op.operands[2]) if len(op.operands) > 2 else None

    def store(env: Env) -> None:
        addrs = np.asarray(env[p], dtype=np.int64).reshape(-1)
        values = to_storage(np.broadcast_to(env[v], shape), vtype).reshape(-1)
        positions = None if m is None else _flat_mask(env[m], shape)
        try:
            if positions is None:
                state.memory.scatter(addrs, values)
            elif positions.size:
                state.memory.scatter(addrs[positions], values[positions])
        except MemoryFault as f:
            raise _fault(state, op, "store", f, positions, shape) from None

    return store


_RMW_KIND = {
    "add": "add", "fadd": "fadd", "max": "smax", "umax": "umax", "fmax": "fmax", "min": "smin",
    "umin": "umin", "fmin": "fmin", "and": "and", "or": "or", "xor": "xor",
}


def _atomic(op: Operation, slot: Callable[[Any], int], state: ProgramState,
            update: Callable[[Any, Array, list[Array]], Array], what: str) -> Step:
    """Shared driver: `update(old_values, active_positions, operand_values) -> new values`."""
    rtype: IRType = op.results[0].type
    shape = shape_of(rtype)
    sdt, vdt = storage_dtype(rtype), value_dtype(rtype)
    p = slot(op.operands[0])
    n_values = 2 if isinstance(op, AtomicCASOp) else 1
    vals = [slot(x) for x in op.operands[1 : 1 + n_values]]
    m = slot(op.operands[1 + n_values]) if len(op.operands) > 1 + n_values else None
    r = slot(op.results[0])

    def run(env: Env) -> None:
        mem = state.memory
        addrs = np.asarray(env[p], dtype=np.int64).reshape(-1)
        operands = [np.broadcast_to(np.asarray(env[s], dtype=vdt), shape).reshape(-1) for s in vals]
        positions = None if m is None else _flat_mask(env[m], shape)
        active = np.arange(addrs.size) if positions is None else positions
        out = np.zeros(addrs.size, dtype=vdt)
        a = addrs[active]
        try:
            if np.unique(a).size == a.size:
                old = from_storage(mem.gather(a, sdt), rtype)
                new = update(old, active, operands)
                mem.scatter(a, to_storage(new, rtype))
                out[active] = old
            else:  # one address named twice: element by element, in tile order
                for k, i in enumerate(active):
                    one = addrs[i : i + 1]
                    try:
                        old = from_storage(mem.gather(one, sdt), rtype)
                    except MemoryFault as f:
                        f.position = k
                        raise
                    new = update(old, np.array([i]), operands)
                    mem.scatter(one, to_storage(new, rtype))
                    out[i] = old[0]
        except MemoryFault as f:
            raise _fault(state, op, what, f, active, shape) from None
        env[r] = out[0] if not shape else out.reshape(shape)

    return run


def compile_atomic_rmw(op: AtomicRMWOp, slot: Callable[[Any], int], state: ProgramState) -> Step:
    elt = op.results[0].type
    elt = elt.element if hasattr(elt, "element") else elt  # type: ignore[union-attr]
    f: Callable[[Any, Any], Any] = (
        (lambda old, v: v) if op.kind == "xchg" else make_binary(_RMW_KIND[op.kind], elt)
    )

    def update(old: Any, active: Array, operands: list[Array]) -> Array:
        return np.asarray(f(old, operands[0][active]))

    return _atomic(op, slot, state, update, f"atomic {op.kind}")


def compile_atomic_cas(op: AtomicCASOp, slot: Callable[[Any], int], state: ProgramState) -> Step:
    rtype = op.results[0].type
    sdt = storage_dtype(rtype)
    bits = np.dtype(f"u{sdt.itemsize}")

    def update(old: Any, active: Array, operands: list[Array]) -> Array:
        cmp, value = operands[0][active], operands[1][active]
        same = to_storage(old, rtype).view(bits) == to_storage(cmp, rtype).view(bits)
        return np.where(same, value, old)

    return _atomic(op, slot, state, update, "atomic cas")
