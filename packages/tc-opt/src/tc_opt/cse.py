"""Common-subexpression elimination over structured regions: an op equal to one that dominates it
(same name, attributes, operands and result types) is replaced by it. Loads are never merged
(memory may change in between)."""

from __future__ import annotations

from collections.abc import Hashable

from tc_ir.ops import AtomicCASOp, AtomicRMWOp, Block, LoadOp, Module, Operation, Value

from .ir_utils import substitute
from .pass_manager import Pass


def _key(op: Operation) -> Hashable | None:
    if op.HAS_SIDE_EFFECTS or op.regions or isinstance(op, (LoadOp, AtomicRMWOp, AtomicCASOp)):
        return None
    try:
        attrs_key = tuple(sorted((k, repr(v)) for k, v in op.attributes().items()))
    except TypeError:
        return None
    return (
        op.NAME,
        attrs_key,
        tuple(id(v) for v in op.operands),
        tuple(r.type for r in op.results),
    )


class CommonSubexpressionElimination(Pass):
    """Common-subexpression elimination: an op equal to one that dominates it is replaced by it."""

    name = "cse"

    def run(self, module: Module) -> None:
        """Replace each op by an equal op that dominates it (loads are never merged)."""
        for f in module.functions:
            self._block(f.body, {}, {})

    def _block(self, block: Block, seen: dict[Hashable, Operation], replaced: dict[Value, Value]) -> None:
        """`replaced`: the results of the ops removed so far -> their equals, substituted into
        each later op as it is visited (every use follows its definition in the walk)."""
        scope = dict(seen)
        removed: set[Operation] = set()
        for op in list(block.ops):
            substitute(op, replaced)
            for r in op.regions:
                self._block(r, scope, replaced)
            k = _key(op)
            if k is None:
                continue
            prior = scope.get(k)
            if prior is None:
                scope[k] = op
                continue
            for old, new in zip(op.results, prior.results):
                replaced[old] = new
            removed.add(op)
        if removed:
            block.ops = [op for op in block.ops if op not in removed]
            for op in removed:
                op.parent = None
