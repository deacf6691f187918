"""Division by a loop-invariant divisor as a multiply by its reciprocal (Lemire, Kaser and Kurz,
"Faster remainder by direct computation", 2019): an i32 `/` or `%` inside a loop whose divisor is
defined outside it.

Why: a 32-bit integer division is some twenty SASS instructions through a floating-point
reciprocal, and a persistent kernel (tc_opt.persistent) divides its program index by the grid's
extents and the grouped tile order's width at every program, on the path from one program's last
wgmma to the next one's first (tc_nvptx.lower_wgmma pins some of it there) while the tensor cores
idle. With M = ceil(2^64 / d), computed once before the outermost loop the divisor does not
change in (one 64-bit division), the quotient of any n < 2^32 is the top 32 bits of the 96-bit
product M * n: two 32 x 32 -> 64-bit multiplies and an add (the theorem holds for every d < 2^32;
d = 1, whose M does not fit in 64 bits, is selected apart). Signed division divides magnitudes and
restores C's sign (truncation towards zero; the remainder takes the dividend's sign), skipping
the absolute value and the sign of operands known not to be negative (program ids, grid extents,
remainders of such). Division by a constant is left to LLVM, which does the same at compile time.

Not in the producer region of a warp-specialized kernel (tc_opt.warp_specialize): its divisions
are off the critical path (it runs ahead into the next program while the consumers finish this
one), and the reciprocals' 64-bit divisions would delay its first copies, and with them the
whole kernel (H200, 4096^3 fp16: 0.5-0.9% more cycles with them there).
"""

from __future__ import annotations

from tc_ir.ops import (
    BinaryOp,
    Block,
    BlockArgument,
    CastOp,
    ConstantOp,
    ForOp,
    GridDimOp,
    Module,
    NumProgramsOp,
    Operation,
    OpResult,
    ProgramIdOp,
    UnaryOp,
    Value,
    WarpSpecializeOp,
    WhileOp,
)
from tc_ir.types import I32, ScalarType

from .ir_utils import replace_uses
from .licm import hoist_scalars
from .pass_manager import Pass
from .pipeline_loops import _Emitter

I64 = ScalarType("i64")
_DIVISIONS = frozenset({"sdiv", "udiv", "srem", "urem"})
#: Integer ops whose result is not negative when every listed operand is not.
_NONNEGATIVE_IF_ALL = frozenset({"add", "mul", "sdiv", "smin"})
_NONNEGATIVE_IF_FIRST = frozenset({"srem", "udiv", "ashr", "lshr"})
#: (urem: the remainder is below both operands as unsigned numbers)
_NONNEGATIVE_IF_ANY = frozenset({"and", "smax", "urem"})


def nonnegative(v: Value, depth: int = 8) -> bool:
    """Whether i32 `v` is known never to be negative (signed arithmetic that does not overflow,
    as C's int arithmetic may assume): program ids and grid extents, constants >= 0, the index of
    a loop counting up from such, and sums, products, quotients and remainders of such."""
    if depth == 0:
        return False
    if isinstance(v, BlockArgument):
        loop = v.block.parent
        return (isinstance(loop, ForOp) and v.index == 0 and nonnegative(loop.operands[0], depth - 1)
                and nonnegative(loop.operands[2], depth - 1))
    if not isinstance(v, OpResult):
        return False
    op = v.op
    if isinstance(op, (ProgramIdOp, NumProgramsOp, GridDimOp)):
        return True
    if isinstance(op, ConstantOp):
        return isinstance(op.value, int) and op.value >= 0
    if isinstance(op, BinaryOp):
        a, b = op.operands
        if op.kind in _NONNEGATIVE_IF_ALL:
            return nonnegative(a, depth - 1) and nonnegative(b, depth - 1)
        if op.kind in _NONNEGATIVE_IF_FIRST:
            return nonnegative(a, depth - 1)
        if op.kind in _NONNEGATIVE_IF_ANY:
            return nonnegative(a, depth - 1) or nonnegative(b, depth - 1)
    return False


def _is_i32(v: Value) -> bool:
    return isinstance(v.type, ScalarType) and v.type.name == "i32"


def _defined_in(loop: Operation) -> set[Value]:
    out: set[Value] = set()
    for region in loop.regions:
        out.update(region.args)
        for op in region.walk():
            out.update(op.results)
            for inner in op.regions:
                out.update(inner.args)
    return out


