"""Loop-invariant code motion: pure ops of a loop body whose operands are all defined outside the
loop move in front of the loop, so they run once instead of once per iteration (e.g. the
`TK * ldb` pointer increment of the spec's matmul). Loads, stores, atomics and ops with regions
stay put; integer division and remainder stay too, since a hoisted op also runs when the loop
runs zero times."""

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

from .pass_manager import Pass

#: Integer kinds that may fault or misbehave on operands the loop guard would have excluded.
_UNSAFE_KINDS = frozenset({"sdiv", "udiv", "srem", "urem"})


def hoistable(op: Operation) -> bool:
    """Whether `op` may run once before its loop: pure, no regions, no memory, no division."""
    if op.HAS_SIDE_EFFECTS or op.regions or not op.results:
        return False
    if isinstance(op, (LoadOp, AtomicRMWOp, AtomicCASOp, ConvertLayoutOp)):
        return False
    if isinstance(op, BinaryOp) and op.kind in _UNSAFE_KINDS:
        return False
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


def hoist_loop(loop: Operation) -> int:
    """Move the invariant ops of `loop`'s regions (not of nested regions) before it; returns how
    many moved. Nested loops are handled first by the caller, so invariants bubble outwards."""
    outer = loop.parent
    assert outer is not None
    inside = _defined_inside(loop)
    moved = 0
    for region in loop.regions:
        for op in list(region.ops):
            if not hoistable(op) or any(v in inside for v in op.operands):
                continue
            region.remove(op)
            outer.insert(outer.ops.index(loop), op)
            inside.difference_update(op.results)
            moved += 1
    return moved


def hoist_block(block: Block) -> int:
    moved = 0
    for op in list(block.ops):
        for r in op.regions:
            moved += hoist_block(r)
        if isinstance(op, (ForOp, WhileOp)):
            moved += hoist_loop(op)
    return moved


class LoopInvariantCodeMotion(Pass):
    """Loop-invariant code motion: pure ops whose operands come from outside a loop run once,
    in front of it."""

    name = "licm"

    def run(self, module: Module) -> None:
        """Move the pure, loop-invariant ops of every loop in front of it, so they run once."""
        for f in module.functions:
            hoist_block(f.body)
