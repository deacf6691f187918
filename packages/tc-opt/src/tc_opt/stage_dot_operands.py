"""Stage dot operands in shared memory: `convert_layout(x) -> #dot_op` becomes
`local_load(local_alloc(x))`, with a Shared layout that keeps x's memory order (so its stores are
vectorized) and is swizzled for ldmatrix on the tensor-core path. A transposed operand
(`trans(x)`, the spec's `^a`) is stored in x's order and read through a `local_trans` view: the
reader (ldmatrix or ldmatrix.trans) follows the order, no data moves twice. A tf32 B of wgmma
is the exception (wgmma reads 32-bit operands from shared memory K-major only): unless the dot
runs transposed with B^T in registers, it is stored K-major whatever x's order, in a pipelined
loop through a slot in x's order and a restaging copy (k_major_operands.restage). A tf32 A keeps
its order: where it is not K-major wgmma reads it into registers.
"""

from __future__ import annotations

from collections.abc import Mapping

from tc_ir.layouts import DotOperand, Mma
from tc_ir.ops import (
    Block,
    ConvertLayoutOp,
    DotOp,
    LocalAllocOp,
    LocalLoadOp,
    LoadOp,
    LocalTransOp,
    Module,
    Operation,
    OpResult,
    TransOp,
    Value,
)
from tc_ir.types import TileType

from .dot_layouts import is_wgmma_dot, register_order, shared_layout
from .k_major_operands import k_major_order, needs_k_major, register_a_operand, restage, restaged_operands
from .ir_utils import uses
from .pass_manager import Pass


def _insert_before(anchor: Operation, op: Operation) -> None:
    blk = anchor.parent
    assert blk is not None
    blk.insert(blk.ops.index(anchor), op)


def stage_operand(dot: DotOp, index: int, num_warps: int = 4, restaged: Mapping[int, LoadOp] | None = None) -> bool:
    """Rewrite operand `index` of `dot` to come from shared memory; False when it already does
    or is not a convert of a register tile. `restaged`: the dot's tf32 operands restaged K-major
    (k_major_operands.restaged_operands)."""
    restaged = restaged or {}
    v = dot.operands[index]
    t = v.type
    if not (isinstance(v, OpResult) and isinstance(v.op, ConvertLayoutOp)):
        return False
    if not (isinstance(t, TileType) and isinstance(t.layout, DotOperand)):
        return False
    swizzle = isinstance(t.layout.parent, Mma)
    src = v.op.operands[0]
    perm: tuple[int, ...] | None = None
    if isinstance(src, OpResult) and isinstance(src.op, TransOp):
        perm = src.op.perm
        src = src.op.operands[0]
    st = src.type
    if not isinstance(st, TileType) or st.layout is None:
        return False
    order = register_order(st)
    view: Value
    load = None
    transposed = isinstance(t.layout.parent, Mma) and t.layout.parent.transposed
    in_order = transposed or register_a_operand(index)  # (read into registers where not K-major)
    if is_wgmma_dot(dot) and needs_k_major(st.element) and not in_order:  # tf32: K-major, restaged or copied transposed
        order = k_major_order(index, perm)
        load = restaged.get(index)
        if load is not None:
            view = restage(dot, load, src, order[0], num_warps)
    if load is None:
        alloc = LocalAllocOp.create(
            [src], [TileType(st.shape, st.element, shared_layout(st.shape, order, st.element, swizzle,
                                                                  partial_panels=is_wgmma_dot(dot)))], loc=dot.loc
        )
        _insert_before(dot, alloc)
        view = alloc.result
    if perm is not None:
        at = view.type
        assert isinstance(at, TileType) and at.layout is not None
        lay = at.layout
        new_order = tuple(perm.index(d) for d in lay.order)  # type: ignore[union-attr]
        vt = TileType(tuple(st.shape[p] for p in perm), st.element, type(lay)(lay.vec, lay.per_phase, lay.max_phase, new_order))  # type: ignore[union-attr, call-arg, arg-type]
        tr = LocalTransOp.create([view], [vt], {"perm": perm}, loc=dot.loc)
        _insert_before(dot, tr)
        view = tr.result
    ld = LocalLoadOp.create([view], [t], loc=dot.loc)
    _insert_before(dot, ld)
    dot.operands[index] = ld.result
    return True


def _drop_dead(root: Block, ops: list[Operation]) -> None:
    """Remove the converts / transposes the staging made unused (in the order given)."""
    for op in ops:
        if op.parent is None:
            continue
        used = uses(root)
        if not any(r in used for r in op.results):
            op.parent.remove(op)


def _register_fast(v: Value) -> int:
    t = v.type
    assert isinstance(t, TileType)
    return register_order(t)[0]


class StageDotOperands(Pass):
    """Dot operands from registers to (swizzled) shared memory, read back in DotOperand layout."""

    name = "stage-dot-operands"

    def run(self, module: Module) -> None:
        for f in module.functions:
            dead: list[Operation] = []
            for op in list(f.walk()):
                if not isinstance(op, DotOp):
                    continue
                o = self.options
                restaged = restaged_operands(op, o.num_stages, o.arch, _register_fast) if is_wgmma_dot(op) else {}
                for i in (0, 1):
                    v = op.operands[i]
                    if stage_operand(op, i, o.num_warps, restaged) and isinstance(v, OpResult):
                        dead.append(v.op)
                        src = v.op.operands[0]
                        if isinstance(src, OpResult) and isinstance(src.op, TransOp):
                            dead.append(src.op)
            _drop_dead(f.body, dead)
