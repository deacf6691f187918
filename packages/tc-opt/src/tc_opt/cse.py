"""Common-subexpression elimination over structured regions: an op equal to one that dominates it
(same name, attributes, operands and result types) is replaced by it. Loads are never merged
(memory may change in between)."""

from __future__ import annotations

from collections.abc import Hashable

from tc_ir.ops import AtomicCASOp, AtomicRMWOp, Block, LoadOp, Module, Operation

from .ir_utils import replace_uses
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
    name = "cse"

    def run(self, module: Module) -> None:
        for f in module.functions:
            self._block(f.body, {}, f.body)

    def _block(self, block: Block, seen: dict[Hashable, Operation], root: Block) -> None:
        scope = dict(seen)
        for op in list(block.ops):
            for r in op.regions:
                self._block(r, scope, root)
            k = _key(op)
            if k is None:
                continue
            prior = scope.get(k)
            if prior is None:
                scope[k] = op
                continue
            for old, new in zip(op.results, prior.results):
                replace_uses(root, old, new)
            block.remove(op)
