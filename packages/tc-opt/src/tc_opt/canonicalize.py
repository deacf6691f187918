"""Canonicalization: fold integer constants (i32 wraps, sdiv truncates toward zero) and apply the
algebraic identities that keep the alignment analysis and code generation simple."""

from __future__ import annotations

import math
import struct

from tc_ir.ops import (
    AddPtrOp,
    BinaryOp,
    Block,
    CastOp,
    CmpOp,
    ConstantOp,
    LoadOp,
    Module,
    Operation,
    SelectOp,
    OpResult,
    SplatOp,
    Value,
)
from tc_ir.types import ScalarType, TileType, element_of, shape_of

from .ir_utils import blocks_of, constant_of, replace_uses, substitute, uses
from .pass_manager import Pass


def _wrap(value: int, bits: int) -> int:
    """Two's complement wrap of an integer to `bits`, as a signed value (i1 stays 0/1)."""
    if bits == 1:
        return value & 1
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _unsigned(value: int, bits: int) -> int:
    return value & ((1 << bits) - 1)


def fold_int_binary(kind: str, a: int, b: int, bits: int) -> int | None:
    """The folded value of an integer binary op, or None where folding is unsafe (division by 0)."""
    ua, ub = _unsigned(a, bits), _unsigned(b, bits)
    if kind == "add":
        r = a + b
    elif kind == "sub":
        r = a - b
    elif kind == "mul":
        r = a * b
    elif kind in ("sdiv", "srem"):
        if b == 0:
            return None
        q = abs(a) // abs(b)
        q = q if (a >= 0) == (b >= 0) else -q
        r = q if kind == "sdiv" else a - q * b
    elif kind in ("udiv", "urem"):
        if ub == 0:
            return None
        r = ua // ub if kind == "udiv" else ua % ub
    elif kind == "and":
        r = a & b
    elif kind == "or":
        r = a | b
    elif kind == "xor":
        r = a ^ b
    elif kind == "shl":
        if not 0 <= ub < bits:
            return None
        r = a << ub
    elif kind == "ashr":
        if not 0 <= ub < bits:
            return None
        r = a >> ub
    elif kind == "lshr":
        if not 0 <= ub < bits:
            return None
        r = ua >> ub
    elif kind == "smax":
        r = max(a, b)
    elif kind == "smin":
        r = min(a, b)
    elif kind == "umax":
        r = max(ua, ub)
    elif kind == "umin":
        r = min(ua, ub)
    else:
        return None
    return _wrap(r, bits)


def fold_int_cmp(pred: str, a: int, b: int, bits: int) -> bool | None:
    ua, ub = _unsigned(a, bits), _unsigned(b, bits)
    table = {
        "eq": a == b, "ne": a != b, "slt": a < b, "sle": a <= b, "sgt": a > b, "sge": a >= b,
        "ult": ua < ub, "ule": ua <= ub, "ugt": ua > ub, "uge": ua >= ub,
    }  # fmt: skip
    return table.get(pred)


def _const_op(like: Operation, value: int | float | bool) -> ConstantOp:
    op = ConstantOp.create([], [like.result.type], {"value": value}, loc=like.loc)
    return op


