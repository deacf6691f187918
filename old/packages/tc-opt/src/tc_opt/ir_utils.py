"""Small helpers over tc_ir that several passes need: use lists, constants, erasing and cloning."""

from __future__ import annotations

from collections.abc import Iterator

from tc_ir.ops import Block, ConstantOp, Function, Module, Operation, OpResult, Value
from tc_ir.types import IRType, TileType


def uses(root: Block) -> dict[Value, list[Operation]]:
    """Every value used in `root` (and nested blocks) mapped to the ops that use it."""
    out: dict[Value, list[Operation]] = {}
    for op in root.walk():
        for v in op.operands:
            out.setdefault(v, []).append(op)
    return out


def constant_of(v: Value) -> int | float | bool | None:
    """The constant a value holds (a scalar constant or a constant-filled tile), else None."""
    if isinstance(v, OpResult) and isinstance(v.op, ConstantOp):
        return v.op.value
    return None


def is_tile(t: IRType) -> bool:
    return isinstance(t, TileType)


def erase(op: Operation) -> None:
    if op.parent is not None:
        op.parent.remove(op)


def functions(module: Module) -> Iterator[Function]:
    yield from module.functions


def blocks_of(root: Block) -> Iterator[Block]:
    """`root` and every block nested in it."""
    yield root
    for op in root.ops:
        for r in op.regions:
            yield from blocks_of(r)


def replace_uses(root: Block, old: Value, new: Value) -> None:
    for op in root.walk():
        if any(v is old for v in op.operands):
            op.operands = [new if v is old else v for v in op.operands]


def substitute(op: Operation, replaced: dict[Value, Value]) -> None:
    """`op`'s operands through `replaced` (old value -> new): `replace_uses` deferred to the visit
    of each user. A pass that walks the ops in order (definitions before uses) and replaces many
    values does so in one walk instead of one walk per value (quadratic: minutes for a kernel of
    a few thousand statements)."""
    if replaced and any(v in replaced for v in op.operands):
        op.operands = [replaced.get(v, v) for v in op.operands]


def clone_op(op: Operation, mapping: dict[Value, Value]) -> Operation:
    """A deep copy of `op` (its regions too) reading `mapping`'s values in place of the keys;
    the copies' results and block arguments are added to `mapping`."""
    regions = []
    for region in op.regions:
        block = Block([a.type for a in region.args], [a.name_hint for a in region.args])
        mapping.update(zip(region.args, block.args))
        for inner in region.ops:
            block.append(clone_op(inner, mapping))
        regions.append(block)
    new = type(op).create([mapping.get(v, v) for v in op.operands], [r.type for r in op.results], op.attributes(),
                          regions, loc=op.loc)
    for result, copied in zip(op.results, new.results):
        copied.name_hint = result.name_hint
        mapping[result] = copied
    return new
