"""Remove the ops the lowering made but nothing uses (constants left behind by folding, unused
loop variables...), so the IR handed on is what the program computes."""

from __future__ import annotations

from ..ops import Block, LoadOp, Operation


def _all_ops(block: Block) -> list[Operation]:
    return list(block.walk())


def prune_dead(body: Block) -> None:
    """Drop side-effect-free, region-free ops whose results are never used (to a fixed point).
    Volatile loads are kept."""
    while True:
        ops = _all_ops(body)
        used: set[int] = set()
        for op in ops:
            used.update(id(v) for v in op.operands)
        dead = [
            op
            for op in ops
            if not op.HAS_SIDE_EFFECTS
            and not op.regions
            and not (isinstance(op, LoadOp) and op.volatile)
            and op.parent is not None
            and all(id(r) not in used for r in op.results)
        ]
        if not dead:
            return
        for op in dead:
            assert op.parent is not None
            op.parent.remove(op)