class Canonicalize(Pass):
    """Fold constants and simplify x+0, x*1, x*0, addptr(p, 0), splat(c), select(c?, a, b)."""

    name = "canonicalize"

    def run(self, module: Module) -> None:
        """Fold and simplify each function until nothing changes (at most 8 rounds), then merge
        selects of loads into masked loads."""
        for f in module.functions:
            changed = True
            rounds = 0
            while changed and rounds < 8:
                changed = self._block(f.body, {})
                rounds += 1
            fold_select_of_load(f.body)

    def _block(self, block: Block, replaced: dict[Value, Value]) -> bool:
        """One round over `block`; `replaced` maps the results of the ops simplified so far to
        their new values, substituted into each later op as it is visited (every use follows its
        definition in the walk), and the block's ops are rebuilt once."""
        changed = False
        ops: list[Operation] = []
        for op in list(block.ops):
            substitute(op, replaced)
            for r in op.regions:
                changed |= self._block(r, replaced)
            new = self._simplify(op)
            if new is None:
                ops.append(op)
                continue
            if isinstance(new, Operation):
                new.parent = block
                ops.append(new)
                new_value: Value = new.result
            else:
                new_value = new
            replaced[op.result] = new_value
            op.parent = None
            changed = True
        if changed:
            block.ops = ops
        return changed

    def _simplify(self, op: Operation) -> Operation | Value | None:
        if isinstance(op, SplatOp):
            c = constant_of(op.operands[0])
            if c is not None:
                return _const_op(op, c)
            return None
        if isinstance(op, BinaryOp):
            return self._binary(op)
        if isinstance(op, CmpOp):
            a, b = (constant_of(v) for v in op.operands)
            elem = element_of(op.operands[0].type)
            if isinstance(a, int) and isinstance(b, int) and isinstance(elem, ScalarType) and elem.is_int:
                r = fold_int_cmp(op.predicate, int(a), int(b), elem.bits)
                if r is not None:
                    return _const_op(op, r)
            return None
        if isinstance(op, AddPtrOp):
            if constant_of(op.operands[1]) == 0 and not isinstance(constant_of(op.operands[1]), float):
                if op.operands[0].type == op.result.type:
                    return op.operands[0]
            return None
        if isinstance(op, SelectOp):
            c = constant_of(op.operands[0])
            if c is not None:
                pick = op.operands[1] if c else op.operands[2]
                if pick.type == op.result.type:
                    return pick
            return None
        if isinstance(op, CastOp):
            return self._cast(op)
        return None

    def _binary(self, op: BinaryOp) -> Operation | Value | None:
        a, b = op.operands
        ca, cb = constant_of(a), constant_of(b)
        elem = element_of(op.result.type)
        if not isinstance(elem, ScalarType) or not elem.is_int:
            return None
        if isinstance(ca, (int, bool)) and isinstance(cb, (int, bool)):
            r = fold_int_binary(op.kind, int(ca), int(cb), elem.bits)
            if r is not None:
                return _const_op(op, bool(r) if elem.bits == 1 else r)
            return None
        same = a.type == op.result.type, b.type == op.result.type
        if op.kind in ("add", "or", "xor", "sub", "shl", "ashr", "lshr") and cb == 0 and same[0]:
            return a
        if op.kind in ("add", "or", "xor") and ca == 0 and same[1]:
            return b
        if op.kind in ("mul", "sdiv", "udiv") and cb == 1 and same[0] and elem.bits > 1:
            return a
        if op.kind == "mul" and ca == 1 and same[1] and elem.bits > 1:
            return b
        if op.kind in ("mul", "and") and (ca == 0 or cb == 0) and elem.bits > 1:
            return _const_op(op, 0)
        return None

    def _cast(self, op: CastOp) -> Operation | None:
        c = constant_of(op.operands[0])
        src = element_of(op.operands[0].type)
        dst = element_of(op.result.type)
        if not isinstance(c, (int, bool)) or isinstance(c, float):
            return None
        if not (isinstance(src, ScalarType) and isinstance(dst, ScalarType)):
            return None
        v = int(c)
        if op.kind == "sext":
            return _const_op(op, _wrap(_wrap(v, src.bits), dst.bits) if src.bits > 1 else -v)
        if op.kind == "zext":
            return _const_op(op, _unsigned(v, src.bits))
        if op.kind == "trunc":
            r = _wrap(v, dst.bits)
            return _const_op(op, bool(r) if dst.bits == 1 else r)
        if op.kind == "sitofp":
            return _const_op(op, float(v)) if dst.name in ("f32", "f64") else None
        return None


def _float_in(value: float, t: ScalarType) -> float | None:
    """`value` when float type `t` holds it exactly (so fpext from `t` gives it back), else None."""
    if math.isnan(value) or math.isinf(value) or t.name == "f64":
        return value
    try:
        if t.name == "f16":
            narrow = float(struct.unpack("<e", struct.pack("<e", value))[0])
        else:  # f32, bf16: bf16 is the top half of an f32
            narrow = float(struct.unpack("<f", struct.pack("<f", value))[0])
            bits = struct.unpack("<I", struct.pack("<f", narrow))[0]
            if t.name == "bf16" and bits & 0xFFFF:
                return None
    except (OverflowError, struct.error):
        return None
    return narrow if narrow == value and math.copysign(1, narrow) == math.copysign(1, value) else None


