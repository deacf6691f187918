"""Loop-invariant code motion: pure ops of a loop body whose operands are all defined outside the
loop move in front of the loop, so they run once instead of once per iteration (e.g. the
`TK * ldb` pointer increment of the spec's matmul). Loads, stores, atomics and ops with regions
stay put; integer division and remainder stay too, since a hoisted op also runs when the loop
runs zero times (`hoist_scalars` hoists them, for the GPU, where a division does not trap)."""

from __future__ import annotations

from tc_ir.ops import (
    AtomicCASOp,
    AtomicRMWOp,
    BinaryOp,
    Block,
    ConvertLayoutOp,
    ForOp,
    LoadOp,
    Module,
    Operation,
    Value,
    WhileOp,
)
from tc_ir.types import TileType

from .pass_manager import Pass

#: Integer kinds that may fault or misbehave on operands the loop guard would have excluded.
_UNSAFE_KINDS = frozenset({"sdiv", "udiv", "srem", "urem"})


def hoistable(op: Operation, scalar_divisions: bool = False) -> bool:
    """Whether `op` may run once before its loop: pure, no regions, no memory, no division (but
    scalar ones with `scalar_divisions`: with no trap on the GPU, a division the loop would not
    have run only costs its time)."""
    if op.HAS_SIDE_EFFECTS or op.regions or not op.results:
        return False
    if isinstance(op, (LoadOp, AtomicRMWOp, AtomicCASOp, ConvertLayoutOp)):
        return False
    if isinstance(op, BinaryOp) and op.kind in _UNSAFE_KINDS:
        return scalar_divisions and not any(isinstance(r.type, TileType) for r in op.results)
    return True


def _defined_inside(loop: Operation) -> set[Value]:
    out: set[Value] = set()
    for r in loop.regions:
        out.update(r.args)
        for op in r.walk():
            out.update(op.results)
            for inner in op.regions:
                out.update(inner.args)
    return out


def hoist_loop(loop: Operation, scalars: bool = False) -> int:
    """Move the invariant ops of `loop`'s regions (not of nested regions) before it; returns how
    many moved. Nested loops are handled first by the caller, so invariants bubble outwards.
    `scalars`: only ops with scalar results (divisions included), none of tiles."""
    outer = loop.parent
    assert outer is not None
    inside = _defined_inside(loop)
    moved = 0
    for region in loop.regions:
        for op in list(region.ops):
            if scalars and any(isinstance(r.type, TileType) for r in op.results):
                continue
            if not hoistable(op, scalars) or any(v in inside for v in op.operands):
                continue
            region.remove(op)
            outer.insert(outer.ops.index(loop), op)
            inside.difference_update(op.results)
            moved += 1
    return moved


def hoist_block(block: Block, scalars: bool = False) -> int:
    moved = 0
    for op in list(block.ops):
        for r in op.regions:
            moved += hoist_block(r, scalars)
        if isinstance(op, (ForOp, WhileOp)):
            moved += hoist_loop(op, scalars)
    return moved


def hoist_scalars(block: Block) -> int:
    """Hoist the invariant scalar computations (divisions included) out of the loops under
    `block`, for a GPU pass after the loops over a persistent kernel's programs exist (they take
    the whole kernel in, the divisions of the grid's extents by the tile sizes too); tiles stay,
    as the pipeline placed them (hoisting one keeps its registers through the loop)."""
    return hoist_block(block, scalars=True)


class LoopInvariantCodeMotion(Pass):
    name = "licm"

    def run(self, module: Module) -> None:
        for f in module.functions:
            hoist_block(f.body)
