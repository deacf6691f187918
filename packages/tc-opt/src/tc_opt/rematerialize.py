"""Rematerialization: a cheap tile computed before a loop, not used inside it but used after it,
would occupy registers for the whole loop (one register per element per thread). It is
recomputed right after the loop instead, from the scalars it was built from (program ids,
arguments, constants), so the loop runs with those registers free. This is what the spec's
matmul_remat kernel does by hand with its second `rm`/`rn`; tc does it for every kernel.

Cheap: make_range, splat, expand_dims, broadcast, constants, and integer/pointer arithmetic,
comparisons, casts and selects over cheap tiles and scalars, and layout conversions of them. Tiles the loop uses anyway are live
across it already and are reused as they are."""

from __future__ import annotations

from tc_ir.ops import (
    AddPtrOp,
    AssumeOp,
    BinaryOp,
    Block,
    BroadcastOp,
    CastOp,
    CmpOp,
    ConstantOp,
    ConvertLayoutOp,
    ExpandDimsOp,
    ForOp,
    MakeRangeOp,
    Module,
    Operation,
    OpResult,
    SelectOp,
    SplatOp,
    Value,
    WhileOp,
)
from tc_ir.types import ScalarType, TileType, element_of

from .pass_manager import Pass

CHEAP_OPS = (
    MakeRangeOp, SplatOp, BroadcastOp, ExpandDimsOp, ConstantOp, BinaryOp, CmpOp, CastOp, SelectOp, AddPtrOp,
    ConvertLayoutOp, AssumeOp,
)

#: Deepest expression tree that is recomputed (keeps the cost bounded).
MAX_DEPTH = 12


def _is_tile(v: Value) -> bool:
    return isinstance(v.type, TileType)


def _cheap_op(op: Operation) -> bool:
    if not isinstance(op, CHEAP_OPS) or len(op.results) != 1:
        return False
    elem = element_of(op.result.type)
    if isinstance(op, BinaryOp) and isinstance(elem, ScalarType) and elem.is_float:
        return False  # float math is not free, and keeps its value anyway
    if isinstance(op, BinaryOp) and op.kind in ("sdiv", "udiv", "srem", "urem"):
        return False
    return True


class _Remat:
    """Rematerializes values used after one loop."""

    def __init__(self, loop: Operation, block: Block) -> None:
        self.loop = loop
        self.block = block
        self.used_inside: set[Value] = set()
        for r in loop.regions:
            for op in r.walk():
                self.used_inside.update(op.operands)
        self.position = {op: i for i, op in enumerate(block.ops)}
        self.clones: dict[Value, Value] = {}
        self.memo: dict[Value, bool] = {}

    def defined_before(self, v: Value) -> bool:
        if not isinstance(v, OpResult):
            return True  # arguments of the function or of an enclosing region
        i = self.position.get(v.op)
        return i is None or i < self.position[self.loop]

    def candidate(self, v: Value, depth: int = 0) -> bool:
        """A tile defined before the loop that can be recomputed from live values."""
        if v in self.memo:
            return self.memo[v]
        ok = (
            isinstance(v, OpResult)
            and _is_tile(v)
            and v not in self.used_inside
            and v.op.parent is self.block
            and self.defined_before(v)
            and _cheap_op(v.op)
            and depth <= MAX_DEPTH
            and all(self.available(x, depth + 1) for x in v.op.operands)
        )
        self.memo[v] = ok
        return ok

    def available(self, v: Value, depth: int) -> bool:
        """Usable after the loop: a scalar, a tile live across the loop anyway, or cheap."""
        if not _is_tile(v) or v in self.used_inside or not isinstance(v, OpResult):
            return True
        if v.op.parent is not self.block:
            return True
        return self.candidate(v, depth)

    def clone(self, v: Value, at: list[Operation]) -> Value:
        if v in self.clones:
            return self.clones[v]
        if not (_is_tile(v) and isinstance(v, OpResult) and self.memo.get(v)):
            return v
        op = v.op
        operands = [self.clone(x, at) for x in op.operands]
        new = type(op).create(operands, [v.type], op.attributes(), loc=op.loc)
        if isinstance(v, OpResult) and v.name_hint:
            new.result.name_hint = v.name_hint
        at.append(new)
        self.clones[v] = new.result
        return new.result

    def run(self) -> int:
        loop_index = self.position[self.loop]
        after = self.block.ops[loop_index + 1 :]
        targets: list[Value] = []
        for op in after:
            for user in op.walk():
                for v in user.operands:
                    if v not in targets and _is_tile(v) and self.candidate(v):
                        targets.append(v)
        if not targets:
            return 0
        new_ops: list[Operation] = []
        for v in targets:
            self.clone(v, new_ops)
        for i, op in enumerate(new_ops):
            self.block.insert(loop_index + 1 + i, op)
        for op in after:
            for user in op.walk():
                user.operands = [self.clones.get(x, x) for x in user.operands]
        return len(new_ops)


def rematerialize_block(block: Block) -> int:
    count = 0
    for op in list(block.ops):
        for r in op.regions:
            count += rematerialize_block(r)
    for op in list(block.ops):
        if isinstance(op, (ForOp, WhileOp)) and op.parent is block:
            count += _Remat(op, block).run()
    return count


class Rematerialize(Pass):
    """Recompute cheap tiles after a loop instead of keeping them live across it (then DCE drops
    the originals that nothing else uses)."""

    name = "rematerialize"

    def run(self, module: Module) -> None:
        """Recompute right after each loop the cheap tiles used only after it, instead of keeping them live."""
        for f in module.functions:
            rematerialize_block(f.body)
