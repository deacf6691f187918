"""Shared-memory buffers made by local_alloc: their size, and every op that touches one through
its views (subview, local_trans, and a local_load for an FMA dot, which code generation keeps as a
view that the dot reads itself). The allocator keeps a buffer alive until its last such user (to
the end of a loop that uses it without defining it)."""

from __future__ import annotations

from tc_ir.layouts import DotOperand, Mma
from tc_ir.ops import LocalAllocOp, LocalLoadOp, LocalSubviewOp, LocalTransOp, Operation, Value
from tc_ir.types import PointerType, TileType

VIEWS = (LocalSubviewOp, LocalTransOp)


def buffer_bytes(op: Operation) -> int:
    """Bytes of the buffer a local_alloc makes (0 for other ops)."""
    if not isinstance(op, LocalAllocOp):
        return 0
    t = op.result.type
    assert isinstance(t, TileType)
    e = t.element
    return t.storage_numel * (8 if isinstance(e, PointerType) else e.bytes)


def is_view(op: Operation) -> bool:
    """Whether `op`'s result still refers to the buffer it reads: a subview, a local_trans, or a
    local_load of an FMA or wgmma dot operand (the dot reads shared memory where it runs, not
    here)."""
    if isinstance(op, VIEWS):
        return True
    if isinstance(op, LocalLoadOp):
        t = op.result.type
        if not (isinstance(t, TileType) and isinstance(t.layout, DotOperand)):
            return False
        parent = t.layout.parent
        return not isinstance(parent, Mma) or parent.version == 3  # FMA and wgmma read it there
    return False


def buffer_users(op: Operation, users: dict[Value, list[Operation]]) -> list[Operation]:
    """The ops that read or write the buffer of `op` (a local_alloc), directly or through views."""
    out: list[Operation] = []
    todo = [op.result]
    while todo:
        v = todo.pop()
        for u in users.get(v, []):
            out.append(u)
            if is_view(u):
                todo.append(u.result)
    return out
