"""Accumulators that start at zero are not written before the loop's first wgmma, which is told
not to read them (its scale-d operand: `iv != lb`); they start undefined.

Why: ptxas keeps a loop's wgmma in flight only when no other instruction touches the
accumulator's registers between a wgmma and the wait for it. Zeroing them with movs before the
loop is such an instruction wherever LLVM lays it out between the loop and its final wait (the
path that skips a loop of no iterations); ptxas then serializes every wgmma (advisories C7514,
C7515), which cost the bulk-store kernels 10-20% on an H100 (4096^3: 0.83 -> 0.99x cuBLAS for
the persistent one). A loop that ran no iteration gets its zeros from the final dot_wait (its
`valid` operand, `lb < ub`), zeroed in the wait's own asm statement. Inside an enclosing loop
(a persistent kernel's loop over the programs) the zeros stay (see `start_undefined`), and with
them the wait needs no `valid`: 128 selp a thread at every program's end (fp16 128x256 over 8
warps), on the path from the last wgmma to the epilogue's stores while the tensor cores idle.
"""

from __future__ import annotations

import math

from tc_ir.ops import CmpOp, DotOp, DotWaitOp, ForOp, Module, OpResult, UndefOp
from tc_ir.types import I1, TileType

from .dot_layouts import is_wgmma_dot
from .ir_utils import constant_of, uses
from .pass_manager import Pass
from .shared_alloc import loops_of


def is_positive_zero(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == 0 and math.copysign(1.0, v) > 0


def zero_started_dot(loop: ForOp, index: int) -> tuple[DotOp, DotWaitOp] | None:
    """(the dot, the final wait) when loop-carried value `index` (0 = the first iter arg) is the
    accumulator of an asynchronous wgmma dot: it starts as a tile of +0, only the dot reads it,
    the dot's result (through a dot_wait) comes back as it, and one dot_wait after the loop is all
    that reads the loop's result; else None."""
    body, parent = loop.body, loop.parent
    term = body.terminator
    arg = body.args[index + 1]
    if term is None or parent is None or not isinstance(arg.type, TileType):
        return None
    init = loop.inits[index]
    if init.type != arg.type or not is_positive_zero(constant_of(init)):
        return None
    readers = uses(body).get(arg, [])
    dot = readers[0] if len(readers) == 1 else None
    if (not isinstance(dot, DotOp) or not is_wgmma_dot(dot) or not dot.asynchronous
            or dot.parent is not body or len(dot.operands) != 3 or dot.operands[2] is not arg):
        return None
    back = term.operands[index]
    if isinstance(back, OpResult) and isinstance(back.op, DotWaitOp) and back.op.parent is body:
        back = back.op.operands[0]
    if back is not dot.result:
        return None
    result = loop.results[index]
    waits = uses(parent).get(result, [])
    wait = waits[0] if len(waits) == 1 else None
    if not isinstance(wait, DotWaitOp) or wait.parent is not parent or len(wait.operands) != 1:
        return None
    return dot, wait


def start_undefined(loop: ForOp, index: int, dot: DotOp, wait: DotWaitOp) -> None:
    """Rewrite `loop` in place so that iter arg `index` starts undefined (outside other loops;
    inside one it stays zero), `dot` reads it only after the first iteration (iv != lb) and, where
    it starts undefined, `wait` gives zeros when none ran (lb >= ub). Both flags come from the
    bounds, not from a carried i1: LLVM would peel the first iteration off to make such a phi
    constant, and ptxas serializes wgmma on that divergent path (C7520)."""
    parent = loop.parent
    assert parent is not None
    body = loop.body
    lb, ub = loop.operands[0], loop.operands[1]
    at = parent.ops.index(loop)
    # (inside a loop, an undefined start would keep the accumulator's registers of the previous
    # iteration live around it, since ptxas cannot see that the first wgmma does not read them: a
    # persistent kernel spilled; there the zeros stay, which ptxas accepts once the wgmma does not
    # read them)
    undefined = not loops_of(loop)
    if undefined:
        undef = parent.insert(at, UndefOp.create([], [loop.inits[index].type]))
        loop.operands = [*loop.operands[:3 + index], undef.result, *loop.operands[4 + index:]]
    later = body.insert(body.ops.index(dot), CmpOp.create([body.args[0], lb], [I1], {"predicate": "ne"}))
    dot.operands = [*dot.operands, later.result]
    if undefined:
        ran = parent.insert(parent.ops.index(wait), CmpOp.create([lb, ub], [I1], {"predicate": "slt"}))
        wait.operands = [*wait.operands, ran.result]


class AccumulatorInit(Pass):
    """Zero-started accumulators of in-flight wgmma loops start undefined (see the module's doc)."""

    name = "accumulator-init"

    def run(self, module: Module) -> None:
        for f in module.functions:
            for loop in [op for op in f.walk() if isinstance(op, ForOp)]:
                for index in range(len(loop.inits)):
                    found = zero_started_dot(loop, index)
                    if found is not None:
                        start_undefined(loop, index, *found)


__all__ = ["AccumulatorInit", "is_positive_zero", "start_undefined", "zero_started_dot"]
