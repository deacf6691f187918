"""Dead-code elimination: drop ops without side effects whose results nobody uses."""

from __future__ import annotations

from tc_ir.ops import Block, LoadOp, Module, Operation

from .ir_utils import blocks_of, uses
from .pass_manager import Pass


def _removable(op: Operation) -> bool:
    if op.HAS_SIDE_EFFECTS or op.regions:
        return False
    if isinstance(op, LoadOp) and op.volatile:
        return False
    return True


class DeadCodeElimination(Pass):
    """Dead-code elimination: ops without side effects whose results nobody uses are dropped."""

    name = "dce"

    def run(self, module: Module) -> None:
        """Drop the ops without side effects whose results nobody uses."""
        for f in module.functions:
            eliminate_dead_code(f.body)


def eliminate_dead_code(root: Block) -> None:
    while True:
        used = uses(root)
        dead = [
            op
            for block in blocks_of(root)
            for op in block.ops
            if _removable(op) and not any(r in used for r in op.results)
        ]
        if not dead:
            return
        for op in dead:
            assert op.parent is not None
            op.parent.remove(op)
