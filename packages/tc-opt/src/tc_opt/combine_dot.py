"""Combine `acc + dot(a, b, 0)` into `dot(a, b, acc)`: the accumulation then happens inside the
dot (in tensor-core accumulators) instead of in a separate element-wise add over the whole tile.

Legal only where it changes no result: the dot's own accumulator is a zero constant, the dot has
no other user, and the add works in the dot's result type (no cast in between: `fadd(acc,
fpext(dot_f16))` rounds the product to f16 first, so folding it would change the numbers).
Both operand orders and the loop-carried form `acc = acc + a @ b` (the add's `acc` a loop
argument) are covered, since the pattern is purely local."""

from __future__ import annotations

from tc_ir.ops import BinaryOp, Block, DotOp, Module, Operation, OpResult, Value

from .ir_utils import constant_of, uses
from .pass_manager import Pass


def _zero_acc(dot: DotOp) -> bool:
    c = constant_of(dot.operands[2])
    return c is not None and not isinstance(c, bool) and c == 0


def _single_use(v: Value, users: dict[Value, list[Operation]]) -> bool:
    return len(users.get(v, [])) == 1


def combine_block(block: Block, root: Block) -> int:
    users = uses(root)
    count = 0
    for b in _blocks(block):
        for op in list(b.ops):
            if not isinstance(op, BinaryOp) or op.kind not in ("fadd", "add"):
                continue
            for i in (0, 1):
                d = op.operands[i]
                acc = op.operands[1 - i]
                if not (isinstance(d, OpResult) and isinstance(d.op, DotOp)):
                    continue
                dot = d.op
                if dot.parent is not b or not _zero_acc(dot) or not _single_use(d, users):
                    continue
                if acc.type != d.type or op.result.type != d.type or acc is d:
                    continue
                if not _available_at(acc, dot):
                    continue
                dot.operands = [dot.operands[0], dot.operands[1], acc]
                _replace(root, op.result, d)
                b.remove(op)
                count += 1
                users = uses(root)
                break
    return count


def _available_at(v: Value, op: DotOp) -> bool:
    """`v` is defined before `op` (it will become the dot's operand)."""
    if not isinstance(v, OpResult):
        return True  # a block argument: dominates everything in its block and below
    blk = op.parent
    cur: Operation = op
    while blk is not None:
        if v.op.parent is blk:
            return blk.ops.index(v.op) < blk.ops.index(cur)
        parent = blk.parent
        if parent is None:
            return False
        cur = parent
        blk = parent.parent
    return False


def _replace(root: Block, old: Value, new: Value) -> None:
    for o in root.walk():
        if any(x is old for x in o.operands):
            o.operands = [new if x is old else x for x in o.operands]


def _blocks(block: Block) -> list[Block]:
    out = [block]
    for op in block.ops:
        for r in op.regions:
            out.extend(_blocks(r))
    return out


class CombineDotAdd(Pass):
    """Accumulate inside the dot: `acc + dot(a, b, 0)` becomes `dot(a, b, acc)` where no result
    changes."""

    name = "combine-dot"

    def run(self, module: Module) -> None:
        """Fold `acc + dot(a, b, 0)` into `dot(a, b, acc)` wherever that changes no result."""
        for f in module.functions:
            combine_block(f.body, f.body)