def _int_range(kind: str, bits: int) -> tuple[int, int]:
    """The values an integer of `bits` holds read as signed (sext, sitofp) or unsigned."""
    if kind in ("sext", "sitofp"):
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def narrow_constant(kind: str, value: int | float | bool, src: ScalarType,
                    dst: ScalarType) -> int | float | None:
    """The constant c of type `src` that cast `kind` (from `src` to `dst`) turns into exactly
    `value`, or None where there is none: what lets a constant on the wide side of a conversion
    move to its narrow side."""
    if isinstance(value, bool) or src.bits <= 1:
        return None
    if kind == "fpext" and src.is_float and dst.is_float:
        return _float_in(float(value), src)
    if kind in ("sext", "zext") and src.is_int and dst.is_int and isinstance(value, int):
        lo, hi = _int_range(kind, src.bits)
        return _wrap(value, src.bits) if lo <= value <= hi else None
    if kind in ("sitofp", "uitofp") and src.is_int and dst.is_float:
        v = float(value)
        if not math.isfinite(v) or v != int(v) or (v == 0 and math.copysign(1, v) < 0):
            return None  # sitofp gives no -0.0
        lo, hi = _int_range(kind, src.bits)
        return _wrap(int(v), src.bits) if lo <= int(v) <= hi else None
    return None


def _loaded_through_cast(block: Block, v: Value, users: dict[Value, list[Operation]],
                         ) -> tuple[LoadOp, CastOp | None] | None:
    """(load, None) when `v` is a load's result, (load, cast) when it is a cast of one whose only
    user is that cast; each in `block`, `v` used once."""
    if not isinstance(v, OpResult) or v.op.parent is not block or len(users.get(v, [])) != 1:
        return None
    if isinstance(v.op, LoadOp):
        return v.op, None
    if not isinstance(v.op, CastOp):
        return None
    a = v.op.operands[0]
    if not (isinstance(a, OpResult) and isinstance(a.op, LoadOp)):
        return None
    if a.op.parent is not block or len(users.get(a, [])) != 1:
        return None
    return a.op, v.op


def fold_select_of_load(root: Block) -> int:
    """select(m, load(p), v) -> load(p, m, v): one masked load with a fallback value instead of a
    load of every element and a select (the masked-off elements are then never read, which is
    what `check ? *px : -F32_INFINITY` means). Legal when the load has no other user, is not
    volatile, has no mask or the same mask, and nothing with effects runs between the two.

    Also through a value-preserving conversion of the load with a constant v:
    select(m, cast(load(p)), c) -> cast(load(p, m, c')) with cast(c') == c, e.g. a half row read
    into float with -inf past its end: the fallback then goes into the load's registers (packed
    16-bit words) rather than one compare and select per element after the conversion."""
    users = uses(root)
    count = 0
    for block in list(blocks_of(root)):
        for sel in list(block.ops):
            if not isinstance(sel, SelectOp):
                continue
            cond, a, b = sel.operands
            found = _loaded_through_cast(block, a, users)
            if found is None:
                continue
            load, cast = found
            if load.volatile:
                continue
            loaded = load.result
            if not isinstance(cond.type, TileType) or cond.type.shape != shape_of(loaded.type):
                continue
            if len(load.operands) > 1 and load.operands[1] is not cond:
                continue
            if b.type != a.type:
                continue
            start, stop = block.ops.index(load), block.ops.index(sel)
            if any(o.HAS_SIDE_EFFECTS or o.regions for o in block.ops[start + 1 : stop]):
                continue
            other = b
            if cast is not None:
                c = constant_of(b)
                src, dst = element_of(loaded.type), element_of(a.type)
                if c is None or not (isinstance(src, ScalarType) and isinstance(dst, ScalarType)):
                    continue
                narrow = narrow_constant(cast.kind, c, src, dst)
                if narrow is None:
                    continue
                other_op = ConstantOp.create([], [loaded.type], {"value": narrow}, loc=sel.loc)
                block.insert(stop, other_op)
                other = other_op.result
                stop += 1
            new = LoadOp.create([load.operands[0], cond, other], [loaded.type], {"volatile": False},
                                loc=load.loc)
            if loaded.name_hint:
                new.result.name_hint = loaded.name_hint
            block.insert(stop, new)
            result = new.result
            if cast is not None:
                new_cast = CastOp.create([new.result], [a.type], {"kind": cast.kind}, loc=cast.loc)
                if sel.result.name_hint or a.name_hint:
                    new_cast.result.name_hint = sel.result.name_hint or a.name_hint
                block.insert(stop + 1, new_cast)
                result = new_cast.result
            replace_uses(root, sel.result, result)
            block.remove(sel)
            if cast is not None:
                block.remove(cast)
            block.remove(load)
            users = uses(root)
            count += 1
    return count