class _Reciprocal:
    """A divisor's magnitude and the halves of M = ceil(2^64 / |d|), computed before a loop."""

    def __init__(self, e: _Emitter, d: Value, signed: bool, d_nonnegative: bool) -> None:
        self.d = d
        self.negative: Value | None = None
        magnitude = d
        if signed and not d_nonnegative:
            magnitude = e.add(UnaryOp.create([d], [I32], {"kind": "iabs"})).result
            self.negative = e.cmp("slt", d, e.const(I32, 0))
        self.magnitude = magnitude
        wide = e.add(CastOp.create([magnitude], [I64], {"kind": "zext"})).result
        m = e.binary("add", e.binary("udiv", e.const(I64, -1), wide), e.const(I64, 1))
        self.low = e.add(CastOp.create([m], [I32], {"kind": "trunc"})).result
        self.high = e.add(CastOp.create([e.binary("lshr", m, e.const(I64, 32))], [I32], {"kind": "trunc"})).result
        self.is_one = e.cmp("eq", magnitude, e.const(I32, 1))

    def quotient(self, e: _Emitter, n: Value, signed: bool, n_nonnegative: bool) -> Value:
        """n / d (C's truncating quotient where `signed`), computed at `e`."""
        magnitude = n
        n_negative = signed and not n_nonnegative
        if n_negative:
            magnitude = e.add(UnaryOp.create([n], [I32], {"kind": "iabs"})).result
        wide = e.add(CastOp.create([magnitude], [I64], {"kind": "zext"})).result

        def widened(x: Value) -> Value:
            return e.add(CastOp.create([x], [I64], {"kind": "zext"})).result

        def top(x: Value) -> Value:
            return e.add(CastOp.create([e.binary("lshr", x, e.const(I64, 32))], [I32], {"kind": "trunc"})).result

        carry = widened(top(e.binary("mul", widened(self.low), wide)))
        q = top(e.binary("add", e.binary("mul", widened(self.high), wide), carry))
        q = e.select(self.is_one, magnitude, q)
        if not signed:
            return q
        flip: Value | None
        if n_negative and self.negative is not None:
            flip = e.cmp("slt", e.binary("xor", n, self.d), e.const(I32, 0))
        elif n_negative:
            flip = e.cmp("slt", n, e.const(I32, 0))
        else:
            flip = self.negative
        if flip is None:
            return q
        return e.select(flip, e.binary("sub", e.const(I32, 0), q), q)


def _outermost_invariant_loop(op: Operation, d: Value, inside: dict[Operation, set[Value]]) -> Operation | None:
    """The outermost loop around `op` that `d` is not defined in (None: not in such a loop)."""
    best: Operation | None = None
    block = op.parent
    while block is not None and block.parent is not None:
        owner = block.parent
        if isinstance(owner, (ForOp, WhileOp)):
            if owner not in inside:
                inside[owner] = _defined_in(owner)
            if d in inside[owner]:
                break
            best = owner
        block = owner.parent
    return best


def _in_producer(op: Operation) -> bool:
    """Whether `op` is in the producer region of a warp-specialized kernel."""
    block = op.parent
    while block is not None and block.parent is not None:
        owner = block.parent
        if isinstance(owner, WarpSpecializeOp) and block is owner.producer:
            return True
        block = owner.parent
    return False


def reduce_divisions(root: Block) -> int:
    """Rewrite the invariant-divisor i32 divisions and remainders under `root`; returns how many."""
    inside: dict[Operation, set[Value]] = {}
    reciprocals: dict[tuple[Operation, Value, bool], _Reciprocal] = {}
    quotients: dict[tuple[Block, Value, Value, bool], Value] = {}
    count = 0
    # (what is known of the operands' signs, before the rewrite hides a remainder's)
    found = [(op, nonnegative(op.operands[0]), nonnegative(op.operands[1])) for op in root.walk()
             if isinstance(op, BinaryOp) and op.kind in _DIVISIONS and _is_i32(op.result)]
    for op, n_nonnegative, d_nonnegative in found:
        n, d = op.operands
        if isinstance(d, OpResult) and isinstance(d.op, ConstantOp):
            continue
        if _in_producer(op):
            continue  # (see the module's doc)
        loop = _outermost_invariant_loop(op, d, inside)
        block = op.parent
        if loop is None or loop.parent is None or block is None:
            continue
        signed = op.kind in ("sdiv", "srem")
        key = (loop, d, signed)
        if key not in reciprocals:
            reciprocals[key] = _Reciprocal(_Emitter(loop.parent, loop.parent.ops.index(loop)), d, signed,
                                           d_nonnegative)
        e = _Emitter(block, block.ops.index(op))
        qkey = (block, n, d, signed)
        q = quotients.get(qkey)
        if q is None:
            q = quotients[qkey] = reciprocals[key].quotient(e, n, signed, n_nonnegative)
        result = q if op.kind in ("sdiv", "udiv") else e.binary("sub", n, e.binary("mul", q, d))
        if result.name_hint is None:
            result.name_hint = op.result.name_hint
        replace_uses(root, op.result, result)
        block.remove(op)
        count += 1
    return count


class InvariantDivision(Pass):
    """See the module's doc."""

    name = "invariant-division"

    def run(self, module: Module) -> None:
        for f in module.functions:
            hoist_scalars(f.body)  # (the persistent loops took in the kernel's invariant divisors)
            reduce_divisions(f.body)


__all__ = ["InvariantDivision", "nonnegative", "reduce_divisions"]
